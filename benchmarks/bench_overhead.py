"""The runtime's own cost with no stragglers, against f itself, per backend and micro-batch.

    python benchmarks/bench_overhead.py                          # local, local-pipe, threads; B in 1, 16, 64
    python benchmarks/bench_overhead.py --backends local,threads,ray --out results/bench_overhead

lenet5 (the ``gencc.workloads`` registry), GCC with K = 4, N = 12, waiting for
all N, no stragglers. For each backend and B, in the same run:

* ``f_ms``: f on the same N*B coded inputs in one call, in this process, one
  compute thread (the reference; median of repeats);
* ``wall_ms``: seconds per batch of B*K inputs through ``CodedExecutor.map``
  (``max_in_flight`` batches in flight, steady state after a warm-up);
* ``own_ms = wall_ms - f_ms`` and ``own/f``: the runtime's own cost (encode,
  transport, dispatch, decode, ``map``'s per-input handling) as a share of f
  (the issue's target: at most 0.30 at B = 64);
* the breakdown per batch: ``encode_ms`` and ``decode_ms`` (measured in the
  executor), ``f_workers_ms`` (f as the workers timed it, summed over the N
  tasks: more than ``f_ms`` where N calls of B cost more than one of N*B),
  and ``transport_ms = wall_ms - encode_ms - decode_ms - f_ms``, the rest
  (transport, dispatch, gather, map);
* ``f_split_ms``: f on the same coded inputs in N calls of B, in this process:
  what f itself costs once the work is split over N workers, and
  ``own_excl_split/f = (wall_ms - f_split_ms) / f_ms``, the runtime's cost
  beyond that split;
* ``cpu_ms``: CPU seconds per batch of this process and every worker process
  together, and ``cpu/f``: the same comparison counted in core time, which
  does not depend on how the work spreads over the cores;
* ``snapshot_ms`` and ``snapshot/master_cpu``: what the ownership copies cost
  per batch, timed in the same run on arrays of the batch's shapes: the copy
  of the B*K inputs every executor takes when it accepts them, plus, on the
  threads backend, the copies of each task's coded inputs and outputs (N*B
  of each), as a share of the master's CPU per batch (``master_cpu_ms``).

A floor (``--floor``) measures, in the same run and without gencc, what the
process layout alone costs: the same N tasks of B coded inputs a batch,
pickled through a ``multiprocessing`` pipe to P bare worker processes that
run lenet5 and send the outputs back, ``max_in_flight`` batches in flight, no
encode, no decode, no fault handling: ``per-worker`` (P = N, one process per
worker, the layout of the local backend), ``co-hosted`` (P = cores, each
process running its N/P tasks one call each) and ``co-hosted fused`` (P =
cores, each process's tasks of a batch in one call), run before and after the
gencc rows. Its ``own/f`` is what that layout costs over ``multiprocessing``'s
pipes with nothing else in the way: a floor for the local backend's layout.

``--map-paths`` times ``map``'s two ways in, interleaved in one executor
(local backend, pipe, fixed decoder): the inputs as one ndarray, cut into
batches whole, against the same inputs as a list of rows, handled one by one in Python and
stacked per batch.

A third table (``--transport``) times the local backend's two ways of moving
coded inputs, shared memory and the pipe, interleaved in the same run, on
tasks of 32 KB (lenet5's at B = 64), 400 KB and 4 MB with a trivial f.

All workers share the machine's cores with the master, so on a 2-core machine
``wall_ms`` can exceed the sum of the parts by the time the master waits for a
core. A run takes under 2 minutes on 2 cores (``--backends ray`` adds about
45 s per configuration, mostly starting Ray).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from gencc.report import format_table, write_json  # noqa: E402
from gencc.runtime import CodedExecutor  # noqa: E402
from gencc.schemes import GCC  # noqa: E402
from gencc.workloads import WorkloadFactory, get  # noqa: E402

K, N = 4, 12
SCHEMES = {
    "gcc": lambda: GCC(K, N),  # adaptive decoder: kernel and ridge chosen per decode (leave-one-out)
    "gcc-fixed": lambda: GCC(K, N, kernel="sobolev2"),  # one fixed linear decoder
}


def _proc_cpu(pid) -> float:
    """CPU seconds (user + system) of a process, from /proc; 0 where unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _self_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _cpu(ex) -> float:
    """CPU seconds of this process and of the executor's worker processes."""
    pids = {p for p in getattr(ex.backend, "pids", []) or [] if p and p != os.getpid()}
    return _self_cpu() + _procs_cpu(pids)


def _procs_cpu(pids) -> float:
    return sum(_proc_cpu(p) for p in pids)


def _coded(X, B) -> np.ndarray:
    """N*B coded inputs of shape X.shape[1:]: GCC's N coded points of X's first K, repeated B times."""
    return np.resize(GCC(K, N).encode(X[:K]), (N * B, *X.shape[1:])).astype(np.float64, copy=False)


def _cost(B, wall, f_s, split_s, cpu, master) -> dict:
    """The columns every row shares, from seconds per batch of B*K inputs."""
    return {"inputs_per_s": round(B * K / wall), "f_ms": 1e3 * f_s, "wall_ms": 1e3 * wall,
            "own_ms": 1e3 * (wall - f_s), "own/f": (wall - f_s) / f_s,
            "f_split_ms": 1e3 * split_s, "own_excl_split/f": (wall - split_s) / f_s,
            "cpu_ms": 1e3 * cpu, "master_cpu_ms": 1e3 * master, "cpu/f": cpu / f_s}


def snapshot_seconds(f, X, B, backend, reps=41) -> float:
    """Median seconds of the ownership copies of one batch (see the module's docstring)."""
    inputs = np.resize(X, (B * K, *X.shape[1:])).astype(np.float64)
    coded = _coded(X, B)
    outputs = np.asarray(f(coded), dtype=np.float64)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.array(inputs)
        if backend == "threads":
            for n in range(N):
                np.array(coded[n * B:(n + 1) * B])
                np.array(outputs[n * B:(n + 1) * B])
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def f_reference(f, X, B, reps=41) -> tuple[float, float]:
    """Median seconds of f on N*B coded inputs in one call, and in N calls of B (one compute thread)."""
    coded = _coded(X, B)
    f(coded)
    one, split = [], []
    for _ in range(reps):
        t = time.perf_counter()
        f(coded)
        one.append(time.perf_counter() - t)
        t = time.perf_counter()
        for n in range(N):
            f(coded[n * B:(n + 1) * B])
        split.append(time.perf_counter() - t)
    return float(np.median(one)), float(np.median(split))


def run(backend, scheme, B, X, f_s, split_s, *, seconds, max_in_flight, options):
    size = B * K
    inputs = np.resize(X, (size * 400, *X.shape[1:]))
    if backend == "local-pipe":  # the local backend with every task through its pipe
        backend, options = "local", {**options, "shared_min_bytes": None}
        label = "local-pipe"
    else:
        label = backend
    ex = CodedExecutor(WorkloadFactory("lenet5"), SCHEMES[scheme](), backend, micro_batch=B, timeout=60,
                       max_in_flight=max_in_flight, backend_options=options)
    try:
        list(ex.map(inputs[: size * 3]))  # warm-up: every worker has run f
        # size the run to about `seconds`, from one timed batch
        t = time.perf_counter()
        list(ex.map(inputs[: size * 2]))
        per = (time.perf_counter() - t) / 2
        n_batches = int(np.clip(seconds / max(per, 1e-4), 8, 400))
        ex.timings.clear()
        cpu0, master0, t0 = _cpu(ex), _self_cpu(), time.perf_counter()
        n = sum(1 for _ in ex.map(inputs[: size * n_batches]))
        wall = time.perf_counter() - t0
        cpu, master = _cpu(ex) - cpu0, _self_cpu() - master0
        tm = dict(ex.timings)
    finally:
        ex.shutdown()
    assert n == size * n_batches and tm["batches"] == n_batches
    wall_b, enc, dec = wall / n_batches, tm["encode"] / n_batches, tm["decode"] / n_batches
    snap = snapshot_seconds(WorkloadFactory("lenet5")(), X, B, label)
    return {
        "backend": label, "scheme": scheme, "B": B, "batches": n_batches,
        **_cost(B, wall_b, f_s, split_s, cpu / n_batches, master / n_batches),
        "encode_ms": 1e3 * enc, "decode_ms": 1e3 * dec, "f_workers_ms": 1e3 * tm["compute"] / n_batches,
        "transport_ms": 1e3 * (wall_b - enc - dec - f_s),
        "snapshot_ms": 1e3 * snap, "snapshot/master_cpu": snap / (master / n_batches),
    }


def map_path_rows(X, B, *, rounds=4, batches=100, max_in_flight=4) -> list[dict]:
    """``map`` over an ndarray against the same inputs as a list of rows, in one executor,
    alternating (array, rows) and (rows, array) over ``rounds``: wall and master CPU per batch,
    medians over rounds, and the list's over the array's."""
    size = B * K
    inputs = np.resize(X, (size * batches, *X.shape[1:]))
    rows = list(inputs)
    ex = CodedExecutor(WorkloadFactory("lenet5"), SCHEMES["gcc-fixed"](), "local", micro_batch=B, timeout=60,
                       max_in_flight=max_in_flight, backend_options={"threads": 1, "shared_min_bytes": None})
    got = {"array": [], "rows": []}
    try:
        list(ex.map(inputs[: size * 3]))  # warm-up
        for r in range(rounds):
            for path in ("array", "rows") if r % 2 == 0 else ("rows", "array"):
                master0, t0 = _self_cpu(), time.perf_counter()
                n = sum(1 for _ in ex.map(inputs if path == "array" else rows))
                got[path].append(((time.perf_counter() - t0) / batches, (_self_cpu() - master0) / batches))
                assert n == len(inputs)
    finally:
        ex.shutdown()
    med = {p: np.median(np.array(v), axis=0) for p, v in got.items()}
    return [{"path": p, "B": B, "rounds": rounds, "batches": batches, "wall_ms": 1e3 * med[p][0],
             "master_cpu_ms": 1e3 * med[p][1], "wall / array's": med[p][0] / med["array"][0],
             "master_cpu / array's": med[p][1] / med["array"][1]} for p in ("array", "rows")]


def _bare_worker(conn):
    """A worker with nothing but a pipe and f: (tag, [x, ...], fused) -> (tag, [f(x), ...])."""
    import torch

    torch.set_num_threads(1)
    f = WorkloadFactory("lenet5")()
    conn.send("ready")
    while (msg := conn.recv()) is not None:
        tag, xs, fused = msg
        if fused:
            y = np.asarray(f(np.concatenate(xs)), dtype=np.float64)
            outs = np.split(y, np.cumsum([len(x) for x in xs])[:-1])
        else:
            outs = [np.asarray(f(x), dtype=np.float64) for x in xs]
        conn.send((tag, outs))


LAYOUTS = ("per-worker", "co-hosted", "co-hosted fused")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _floor_one(tasks, P, fused, *, seconds, max_in_flight, max_batches) -> tuple[int, float, float, float]:
    """Serve batches of ``tasks`` on P bare processes; (batches, wall, CPU, master CPU) per batch.

    Task n of batch t goes to process (n + t) % P, so when P does not divide N
    the extra tasks rotate over the processes. A thread reads the replies, so
    a worker never blocks on a full reply pipe while the master blocks sending
    to it.
    """
    import multiprocessing as mp
    import threading
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    cond = threading.Condition()
    state = {"done": 0, "counts": {}, "error": None}
    replies_per_batch = P if fused else len(tasks)

    def read(stop):
        try:
            while not stop.is_set():
                for c in wait(pipes, timeout=0.1):
                    tag, _ = c.recv()
                    with cond:
                        state["counts"][tag] = state["counts"].get(tag, 0) + 1
                        if state["counts"][tag] == replies_per_batch:
                            del state["counts"][tag]
                            state["done"] += 1
                            cond.notify_all()
        except (EOFError, OSError) as exc:
            with cond:
                state["error"] = exc
                cond.notify_all()

    # which tasks each process gets, for each rotation (the batch's tag mod P): not recomputed per batch
    owned = [[[n for n in range(len(tasks)) if (n + r) % P == p] for p in range(P)] for r in range(P)]

    def send(tag):
        for c, mine in zip(pipes, owned[tag % P]):
            if fused:
                c.send((tag, [tasks[n] for n in mine], True))
            else:
                for n in mine:
                    c.send((tag, [tasks[n]], False))

    def drive(first, n_batches):
        """Batches first..first+n_batches-1, max_in_flight at a time."""
        deadline = time.monotonic() + 600

        def until(ready):
            with cond:
                if not cond.wait_for(lambda: state["error"] or ready(), timeout=max(0.0, deadline - time.monotonic())):
                    raise RuntimeError("bare floor: no progress in 600 s")
                if state["error"] is not None:
                    raise RuntimeError(f"bare floor: a worker failed ({state['error']!r})")

        for tag in range(first, first + n_batches):
            until(lambda: tag - state["done"] < max_in_flight)
            send(tag)
        until(lambda: state["done"] >= first + n_batches)

    stop = threading.Event()
    reader, clean = None, False
    try:
        for _ in range(P):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_bare_worker, args=(there,), daemon=True)
            proc.start()
            there.close()  # a dead worker then reads as EOF here
            pipes.append(here)
            procs.append(proc)
        for c in pipes:
            if not c.poll(120) or c.recv() != "ready":
                raise RuntimeError("a bare worker did not start")
        reader = threading.Thread(target=read, args=(stop,), daemon=True)
        reader.start()
        drive(0, 3)
        t = time.perf_counter()
        drive(3, 4)
        n_batches = int(np.clip(seconds / max((time.perf_counter() - t) / 4, 1e-4), 8, max_batches))
        pids = [pr.pid for pr in procs]
        master0, workers0, t0 = _self_cpu(), _procs_cpu(pids), time.perf_counter()
        drive(7, n_batches)
        wall = (time.perf_counter() - t0) / n_batches
        master = (_self_cpu() - master0) / n_batches
        cpu = master + (_procs_cpu(pids) - workers0) / n_batches
        for c in pipes:
            c.send(None)
        clean = True
    finally:
        stop.set()
        if reader is not None:
            reader.join(5)
        for proc in procs:
            proc.join(5 if clean else 0)
            if proc.is_alive():
                proc.kill()
        for c in pipes:
            c.close()
    return n_batches, wall, cpu, master


def floor_rows(X, B, f_s, split_s, *, seconds, max_in_flight, layouts=LAYOUTS, label="", max_batches=400):
    """Each process layout's own cost without gencc: N tasks of B a batch on P bare processes.

    ``per-worker``: P = N; ``co-hosted``: P = the cores this process may use
    (skipped where that is N or more), each task its own message and f call;
    ``co-hosted fused``: the same P, a process's tasks of a batch in one
    message and one call. The transport is ``multiprocessing``'s (a socket
    pair per process, blocking, pickled), so a row is the floor of that
    layout over that transport, not of every runtime. Returns one row per
    layout, with the columns of :func:`run` that apply.
    """
    coded = _coded(X, B)
    tasks = [coded[n * B:(n + 1) * B] for n in range(N)]
    cores = max(1, min(_cores(), N))
    rows = []
    for layout in layouts:
        P, fused = (N, False) if layout == "per-worker" else (cores, layout.endswith("fused"))
        if layout != "per-worker" and P >= N:
            continue
        n_batches, wall, cpu, master = _floor_one(tasks, P, fused, seconds=seconds, max_in_flight=max_in_flight,
                                                  max_batches=max_batches)
        rows.append({"backend": f"bare {layout}{label}", "scheme": f"P = {P}", "B": B, "batches": n_batches,
                     **_cost(B, wall, f_s, split_s, cpu, master)})
        print(f"  floor {layout}{label} B={B}: own/f {(wall - f_s) / f_s:.2f}", file=sys.stderr)
    return rows


def transport_rows(sizes_kb, *, batches=30):
    """Local backend with shared memory against the pipe, on tasks of the given sizes.

    f is a row mean (output one number per coded input), so what is timed is
    moving the coded inputs; B = 1, the fixed GCC decoder, one batch in flight,
    shared and pipe runs interleaved, best of three rounds each.
    """
    import functools

    factory = functools.partial(functools.partial, np.mean, axis=-1)
    rows = []
    for kb in sizes_kb:
        d = max(1, int(kb * 1024 // 8))
        X = np.random.default_rng(0).normal(size=(K, d))
        best = {}
        for _ in range(3):
            for label, smb in (("shared", 32 << 10), ("pipe", None)):
                with CodedExecutor(factory, SCHEMES["gcc-fixed"](), "local", timeout=60, max_in_flight=1,
                                   backend_options={"threads": 1, "shared_min_bytes": smb}) as ex:
                    for _ in range(3):
                        ex.submit(X).result(timeout=60)
                    cpu0, t0 = _cpu(ex), time.perf_counter()
                    for _ in range(batches):
                        ex.submit(X).result(timeout=60)
                    wall, cpu = (time.perf_counter() - t0) / batches, (_cpu(ex) - cpu0) / batches
                    via = "shared" if ex.backend.shared_tasks else "pipe"
                w, c, _ = best.get(label, (np.inf, np.inf, via))
                best[label] = (min(w, wall), min(c, cpu), via)
        (ws, cs, via), (wp, cp, _) = best["shared"], best["pipe"]
        rows.append({"task_kb": kb, "shared_path": via, "shared_wall_ms": 1e3 * ws, "pipe_wall_ms": 1e3 * wp,
                     "pipe/shared wall": wp / ws, "shared_cpu_ms": 1e3 * cs, "pipe_cpu_ms": 1e3 * cp,
                     "pipe/shared cpu": cp / cs})
        print(f"  transport {kb} KB: {wp / ws:.2f}x wall", file=sys.stderr)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="local,local-pipe,threads",
                    help="of local (shared memory for large tasks), local-pipe (every task through its pipe), "
                         "threads, ray")
    ap.add_argument("--B", default="1,16,64", help="micro-batch sizes")
    ap.add_argument("--schemes", default="gcc,gcc-fixed", help=f"of {sorted(SCHEMES)}")
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per (backend, B)")
    ap.add_argument("--max-in-flight", type=int, default=4)
    ap.add_argument("--out", default=None, help="folder for overhead.json")
    ap.add_argument("--floor", default="64",
                    help="micro-batch sizes for the bare process-layout floor, without gencc ('' to skip)")
    ap.add_argument("--map-paths", default="64",
                    help="micro-batch sizes for map over an ndarray against a list of rows ('' to skip)")
    ap.add_argument("--transport", default="32,400,4000",
                    help="task sizes in KB for the shared-memory against pipe comparison ('' to skip)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    wl = get("lenet5")
    f = WorkloadFactory("lenet5")()
    X = wl.X
    sizes = [int(b) for b in args.B.split(",")]
    floor_sizes = [int(b) for b in args.floor.split(",") if b]
    refs = {B: f_reference(f, X, B) for B in sorted(set(sizes) | set(floor_sizes))}
    rows = []
    for B in floor_sizes:
        rows.extend(floor_rows(X, B, *refs[B], seconds=args.seconds, max_in_flight=args.max_in_flight,
                               label=" (before)"))
    for backend in [b for b in args.backends.split(",") if b]:
        options = {"threads": 1}
        if backend == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                print("ray not installed: skipped", file=sys.stderr)
                continue
        for scheme in args.schemes.split(","):
            for B in sizes:
                t = time.perf_counter()
                rows.append(run(backend, scheme, B, X, *refs[B], seconds=args.seconds,
                                max_in_flight=args.max_in_flight, options=options))
                print(f"  {backend} {scheme} B={B}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    for B in floor_sizes:  # after the gencc rows, as before them: drift of the machine shows as a gap
        rows.extend(floor_rows(X, B, *refs[B], seconds=args.seconds, max_in_flight=args.max_in_flight,
                               label=" (after)"))
    cols = ["backend", "scheme", "B", "batches", "inputs_per_s", "f_ms", "wall_ms", "own_ms", "own/f", "encode_ms",
            "transport_ms", "decode_ms", "f_workers_ms", "f_split_ms", "own_excl_split/f", "cpu_ms", "master_cpu_ms",
            "cpu/f", "snapshot_ms", "snapshot/master_cpu"]
    print(format_table(rows, cols, title=f"runtime overhead: lenet5, K = {K}, N = {N}, no stragglers, "
                                         f"{os.cpu_count()} cores"))
    paths = [row for B in (int(b) for b in args.map_paths.split(",") if b)
             for row in map_path_rows(X, B, max_in_flight=args.max_in_flight)]
    if paths:
        print(format_table(paths, list(paths[0]), title="map's inputs: one ndarray against a list of rows, "
                                                        "local backend, pipe, fixed decoder, medians over rounds"))
    transport = transport_rows([float(v) for v in args.transport.split(",")]) if args.transport else []
    if transport:
        tcols = ["task_kb", "shared_path", "shared_wall_ms", "pipe_wall_ms", "pipe/shared wall", "shared_cpu_ms",
                 "pipe_cpu_ms", "pipe/shared cpu"]
        print(format_table(transport, tcols, title=f"transport: local backend, shared memory against the pipe, "
                                                   f"f = row mean, B = 1, K = {K}, N = {N}, one batch in flight"))
    if args.out:
        path = write_json({"K": K, "N": N, "workload": "lenet5", "cores": os.cpu_count(),
                           "max_in_flight": args.max_in_flight, "rows": rows, "map_paths": paths,
                           "transport": transport},
                          os.path.join(args.out, "overhead.json"))
        print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
