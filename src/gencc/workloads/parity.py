"""Parity models for ParM: learned F_P(x_1 + ... + x_k) ~ f(x_1) + ... + f(x_k).

A parity model has the base classifier's architecture, starts from its
weights and is trained (``tools/train_parity.py``) to minimise the mean
squared error between F_P(x_1 + ... + x_k) and f(x_1) + ... + f(x_k) over
random k-tuples of the base model's training images. Held-out tuples of its
test images measure the degraded-mode accuracy ParM reports: how often the
reconstruction F_P(sum) - sum_{i != j} f(x_i) of a missing output has the
argmax of f(x_j). Checkpoints ``parity-<base>-k<k>.pt`` and their records
(``.json``) are committed next to the base models'.

References
----------
J. Kosaian, K. V. Rashmi, S. Venkataraman, "Parity Models: Erasure-Coded
Resilience for Prediction Serving Systems", SOSP 2019.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .models import CHECKPOINTS, DATASETS, RECIPES, TorchFunction

__all__ = ["ParityRecipe", "PARITY_RECIPES", "EVAL_TUPLES", "EVAL_SEED", "CHECK_TUPLES", "parity_tuples",
           "degraded_agreement", "train_parity", "parity_model", "parm_for_workload", "ParityModel", "checkpoint_path"]

# held-out tuples behind each recorded accuracy, and the prefix the tests re-measure
EVAL_TUPLES = 2000
EVAL_SEED = 12345
CHECK_TUPLES = 200


@dataclass(frozen=True)
class ParityRecipe:
    """How a parity model is trained: which k, Adam steps, batch of k-tuples, learning rate."""

    ks: tuple
    steps: int
    batch: int
    lr: float


PARITY_RECIPES = {
    "lenet5": ParityRecipe((2, 3, 4), 15000, 64, 5e-3),
    "convnet": ParityRecipe((2, 3, 4), 5000, 64, 1e-3),
}


def checkpoint_path(name: str, k: int, suffix: str = ".pt"):
    """Where the parity model of base ``name`` for ``k`` inputs is stored."""
    return CHECKPOINTS / f"parity-{name}-k{k}{suffix}"


def _check(name: str, k) -> int:
    if name not in PARITY_RECIPES:
        raise ValueError(f"name must be a base model with parity models, one of {sorted(PARITY_RECIPES)}, "
                         f"got {name!r}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k not in PARITY_RECIPES[name].ks:
        raise ValueError(f"k must be one of {PARITY_RECIPES[name].ks} for {name!r}, got {k!r}")
    return int(k)


def parity_tuples(n_pool: int, k: int, n: int, seed) -> np.ndarray:
    """``n`` k-tuples of distinct indices into a pool of ``n_pool`` items.

    Returns
    -------
    ndarray, shape (n, k), int64
        Row i depends only on ``seed`` and i (a prefix of a longer draw is
        the shorter draw).
    """
    rng = np.random.default_rng(seed)
    out = np.empty((n, k), dtype=np.int64)
    for i in range(n):
        out[i] = rng.choice(n_pool, size=k, replace=False)
    return out


def degraded_agreement(f, parity, X, k: int, *, n_tuples: int = EVAL_TUPLES, seed=EVAL_SEED,
                       labels=None) -> dict:
    """Degraded-mode accuracy of a parity model on held-out k-tuples.

    For every tuple and every position j, f(x_j) is taken as missing and
    rebuilt as parity(x_1 + ... + x_k) - sum_{i != j} f(x_i).

    Parameters
    ----------
    f, parity : callable
        Vectorised float64 functions (n, *in_shape) -> (n, n_classes).
    X : ndarray, shape (n_samples, *in_shape)
        Held-out inputs.
    k : int
    n_tuples : int
    seed : int
    labels : ndarray, shape (n_samples,), optional
        True classes of X, for ``label_accuracy``.

    Returns
    -------
    dict
        ``agreement`` (argmax of the rebuilt output equals f's, over
        n_tuples * k reconstructions), ``mse`` (mean squared error of the
        rebuilt outputs), ``label_accuracy`` (argmax equals the true label)
        when labels are given, ``n_tuples``, ``seed``.
    """
    T = parity_tuples(len(X), k, n_tuples, seed)
    FX = np.asarray(f(X), dtype=np.float64)
    P = np.asarray(parity(X[T].sum(axis=1)), dtype=np.float64)   # (n, C)
    S = FX[T].sum(axis=1)                                         # (n, C)
    rebuilt = P[:, None, :] - S[:, None, :] + FX[T]               # (n, k, C): position j missing
    agree = rebuilt.argmax(-1) == FX[T].argmax(-1)
    out = {"agreement": float(agree.mean()), "mse": float(np.mean((rebuilt - FX[T]) ** 2)),
           "n_tuples": int(n_tuples), "seed": int(seed)}
    if labels is not None:
        out["label_accuracy"] = float(np.mean(rebuilt.argmax(-1) == np.asarray(labels)[T]))
    return out


class ParityModel(TorchFunction):
    """A trained parity model as a vectorised float64 numpy function."""

    def __init__(self, module, name: str, k: int):
        super().__init__(module)
        self.name, self.k = name, k

    def __repr__(self):
        return f"parity_model({self.name!r}, k={self.k})"

    def __reduce__(self):  # travels to worker processes as a reference to its checkpoint
        return parity_model, (self.name, self.k)


def _base(name: str):
    from . import get

    return get(name).f.module


def parity_model(name: str, k: int) -> ParityModel:
    """Load the committed parity model of base classifier ``name`` for k inputs.

    Parameters
    ----------
    name : str
        ``"lenet5"`` or ``"convnet"``.
    k : int
        Inputs per parity, one of ``PARITY_RECIPES[name].ks``.

    Returns
    -------
    ParityModel
        Callable (n, 1, 8, 8) -> (n, 10), float64, like the base workload's f.
    """
    k = _check(name, k)
    path = checkpoint_path(name, k)
    if not path.exists():
        raise FileNotFoundError(f"no parity checkpoint {path}: run `python tools/train_parity.py {name}`")
    module = RECIPES[name].architecture()
    module.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return ParityModel(module, name, k)


def parm_for_workload(name: str, n_inputs: int):
    """ParM with the committed parity model of a trained classifier.

    Parameters
    ----------
    name : str
        A base model with parity checkpoints, e.g. ``"lenet5"`` or ``"convnet"``.
    n_inputs : int
        K; checkpoints exist for the K listed in ``PARITY_RECIPES``.

    Returns
    -------
    gencc.ParM
        ``ParM(n_inputs, parity_model=parity_model(name, n_inputs))``.
    """
    from ..schemes.parm import ParM

    return ParM(n_inputs, parity_model=parity_model(name, n_inputs))


def train_parity(name: str, k: int, *, seed: int = 0, steps: int | None = None, log=print) -> dict:
    """Train the parity model of ``name`` for k inputs; write its checkpoint and record.

    Parameters
    ----------
    name : str
        A key of ``PARITY_RECIPES``.
    k : int
    seed : int
    steps : int, optional
        Overrides the recipe (for quick trials).
    log : callable

    Returns
    -------
    dict
        The record written to ``parity-<name>-k<k>.json``: degraded-mode
        ``agreement`` of the trained model and of f itself as parity model
        (``baseline``), on held-out tuples.
    """
    k = _check(name, k)
    recipe = PARITY_RECIPES[name]
    base = RECIPES[name]
    torch.manual_seed(seed)
    X_tr, _, X_te, y_te = DATASETS[base.dataset][0]()
    f_module = _base(name).eval()
    Xt = torch.tensor(X_tr, dtype=torch.float32)
    with torch.no_grad():
        targets = f_module(Xt)  # f on every training image, once
    model = base.architecture()
    model.load_state_dict(f_module.state_dict())
    opt = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    steps = steps or recipe.steps
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    model.train()
    for step in range(steps):
        idx = torch.randint(len(Xt), (recipe.batch, k), generator=g)
        loss = nn.functional.mse_loss(model(Xt[idx].sum(1)), targets[idx].sum(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if (step + 1) % max(steps // 5, 1) == 0:
            log(f"parity {name} k={k}: step {step + 1}/{steps} loss {loss.item():.4f}")
    seconds = time.perf_counter() - t0
    model.eval()
    f = TorchFunction(f_module)
    trained = degraded_agreement(f, TorchFunction(model), X_te, k, labels=y_te)
    check = degraded_agreement(f, TorchFunction(model), X_te, k, n_tuples=CHECK_TUPLES)
    baseline = degraded_agreement(f, f, X_te, k, labels=y_te)
    torch.save(model.state_dict(), checkpoint_path(name, k))
    record = {"base": name, "k": k, "degraded_agreement": trained["agreement"], "degraded_mse": trained["mse"],
              "degraded_label_accuracy": trained["label_accuracy"],
              "baseline_agreement": baseline["agreement"], "baseline_mse": baseline["mse"],
              "baseline_label_accuracy": baseline["label_accuracy"],
              "check_agreement": check["agreement"], "check_tuples": CHECK_TUPLES,
              "eval_tuples": EVAL_TUPLES, "eval_seed": EVAL_SEED, "steps": steps, "batch": recipe.batch,
              "lr": recipe.lr, "seed": seed, "train_seconds": round(seconds, 1),
              "metric": "argmax agreement with f of F_P(x_1+...+x_k) - sum_{i!=j} f(x_i), over every position j "
                        "of held-out k-tuples of the base model's test images; baseline: F_P = f",
              "data": DATASETS[base.dataset][1]}
    checkpoint_path(name, k, ".json").write_text(json.dumps(record, indent=2) + "\n")
    log(f"parity {name} k={k}: degraded agreement {trained['agreement']:.4f} (f as parity: "
        f"{baseline['agreement']:.4f}), {seconds:.0f} s")
    return record
