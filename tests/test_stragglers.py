import numpy as np
import pytest

from gencc import stragglers as st


def test_random_stragglers_are_seeded_and_sized():
    m = st.RandomStragglers(3)
    a = m.returned(10, np.random.default_rng(5))
    b = m.returned(10, np.random.default_rng(5))
    assert a.tolist() == b.tolist() and a.size == 7 and np.all(np.diff(a) > 0)


def test_contiguous_adversary_finds_the_worst_block():
    # error = how many of workers {4, 5} are missing: the worst block of 2 is exactly {4, 5}
    err = lambda ret: 2 - np.isin([4, 5], ret).sum()
    ret = st.ContiguousStragglers(2).returned(10, error=err)
    assert sorted(set(range(10)) - set(ret.tolist())) == [4, 5]


def test_greedy_adversary_maximises_step_by_step():
    weight = np.array([0.1, 5.0, 0.2, 3.0, 0.0, 1.0])
    err = lambda ret: weight.sum() - weight[ret].sum()
    ret = st.GreedyStragglers(2).returned(6, error=err)
    assert sorted(set(range(6)) - set(ret.tolist())) == [1, 3]


def test_bernoulli_rate():
    rng = np.random.default_rng(0)
    sizes = [st.BernoulliStragglers(0.2).returned(100, rng).size for _ in range(200)]
    assert abs(np.mean(sizes) - 80) < 1.0


@pytest.mark.parametrize("lat", [st.ShiftedExponential(1.0, 2.0), st.Pareto(1.0, 2.5), st.SlowNodes(1.0, 0.2, 8.0)])
def test_latency_models_are_positive_and_seeded(lat):
    a = lat.sample(50, np.random.default_rng(1))
    assert a.shape == (50,) and np.all(a > 0)
    assert np.array_equal(a, lat.sample(50, np.random.default_rng(1)))


def test_slow_nodes_are_bimodal():
    lat = st.SlowNodes(base=1.0, fraction=0.25, slowdown=10.0).sample(4000, np.random.default_rng(0))
    assert abs(np.mean(lat > 5) - 0.25) < 0.03


def test_wait_for_fastest_and_deadline():
    lat = np.array([3.0, 0.5, 2.0, 9.0, 1.0])
    assert st.LatencyStragglers(st.ShiftedExponential(), wait_for=2).returned_from_latencies(lat).tolist() == [1, 4]
    assert st.LatencyStragglers(st.ShiftedExponential(), deadline=2.5).returned_from_latencies(lat).tolist() == [1, 2, 4]
    both = st.LatencyStragglers(st.ShiftedExponential(), wait_for=4, deadline=1.0)
    assert both.returned_from_latencies(lat).tolist() == [0, 1, 2, 4]


def test_make_stragglers_names():
    assert isinstance(st.make_stragglers("greedy", n_stragglers=2), st.GreedyStragglers)
    assert isinstance(st.make_stragglers("pareto", wait_for=3), st.LatencyStragglers)
    with pytest.raises(ValueError, match="straggler model must be one of"):
        st.make_stragglers("cosmic-rays")


def _runs(missing_mask):
    """Maximal runs of True in a boolean mask."""
    edges = np.diff(np.concatenate([[0], missing_mask.astype(int), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


@pytest.mark.parametrize("S, blocks, N", [(1, 1, 5), (5, 1, 12), (5, 2, 12), (7, 3, 12), (4, 4, 8)])
def test_block_stragglers_lose_s_workers_in_exactly_that_many_separate_blocks(S, blocks, N):
    rng = np.random.default_rng(0)
    starts = set()
    for _ in range(200):
        ret = st.BlockStragglers(S, blocks).returned(N, rng)
        missing = ~np.isin(np.arange(N), ret)
        assert missing.sum() == S and np.all(np.diff(ret) > 0)
        runs = _runs(missing)
        assert len(runs) == blocks
        starts.add(runs[0][0])
    assert 0 in starts or S + blocks - 1 == N  # a block can sit at the front...
    assert max(starts) > 0  # ...and elsewhere
    a = st.BlockStragglers(S, blocks).returned(N, np.random.default_rng(3))
    np.testing.assert_array_equal(a, st.BlockStragglers(S, blocks).returned(N, np.random.default_rng(3)))


def test_block_stragglers_say_what_does_not_fit():
    with pytest.raises(ValueError, match="n_blocks must be <= n_stragglers"):
        st.BlockStragglers(2, 3)
    with pytest.raises(ValueError, match="do not fit apart"):
        st.BlockStragglers(4, 3).returned(5, np.random.default_rng(0))
