"""Straggler models: which workers return, by count, adversary, chance or latency.

Every model answers ``returned(n_workers, rng, error=None)`` with the sorted
indices of the workers whose results reach the decoder. Adversarial models
need ``error``: a callable mapping a returned set to the decoding error the
adversary wants to maximise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_int, check_nonnegative, check_probability, rng_from

__all__ = [
    "StragglerModel", "NoStragglers", "RandomStragglers", "ContiguousStragglers", "BlockStragglers",
    "GreedyStragglers",
    "BernoulliStragglers", "LatencyModel", "ShiftedExponential", "Pareto", "SlowNodes",
    "LatencyStragglers", "WorstCaseStragglers", "make_stragglers", "STRAGGLER_MODELS", "TraceStragglers",
    "TRACE_COLUMNS",
]


class StragglerModel:
    """Base class. ``adversarial`` models need the ``error`` callback."""

    adversarial = False

    def returned(self, n_workers: int, rng=None, error=None) -> np.ndarray:
        """Sorted indices (int64) of the workers that return."""
        raise NotImplementedError  # pragma: no cover

    def _check_count(self, n_workers):
        if self.n_stragglers >= n_workers:
            raise ValueError(
                f"n_stragglers must be < n_workers = {n_workers}, got {self.n_stragglers}"
            )


@dataclass
class NoStragglers(StragglerModel):
    """Every worker returns."""

    def returned(self, n_workers, rng=None, error=None):
        return np.arange(n_workers)


@dataclass
class RandomStragglers(StragglerModel):
    """Exactly ``n_stragglers`` workers, chosen uniformly at random, never return."""

    n_stragglers: int

    def __post_init__(self):
        self.n_stragglers = check_int(self.n_stragglers, "n_stragglers", minimum=0)

    def returned(self, n_workers, rng=None, error=None):
        self._check_count(n_workers)
        rng = rng_from(rng)
        out = rng.choice(n_workers, size=n_workers - self.n_stragglers, replace=False)
        return np.sort(out)


def _require_error(model, error):
    if error is None:
        raise ValueError(f"{type(model).__name__} is adversarial: pass error=callable(returned) -> float")


@dataclass
class ContiguousStragglers(StragglerModel):
    """Worst contiguous block: the ``n_stragglers`` adjacent workers (in worker
    point order) whose loss maximises the decoding error.

    Tries all N - S + 1 blocks.
    """

    n_stragglers: int
    adversarial = True

    def __post_init__(self):
        self.n_stragglers = check_int(self.n_stragglers, "n_stragglers", minimum=0)

    def candidates(self, n_workers) -> list[np.ndarray]:
        """The returned sets of all N - S + 1 blocks, each sorted, shape (N - S,)."""
        self._check_count(n_workers)
        S = self.n_stragglers
        everyone = np.arange(n_workers)
        if S == 0:
            return [everyone]
        return [np.concatenate([everyone[:start], everyone[start + S:]]) for start in range(n_workers - S + 1)]

    def returned(self, n_workers, rng=None, error=None):
        blocks = self.candidates(n_workers)
        if self.n_stragglers == 0:
            return blocks[0]
        _require_error(self, error)
        best, best_err = None, -np.inf
        for ret in blocks:
            e = error(ret)
            if e > best_err:
                best, best_err = ret, e
        return best


@dataclass
class BlockStragglers(StragglerModel):
    """``n_stragglers`` workers in ``n_blocks`` contiguous blocks (in worker point order) at
    random positions: a rack, a switch or a host going down, rather than independent failures.

    The block lengths are a uniformly random composition of S into ``n_blocks``
    positive parts; the returning workers not needed to keep the blocks apart
    (one between two blocks) fall independently and uniformly into the
    ``n_blocks + 1`` stretches around them, so a block may sit at either end.
    """

    n_stragglers: int
    n_blocks: int = 1

    def __post_init__(self):
        self.n_stragglers = check_int(self.n_stragglers, "n_stragglers", minimum=0)
        self.n_blocks = check_int(self.n_blocks, "n_blocks", minimum=1)
        if self.n_blocks > max(self.n_stragglers, 1):
            raise ValueError(f"n_blocks must be <= n_stragglers = {self.n_stragglers}, got {self.n_blocks}")

    def returned(self, n_workers, rng=None, error=None):
        self._check_count(n_workers)
        S, B = self.n_stragglers, self.n_blocks
        if S == 0:
            return np.arange(n_workers)
        gaps_needed = B - 1
        free = n_workers - S - gaps_needed  # returning workers not needed as separators
        if free < 0:
            raise ValueError(f"{B} blocks of {S} stragglers in all do not fit apart among {n_workers} workers")
        rng = rng_from(rng)
        cuts = np.sort(rng.choice(np.arange(1, S), size=B - 1, replace=False)) if B > 1 else np.array([], int)
        lengths = np.diff(np.concatenate([[0], cuts, [S]]))
        # B + 1 stretches of returning workers around the blocks: the inner ones >= 1
        spare = np.bincount(rng.integers(0, B + 1, size=free), minlength=B + 1)
        stretch = spare + np.r_[0, np.ones(B - 1, dtype=int), 0]
        out = np.ones(n_workers, dtype=bool)
        pos = 0
        for b in range(B):
            pos += stretch[b]
            out[pos:pos + lengths[b]] = False
            pos += lengths[b]
        return np.flatnonzero(out)


@dataclass
class GreedyStragglers(StragglerModel):
    """Greedy adversary: removes, one at a time, the worker whose loss
    increases the decoding error most, ``n_stragglers`` times (S * N decodes)."""

    n_stragglers: int
    adversarial = True

    def __post_init__(self):
        self.n_stragglers = check_int(self.n_stragglers, "n_stragglers", minimum=0)

    def returned(self, n_workers, rng=None, error=None):
        self._check_count(n_workers)
        ret = np.arange(n_workers)
        if self.n_stragglers == 0:
            return ret
        _require_error(self, error)
        for _ in range(self.n_stragglers):
            errs = [error(np.delete(ret, i)) for i in range(ret.size)]
            ret = np.delete(ret, int(np.argmax(errs)))
        return ret


@dataclass
class BernoulliStragglers(StragglerModel):
    """Each worker straggles independently with probability ``p``."""

    p: float

    def __post_init__(self):
        self.p = check_probability(self.p, "p")

    def returned(self, n_workers, rng=None, error=None):
        rng = rng_from(rng)
        return np.flatnonzero(rng.random(n_workers) >= self.p)


class LatencyModel:
    """A distribution of per-worker completion times (seconds)."""

    def sample(self, n_workers: int, rng=None) -> np.ndarray:
        """Latencies, shape (n_workers,)."""
        raise NotImplementedError  # pragma: no cover


@dataclass
class ShiftedExponential(LatencyModel):
    """``shift + Exp(rate)``: the classic straggler model of coded computing."""

    shift: float = 1.0
    rate: float = 1.0

    def __post_init__(self):
        self.shift = check_nonnegative(self.shift, "shift")
        if check_nonnegative(self.rate, "rate") == 0:
            raise ValueError("rate must be > 0")

    def sample(self, n_workers, rng=None):
        return self.shift + rng_from(rng).exponential(1.0 / self.rate, size=n_workers)


@dataclass
class Pareto(LatencyModel):
    """Heavy-tailed Pareto latencies: ``scale * (1 + Lomax(shape))``, all >= scale."""

    scale: float = 1.0
    shape: float = 2.0

    def __post_init__(self):
        if check_nonnegative(self.scale, "scale") == 0 or check_nonnegative(self.shape, "shape") == 0:
            raise ValueError("scale and shape must be > 0")

    def sample(self, n_workers, rng=None):
        return self.scale * (1.0 + rng_from(rng).pareto(self.shape, size=n_workers))


@dataclass
class SlowNodes(LatencyModel):
    """Bimodal: most workers take ``base`` (+/- jitter), a ``fraction`` of them
    are slow nodes taking ``slowdown`` times longer."""

    base: float = 1.0
    fraction: float = 0.1
    slowdown: float = 10.0
    jitter: float = 0.05

    def __post_init__(self):
        self.base = check_nonnegative(self.base, "base")
        self.fraction = check_probability(self.fraction, "fraction", closed=True)
        self.slowdown = check_nonnegative(self.slowdown, "slowdown")
        self.jitter = check_nonnegative(self.jitter, "jitter")

    def sample(self, n_workers, rng=None):
        rng = rng_from(rng)
        t = self.base * (1.0 + self.jitter * rng.random(n_workers))
        slow = rng.random(n_workers) < self.fraction
        return np.where(slow, t * self.slowdown, t)


#: the columns of a recorded straggler trace: one row per task
TRACE_COLUMNS = ("worker", "start", "duration")


class TraceStragglers(LatencyModel):
    """Task latencies replayed from a trace recorded on real workers.

    Parameters
    ----------
    durations : sequence of array_like
        Per recorded worker w = 0..W-1, its tasks' durations in seconds, in the order they ran.
    source : str
        Where the trace came from (a file name), for messages and ``repr``.

    Notes
    -----
    The trace file (:meth:`load`) holds one row per task with the columns
    ``worker`` (an integer 0..W-1), ``start`` (seconds, any origin: it orders
    each worker's tasks) and ``duration`` (seconds >= 0); a ``task`` column and
    any other columns are ignored. CSV with a header row, or Parquet (with
    ``pyarrow`` installed).

    In the runtime (``WorkerStragglers(trace, n_workers, seed)``) the j-th task
    of worker n is delayed by task ``(offset + j) mod T_w`` of recorded worker
    ``w = n mod W``, the offset drawn from ``(seed, n)``: every scheme run with
    the same seed replays the same sequence on each worker, and the correlation
    in time of the recorded disturbance (a hog that slows one worker for a
    while) is kept. In the accuracy harness (:meth:`sample`) each worker's
    latency is one of its recorded worker's tasks, drawn at random.

    The durations are injected as delays: f's own time adds to them, so record
    with a task that costs what f costs, or with a trivial one.
    """

    def __init__(self, durations, source: str = "<memory>"):
        arrs = [np.asarray(d, dtype=np.float64).reshape(-1) for d in durations]
        if not arrs or any(a.size == 0 for a in arrs):
            raise ValueError(f"a trace needs at least one task for every worker 0..W-1, got "
                             f"{[a.size for a in arrs]} tasks ({source})")
        bad = [w for w, a in enumerate(arrs) if not (np.all(np.isfinite(a)) and np.all(a >= 0))]
        if bad:
            raise ValueError(f"trace durations must be finite seconds >= 0; workers {bad} are not ({source})")
        self.durations, self.source = tuple(arrs), source

    @property
    def n_workers(self) -> int:
        """W, the workers recorded."""
        return len(self.durations)

    @classmethod
    def load(cls, path) -> "TraceStragglers":
        """Read a trace file (CSV or ``.parquet``), checking it; see the class Notes for the columns.

        Raises
        ------
        ValueError
            A missing column, an empty file, a value that is not a number (with its row), a
            worker id that is not an integer >= 0, workers not numbered 0..W-1, a negative or
            non-finite duration or start.
        """
        from pathlib import Path

        path = Path(path)
        if not path.is_file():
            raise ValueError(f"trace file {str(path)!r} does not exist")
        if path.suffix.lower() == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise ValueError("reading a Parquet trace needs pyarrow (pip install pyarrow); or write the trace "
                                 "as CSV") from None
            table = pq.read_table(path)
            missing = [c for c in TRACE_COLUMNS if c not in table.column_names]
            if missing:
                raise ValueError(f"trace {path.name}: missing columns {missing}; it has {table.column_names}")
            cols = {c: np.asarray(table.column(c).to_numpy(), dtype=np.float64) for c in TRACE_COLUMNS}
            first_row = 0
        else:
            import csv

            with open(path, newline="") as fh:
                reader = csv.DictReader(fh)
                header = reader.fieldnames or []
                missing = [c for c in TRACE_COLUMNS if c not in header]
                if missing:
                    raise ValueError(f"trace {path.name}: missing columns {missing} in the header row {header}; "
                                     f"a trace has one row per task with columns {list(TRACE_COLUMNS)}")
                values = {c: [] for c in TRACE_COLUMNS}
                for i, row in enumerate(reader, start=2):  # line 1 is the header
                    for c in TRACE_COLUMNS:
                        try:
                            values[c].append(float(row[c]))
                        except (TypeError, ValueError):
                            raise ValueError(f"trace {path.name}, line {i}: {c} must be a number, got "
                                             f"{row[c]!r}") from None
            cols = {c: np.asarray(v, dtype=np.float64) for c, v in values.items()}
            first_row = 2
        n = cols["worker"].size
        if n == 0:
            raise ValueError(f"trace {path.name} has no tasks")
        for c in TRACE_COLUMNS:
            bad = np.flatnonzero(~np.isfinite(cols[c]) | ((cols[c] < 0) if c != "start" else False))
            if bad.size:
                what = "finite" if c == "start" else "finite and >= 0"
                raise ValueError(f"trace {path.name}: {c} must be {what}; row {int(bad[0]) + first_row} "
                                 f"has {cols[c][bad[0]]!r}")
        w = cols["worker"]
        if np.any(w != np.round(w)):
            i = int(np.flatnonzero(w != np.round(w))[0])
            raise ValueError(f"trace {path.name}: worker must be an integer id, row {i + first_row} has {w[i]!r}")
        if w.max() >= n:  # W workers need W ids 0..W-1, each with a task: an id past the row count is a gap
            i = int(np.argmax(w))
            raise ValueError(f"trace {path.name}: workers must be numbered 0..W-1; row {i + first_row} has worker "
                             f"{int(w[i])} but the file has only {n} tasks")
        ids = np.unique(w.astype(np.int64))
        absent = sorted(set(range(int(ids.max()) + 1)) - set(ids.tolist()))
        if absent:
            raise ValueError(f"trace {path.name}: workers must be numbered 0..W-1; no task of workers {absent[:10]}")
        order = np.lexsort((cols["start"], w))
        w_sorted = w[order].astype(np.int64)
        durations = np.split(cols["duration"][order], np.flatnonzero(np.diff(w_sorted)) + 1)
        return cls(durations, source=path.name)

    def task_latency(self, worker: int, j: int, seed: int = 0) -> float:
        """The delay of the j-th task of ``worker`` (see the Notes)."""
        d = self.durations[worker % self.n_workers]
        offset = int(np.random.default_rng([seed, worker, 7919]).integers(d.size))
        return float(d[(offset + j) % d.size])

    def sample(self, n_workers, rng=None):
        rng = rng_from(rng)
        return np.array([self.durations[n % self.n_workers][rng.integers(self.durations[n % self.n_workers].size)]
                         for n in range(n_workers)])

    def __repr__(self):
        return f"TraceStragglers({self.source!r}, {self.n_workers} workers, {sum(d.size for d in self.durations)} tasks)"


@dataclass
class LatencyStragglers(StragglerModel):
    """Workers return in latency order; the master waits for the fastest
    ``wait_for`` or until ``deadline``, or both (the fastest ``wait_for``, or
    everyone done by ``deadline``, whichever set is larger).

    Parameters
    ----------
    latency : LatencyModel
    wait_for : int, optional
    deadline : float, optional
        Seconds. At least one of ``wait_for`` and ``deadline`` is required.
    """

    latency: LatencyModel
    wait_for: int | None = None
    deadline: float | None = None

    def __post_init__(self):
        if self.wait_for is None and self.deadline is None:
            raise ValueError("LatencyStragglers needs wait_for, deadline, or both")
        if self.wait_for is not None:
            self.wait_for = check_int(self.wait_for, "wait_for")
        if self.deadline is not None:
            self.deadline = check_nonnegative(self.deadline, "deadline")

    def returned(self, n_workers, rng=None, error=None):
        lat = self.latency.sample(n_workers, rng_from(rng))
        return self.returned_from_latencies(lat)

    def returned_from_latencies(self, lat) -> np.ndarray:
        """Returned set for given latencies (shape (N,))."""
        keep = np.zeros(lat.size, dtype=bool)
        if self.wait_for is not None:
            if self.wait_for > lat.size:
                raise ValueError(f"wait_for must be <= n_workers = {lat.size}, got {self.wait_for}")
            keep[np.argsort(lat, kind="stable")[: self.wait_for]] = True
        if self.deadline is not None:
            keep |= lat <= self.deadline
        return np.flatnonzero(keep)


_LATENCIES = {"exponential": ShiftedExponential, "pareto": Pareto, "slow-nodes": SlowNodes}
STRAGGLER_MODELS = ("none", "random", "contiguous", "greedy", "worst", "bernoulli", *_LATENCIES)


def make_stragglers(kind: str, *, n_stragglers: int = 0, p: float = 0.0, wait_for=None, deadline=None):
    """Build a straggler model from its CLI name.

    Parameters
    ----------
    kind : {"none", "random", "contiguous", "greedy", "worst", "bernoulli", "exponential", "pareto", "slow-nodes"}
    n_stragglers : int
        S for the count models; for latency models, ``wait_for`` defaults to N - S
        and is resolved by the caller.
    p : float
        Straggling probability for ``"bernoulli"``.
    """
    if kind == "none":
        return NoStragglers()
    if kind == "random":
        return RandomStragglers(n_stragglers)
    if kind == "contiguous":
        return ContiguousStragglers(n_stragglers)
    if kind == "greedy":
        return GreedyStragglers(n_stragglers)
    if kind == "worst":
        return WorstCaseStragglers(n_stragglers)
    if kind == "bernoulli":
        return BernoulliStragglers(p)
    if kind in _LATENCIES:
        return LatencyStragglers(_LATENCIES[kind](), wait_for=wait_for, deadline=deadline)
    raise ValueError(f"straggler model must be one of {list(STRAGGLER_MODELS)}, got {kind!r}")


@dataclass
class WorstCaseStragglers(StragglerModel):
    """The worst of several adversaries for S stragglers: by default the
    contiguous block and the greedy adversary, whichever hurts more."""

    n_stragglers: int
    adversarial = True

    def __post_init__(self):
        self.n_stragglers = check_int(self.n_stragglers, "n_stragglers", minimum=0)
        self.adversaries = (ContiguousStragglers(self.n_stragglers), GreedyStragglers(self.n_stragglers))

    def returned(self, n_workers, rng=None, error=None):
        self._check_count(n_workers)
        if self.n_stragglers == 0:
            return np.arange(n_workers)
        _require_error(self, error)
        sets = [adv.returned(n_workers, rng, error) for adv in self.adversaries]
        return max(sets, key=error)
