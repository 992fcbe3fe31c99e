"""Every setting of a reproduce run, and the names of its sweeps."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ...byzantine import ATTACKS
from ..peers import LETCC_GRID
from .cells import BYZANTINE_METHODS

SWEEPS = ("rate", "stragglers", "bernoulli", "dnn", "degraded", "byzantine")
STRAGGLER_KINDS = ("random", "worst")


@dataclass(frozen=True)
class ReproduceConfig:
    """Every setting of a reproduce run (the defaults are the full run).

    Grids are tuples of N (workers), K (inputs per batch), S (stragglers) and
    p (straggling probability). ``rounds`` is batches per cell for random
    stragglers; adversarial cells use ``worst_rounds`` (each costs O(S N)
    decodes). LCC assumes f has degree ``lcc_degree`` and runs only where
    enough workers can return for it.

    The ``dnn`` sweep adds ``dnn_extra``: GCC calibrated on held-out batches
    (``gcc-cal``) and the best fixed GCC decoder in hindsight (``gcc-oracle``),
    both from ``gencc.CALIBRATION_GRID``.

    LeTCC runs at its best ridges from ``letcc_grid`` (pairs of a parameter
    name and its values), chosen by :func:`gencc.tune` (lowest MSE) on
    ``max(2, rounds // calib_divisor)`` calibration batches drawn with another
    seed than the evaluation batches, under the same straggler model.

    The ``degraded`` sweep runs ``degraded_schemes`` at K in ``degraded_Ks``
    and N = K + R for R in ``degraded_Rs``, with S random stragglers for S in
    ``degraded_Ss`` (an int, or ``"N-K"`` for S = R), ``degraded_rounds``
    batches per cell.

    The ``byzantine`` sweep runs ``byzantine_methods`` (``cells.BYZANTINE_METHODS``:
    plain GCC, robust GCC, BACC, LeTCC at its best ridges, the ApproxIFER
    locator told the true A, and the oracle that decodes GCC without exactly
    the liars) on each of ``byzantine_models`` at
    each (N, K, S) of ``byzantine_settings``, against A liars among the
    returned workers, for A in ``byzantine_As`` up to N/4, under each attack of
    ``byzantine_attacks`` (:mod:`gencc.byzantine`), ``byzantine_rounds``
    batches per cell. Its rate part runs ``byzantine_rate_methods`` on
    ``byzantine_rate_workload`` at K = ``byzantine_rate_K``, S =
    ``byzantine_rate_S`` and N in ``byzantine_rate_Ns`` with A = round(N^a),
    a = ``byzantine_rate_a``, and fits the slope of MSE against N.
    """

    schemes: tuple = ("gcc", "letcc", "bacc", "lcc", "replication")
    lcc_degree: int = 1
    seed: int = 0
    letcc_grid: tuple = LETCC_GRID
    calib_divisor: int = 4
    rate_workload: str = "xsinx"
    rate_K: int = 4
    rate_S: int = 2
    rate_Ns: tuple = (16, 24, 32, 48, 64, 96, 128)
    stragglers_workload: str = "lenet5"
    stragglers_N: int = 32
    stragglers_K: int = 8
    stragglers_Ss: tuple = (0, 2, 4, 6, 8, 12, 16)
    bernoulli_workload: str = "xsinx"
    bernoulli_K: int = 4
    bernoulli_ps: tuple = (0.05, 0.1, 0.2)
    bernoulli_Ns: tuple = (16, 24, 32, 48, 64, 96, 128)
    dnn_extra: tuple = ("gcc-cal", "gcc-oracle")  # calibrated GCC and the hindsight oracle, dnn sweep only
    dnn_models: tuple = ("lenet5", "convnet", "vit", "lenet5-mnist", "minilm")
    dnn_settings: tuple = ((12, 4, 3), (16, 4, 8), (32, 8, 4), (32, 8, 16))  # (N, K, S)
    degraded_models: tuple = ("lenet5", "convnet", "vit", "lenet5-mnist", "minilm")
    degraded_schemes: tuple = ("gcc-sys", "letcc-sys", "bacc-sys", "bacc", "replication", "parm")
    degraded_Ks: tuple = (2, 4)
    degraded_Rs: tuple = (1, 2, 4)  # N - K
    degraded_Ss: tuple = (1, "N-K")
    byzantine_methods: tuple = tuple(BYZANTINE_METHODS)
    byzantine_attacks: tuple = tuple(ATTACKS)
    byzantine_models: tuple = ("xsinx", "lenet5", "convnet")
    byzantine_settings: tuple = ((16, 4, 1), (32, 8, 2))  # (N, K, S)
    byzantine_As: tuple = (0, 1, 2, 3, 5, 8)
    byzantine_rounds: int = 40
    byzantine_rate_workload: str = "xsinx"
    byzantine_rate_methods: tuple = ("gcc", "gcc-robust", "oracle")
    byzantine_rate_K: int = 4
    byzantine_rate_S: int = 2
    byzantine_rate_Ns: tuple = (32, 48, 64, 96, 128)
    byzantine_rate_a: float = 0.5
    rounds: int = 40
    worst_rounds: int = 8
    dnn_rounds: int = 100
    degraded_rounds: int = 100

    @classmethod
    def quick(cls) -> "ReproduceConfig":
        """A small version: minutes rather than hours (degraded: about 4 on 2 busy cores)."""
        return cls(rate_Ns=(16, 24, 32, 48, 64), stragglers_N=16, stragglers_K=4, stragglers_Ss=(0, 2, 4, 8),
                   bernoulli_ps=(0.1, 0.2), bernoulli_Ns=(16, 24, 32, 48, 64), dnn_models=("lenet5", "minilm"),
                   dnn_settings=((12, 4, 3), (16, 4, 8)), degraded_models=("lenet5", "minilm"),
                   degraded_Ks=(4,), rounds=12, worst_rounds=3, dnn_rounds=20, degraded_rounds=20,
                   byzantine_models=("xsinx", "lenet5"), byzantine_settings=((32, 8, 2),), byzantine_As=(0, 1, 3),
                   byzantine_attacks=("sign-flip", "bias", "colluding"), byzantine_rounds=12,
                   byzantine_rate_Ns=(32, 48, 64))

    def calib_rounds(self, rounds: int) -> int:
        """Calibration batches for tuning a cell of ``rounds`` batches."""
        return max(2, rounds // self.calib_divisor)

    def to_dict(self) -> dict:
        return asdict(self)
