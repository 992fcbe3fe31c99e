"""One cell of a sweep (one scheme at one setting): its key, its scheme, its run."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

from ... import stragglers as st
from ...byzantine import make_attack
from ...evaluate import evaluate
from ...schemes import GCC, ApproxIFER, make_scheme
from ...workloads import get
from ..compare import build_schemes
from ..peers import params_label, tuned

# Part of every cell's key: bump it when a cell's result changes meaning (a
# metric's definition, a scheme's default), so a resumed run recomputes.
# 3: LeTCC at its best ridges from a grid, rows carry "params".
# 4: GCC's default decoder is the gap-aware selector; "gcc-cal" and "gcc-oracle".
CELL_VERSION = 4

TUNED = ("letcc",)  # base schemes run at their best parameters from the config's grid

# GCC with a fixed decoder from gencc.CALIBRATION_GRID chosen by measured MSE:
# "gcc-cal" on calibration batches (another seed: what a user can do), and
# "gcc-oracle" on the evaluation batches themselves (the best fixed
# configuration in hindsight: a yardstick no decoder can be run at).
CALIBRATED = ("gcc-cal", "gcc-oracle")


def _parm(K, N, workload):
    from ...workloads.parity import parm_for_workload

    return parm_for_workload(workload, K)


def _parm_applies(K, N) -> bool:
    import gencc

    return N - K == 1 and hasattr(gencc, "ParM")


# Schemes beyond make_scheme's names: name -> (factory(K, N, workload), applies(K, N)).
# A "<name>-sys" is make_scheme's <name> with worker_points="systematic".
EXTRA_SCHEMES = {"parm": (_parm, _parm_applies)}


# Methods of the byzantine sweep: name -> factory(K, N, A) of its scheme (A: the number of
# adversaries, for a scheme built to resist a given number). "letcc" runs at its best ridges
# (TUNED); "oracle" decodes plain GCC from the honest returned workers only (BYZANTINE_ORACLES).
# A new method is one line here, e.g. the ApproxIFER scheme: "approxifer" built as
# ApproxIFER(K, N, n_adversaries=A); it then joins ReproduceConfig.byzantine_methods' default.
BYZANTINE_METHODS = {
    "gcc": lambda K, N, A: GCC(K, N),
    "gcc-robust": lambda K, N, A: GCC(K, N, robust=True),
    "bacc": lambda K, N, A: make_scheme("bacc", K, N),
    "letcc": lambda K, N, A: make_scheme("letcc", K, N),
    # the peer's locator told the true number of liars (its best setting); BACC's decoder
    "approxifer": lambda K, N, A: ApproxIFER(K, N, n_adversaries=A),
    "oracle": lambda K, N, A: GCC(K, N),
}
BYZANTINE_ORACLES = ("oracle",)  # decode without exactly the liars (evaluate's drop_liars)


def base_name(name: str) -> str:
    return name[:-4] if name.endswith("-sys") else name


def scheme_applies(name: str, K: int, N: int) -> bool:
    """Whether a cell of scheme ``name`` at (K, N) is worth planning at all."""
    return EXTRA_SCHEMES[name][1](K, N) if name in EXTRA_SCHEMES else True


def build_scheme(name: str, K: int, N: int, workload: str, degree: int | None = None):
    """A scheme by name: make_scheme's names, ``"<name>-sys"``, EXTRA_SCHEMES and
    CALIBRATED (here the GCC that calibration starts from)."""
    if name in CALIBRATED:
        return make_scheme("gcc", K, N)
    if name in EXTRA_SCHEMES:
        return EXTRA_SCHEMES[name][0](K, N, workload)
    if name.endswith("-sys"):
        return make_scheme(base_name(name), K, N, worker_points="systematic")
    return build_schemes([name], K, N, degree or 1)[0]


@dataclass
class Cell:
    sweep: str
    workload: str
    N: int
    K: int
    scheme: str
    stragglers: str  # "random", "worst" or "bernoulli"
    S: int | None = None
    p: float | None = None
    rounds: int = 1
    seed: int = 0
    degree: int | None = None  # LCC's assumed degree of f; None for the other schemes
    grid: tuple | None = None  # parameter grid a tuned scheme is chosen from
    calib_rounds: int | None = None  # calibration batches per candidate of the grid
    A: int | None = None  # byzantine sweep: adversaries among the returned workers
    attack: str | None = None  # byzantine sweep: a name of gencc.byzantine.ATTACKS, or "none" (A = 0)

    @property
    def key(self) -> str:
        fields = [CELL_VERSION, self.sweep, self.workload, self.N, self.K, self.scheme, self.stragglers,
                  self.S, self.p, self.rounds, self.seed, self.degree, self.grid, self.calib_rounds]
        if self.attack is not None:  # only byzantine cells: the other sweeps' keys stay as they were
            fields += [self.A, self.attack]
        return json.dumps(fields)

    def _seed(self, *extra) -> int:
        return zlib.crc32(json.dumps([self.seed, self.sweep, self.workload, self.N, self.K, self.stragglers,
                                      self.S, self.p, *extra]).encode())

    @property
    def setting_seed(self) -> int:
        # same seed for every scheme of a setting: same batches, same draws (and, in the byzantine
        # sweep, the same for every A and attack: the straggler draws are those without an attack)
        return self._seed()

    @property
    def calib_seed(self) -> int:
        # calibration batches differ from the evaluation batches
        return self._seed("calibration")

    def straggler_model(self):
        if self.stragglers == "random":
            return st.RandomStragglers(self.S)
        if self.stragglers == "worst":
            return st.WorstCaseStragglers(self.S)
        return st.BernoulliStragglers(self.p)


def make_cell(cfg, sweep, workload, N, K, name, kind, S=None, p=None, rounds=1, A=None, attack=None) -> Cell:
    """The cell of scheme ``name`` at a setting, with the config's tuning grid where it applies."""
    tune = base_name(name) in TUNED
    calib = tune or name == "gcc-cal"
    return Cell(sweep, workload, N, K, name, kind, S, p, rounds, cfg.seed,
                cfg.lcc_degree if base_name(name) == "lcc" else None,
                cfg.letcc_grid if tune else None, cfg.calib_rounds(rounds) if calib else None, A, attack)


_TUNED: dict = {}  # a tuned scheme per setting, shared by the byzantine sweep's cells of every A and attack


def _applicable(scheme, cell) -> bool:
    if cell.S is None:
        return scheme.n_workers >= scheme.min_returns
    return cell.N - cell.S >= scheme.min_returns


def run_cell(cell: Cell) -> dict | None:
    """One scheme at one setting: a result row, or None where it does not apply."""
    if cell.degree is not None and cell.N < (cell.K - 1) * cell.degree + 1:
        return None
    try:
        if cell.attack is not None:
            scheme = BYZANTINE_METHODS[cell.scheme](cell.K, cell.N, cell.A)
        else:
            scheme = build_scheme(cell.scheme, cell.K, cell.N, cell.workload, cell.degree)
    except (ValueError, FileNotFoundError):  # e.g. no parity model for this workload or K
        return None
    if not _applicable(scheme, cell):
        return None
    wl = get(cell.workload)
    model = cell.straggler_model()
    params = None
    attack = None if cell.attack in (None, "none") else make_attack(cell.attack, cell.A)
    if cell.grid is not None:
        # tuned on honest outputs, as in the other sweeps: the same choice for every A and attack
        tkey = (repr(scheme), cell.workload, cell.stragglers, cell.S, cell.p, cell.grid, cell.calib_rounds,
                cell.calib_seed)
        if tkey not in _TUNED:
            _TUNED[tkey] = tuned(wl.f, scheme, wl.X, model, cell.grid, cell.calib_rounds, cell.calib_seed)
        scheme, params = _TUNED[tkey]
    elif cell.scheme in CALIBRATED:
        oracle = cell.scheme == "gcc-oracle"
        scheme = scheme.calibrate(wl.f, wl.X, model, rounds=cell.rounds if oracle else cell.calib_rounds,
                                  seed=cell.setting_seed if oracle else cell.calib_seed)
        params = params_label(scheme.calibration_[0][0])
    ev = evaluate(wl.f, scheme, wl.X, model, rounds=cell.rounds, seed=cell.setting_seed, task=wl.harness_task,
                  byzantine=attack, drop_liars=attack is not None and cell.scheme in BYZANTINE_ORACLES)
    row = {"workload": cell.workload, "scheme": cell.scheme, "N": cell.N, "K": cell.K,
           "stragglers": cell.stragglers, "S": cell.S, "p": cell.p, "rounds": cell.rounds, "params": params}
    if cell.attack is not None:
        row.update(A=cell.A, attack=cell.attack)
    for name, summ in ev.metrics.items():
        row[name] = None if summ is None else summ.mean
        row[f"{name}_std"] = None if summ is None else summ.std
        row[f"{name}_ci95"] = None if summ is None else (summ.ci_high - summ.ci_low) / 2
    row.update(failures=ev.failures, missing_rate=ev.missing_rate, returned=ev.returned_mean)
    return row
