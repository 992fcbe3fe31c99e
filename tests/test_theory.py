"""The headline claims, measured: rate of the worst-case error, and GCC against its peers."""

import numpy as np

import gencc
from gencc import stragglers as st

X = np.random.default_rng(0).uniform(-3, 3, size=(200, 2))


def f(x):
    return x * np.sin(x)


def worst_case_mse(scheme, S, seed=1):
    """Max over the contiguous-block and greedy adversaries."""
    return max(
        gencc.evaluate(f, scheme, X, adv(S), rounds=3, seed=seed).mean("mse")
        for adv in (st.ContiguousStragglers, st.GreedyStragglers)
    )


def test_gcc_worst_case_error_decays_at_least_like_n_minus_3():
    K, S = 4, 2
    Ns = np.array([16, 24, 32, 48, 64])
    mse = np.array([worst_case_mse(gencc.GCC(K, N), S) for N in Ns])
    slope = np.polyfit(np.log(Ns), np.log(mse), 1)[0]
    assert slope <= -3.0, (slope, mse)


def test_gcc_default_beats_bacc_and_letcc_under_worst_case_stragglers():
    K, N, S = 6, 40, 4
    gcc = worst_case_mse(gencc.GCC(K, N), S)
    assert gcc < worst_case_mse(gencc.BACC(K, N), S)
    assert gcc < worst_case_mse(gencc.LeTCC(K, N), S)
