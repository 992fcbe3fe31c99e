"""The ``gencc`` command line: demo, reproduce, benchmarks, serve, workloads."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _limit_blas_threads():
    # Decodes are many small dense solves and f runs on small batches: BLAS and torch
    # threads only contend there (a torch pool on a busy 2-core machine made the byzantine
    # sweep's convnet cells 10-50x slower). OMP_NUM_THREADS is read when torch loads, which
    # is later; a value the user set is kept.
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass


def _schemes_arg(text):
    names = [t.strip() for t in text.split(",") if t.strip()]
    from .schemes import SCHEMES

    bad = [n for n in names if n not in SCHEMES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"schemes must be a comma list of {sorted(SCHEMES)}, got {text!r}")
    return names


def _sweeps_arg(text):
    from .experiments.reproduce import SWEEPS

    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in SWEEPS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"sweeps must be a comma list of {list(SWEEPS)}, got {text!r}")
    return names


def _run_reproduce(args) -> int:
    from dataclasses import replace

    from .experiments.reproduce import SWEEPS, ReproduceConfig, run_reproduce

    cfg = replace(ReproduceConfig.quick() if args.quick else ReproduceConfig(), seed=args.seed)
    run_reproduce(args.out, args.sweeps or SWEEPS, cfg, resume=not args.fresh, progress=sys.stderr.isatty())
    return 0


def _add_bench(sub):
    from .stragglers import STRAGGLER_MODELS

    p = sub.add_parser("bench", help="benchmarks from the command line")
    bsub = p.add_subparsers(dest="bench", required=True)
    a = bsub.add_parser("accuracy", help="decoding accuracy of schemes side by side")
    a.add_argument("--workload", default="xsinx", help="registered workload name (see `gencc workloads`)")
    a.add_argument("--schemes", type=_schemes_arg, default=["gcc", "letcc", "bacc", "replication"],
                   help="comma list of schemes (default: gcc,letcc,bacc,replication)")
    a.add_argument("--workers", "-N", type=int, default=32, help="N, number of workers")
    a.add_argument("--inputs", "-K", type=int, default=8, help="K, inputs per batch")
    a.add_argument("--stragglers", "-S", type=int, default=4, help="S, number of stragglers")
    a.add_argument("--straggler-model", choices=STRAGGLER_MODELS, default="random")
    a.add_argument("--p", type=float, default=0.1, help="straggling probability for --straggler-model bernoulli")
    a.add_argument("--lcc-degree", type=int, default=2, help="degree of f assumed by LCC")
    a.add_argument("--rounds", type=int, default=20, help="batches drawn")
    a.add_argument("--draws", type=int, default=1, help="straggler draws per batch")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--json", nargs="?", const="-", metavar="PATH",
                   help="also write machine-readable results (to PATH, or stdout when no PATH)")
    s = bsub.add_parser("selector", help="every decoder against the best fixed one in hindsight, on settings drawn "
                                         "fresh from a seed (function, K, N, straggler pattern)")
    s.add_argument("--settings", type=int, default=200, help="settings to draw (default 200)")
    s.add_argument("--seed", type=int, default=None, help="repeat a run (default: a new seed, printed)")
    s.add_argument("--rounds", type=int, default=8, help="batches per setting (default 8)")
    s.add_argument("--max-workers", type=int, default=512, help="cap on N (default 512)")
    s.add_argument("--out", default="gencc-selector", help="folder for selector.json, selector.csv, selector.png")
    c = bsub.add_parser("selfcal", help="self-calibration (systematic GCC) against the default decoder, calibrate "
                                        "and the best fixed decoder in hindsight, on streams drawn fresh from a "
                                        "seed; and one stream whose function drifts")
    c.add_argument("--settings", type=int, default=60, help="streams to draw (default 60)")
    c.add_argument("--seed", type=int, default=None, help="repeat a run (default: a new seed, printed)")
    c.add_argument("--batches", type=int, default=48, help="batches per stream, the second half scored (default 48)")
    c.add_argument("--max-workers", type=int, default=128, help="cap on N (default 128)")
    c.add_argument("--drift-batches", type=int, default=240, help="batches of the drifting stream (default 240)")
    c.add_argument("--out", default="gencc-selfcal", help="folder for selfcal.json, selfcal.csv, selfcal.png, "
                                                         "drift.json, drift.png")
    return p


def _fresh_seed(seed, what: str) -> int:
    """``seed``, or a new one when None; printed with how to repeat the draw."""
    if seed is None:
        import secrets

        seed = secrets.randbits(32)
    print(f"{what} drawn with seed {seed} (repeat with --seed {seed})", file=sys.stderr)
    return seed


def _run_bench_selector(args) -> int:
    from pathlib import Path

    from .experiments.selector_bench import plot, report, run_selector_bench
    from .report import write_csv, write_json

    if args.settings < 1 or args.rounds < 1:
        raise ValueError(f"--settings and --rounds must be >= 1, got {args.settings} and {args.rounds}")
    seed = _fresh_seed(args.seed, f"selector bench: {args.settings} settings")
    res = run_selector_bench(args.settings, seed=seed, rounds=args.rounds, max_workers=args.max_workers,
                             progress=True)
    print(report(res))
    for row in res["rows"]:  # the raw per-input ratios are summarised in each row's coverage
        row.pop("error_ratios", None)
    out = Path(args.out)
    flat = [{**r["setting"], "oracle": r["oracle"], "oracle_mse": r["oracle_mse"], "letcc_ridge": r["letcc_ridge"],
             **{f"{d}/oracle": v for d, v in r["ratio"].items()}, "gcc_rmse_covered": r["coverage"]["covered"]}
            for r in res["rows"]]
    print(f"wrote {write_json(res, out / 'selector.json')}, {write_csv(flat, out / 'selector.csv')}, "
          f"{plot(res, out / 'selector.png')}")
    return 0


def _run_bench_selfcal(args) -> int:
    from pathlib import Path

    from .experiments.self_calibration_bench import plot, plot_drift, report, run_drift, run_self_calibration_bench
    from .report import write_csv, write_json

    if args.settings < 1 or args.batches < 4 or args.drift_batches < 4:
        raise ValueError(f"--settings must be >= 1 and --batches, --drift-batches >= 4, got {args.settings}, "
                         f"{args.batches} and {args.drift_batches}")
    seed = _fresh_seed(args.seed, f"self-calibration bench: {args.settings} streams")
    res = run_self_calibration_bench(args.settings, seed=seed, batches=args.batches, max_workers=args.max_workers,
                                     progress=True)
    drift = run_drift(seed=seed, batches=args.drift_batches)
    print(report(res, drift))
    out = Path(args.out)
    flat = [{**r["setting"], "oracle": r["oracle"], "oracle_mse": r["oracle_mse"],
             **{f"{d}/oracle": v for d, v in r["ratio"].items()}, "self_cal_choice": r["self_cal"]["choice"],
             "self_cal_switches": r["self_cal"]["switches"]} for r in res["rows"]]
    print(f"wrote {write_json(res, out / 'selfcal.json')}, {write_csv(flat, out / 'selfcal.csv')}, "
          f"{plot(res, out / 'selfcal.png')}, {write_json(drift, out / 'drift.json')}, "
          f"{plot_drift(drift, out / 'drift.png')}")
    return 0


def _run_bench_accuracy(args) -> int:
    from . import workloads
    from .experiments.compare import ROW_COLUMNS, build_schemes, compare_schemes
    from .report import format_table, write_json
    from .stragglers import make_stragglers

    wl = workloads.get(args.workload)
    schemes = build_schemes(args.schemes, args.inputs, args.workers, args.lcc_degree)

    def model_for(s):
        return make_stragglers(args.straggler_model, n_stragglers=min(args.stragglers, s.n_workers - 1)
                               if s.name != "uncoded" else 0, p=args.p, wait_for=s.n_workers - args.stragglers)

    rows, evals = compare_schemes(wl, schemes, model_for, rounds=args.rounds, draws=args.draws,
                                  seed=args.seed, progress=sys.stderr.isatty())
    cols = [c for c in ROW_COLUMNS if any(r.get(c) is not None for r in rows)]
    title = (f"workload={wl.name} N={args.workers} K={args.inputs} S={args.stragglers} "
             f"model={args.straggler_model} rounds={args.rounds} seed={args.seed}")
    result = {"settings": vars(args) | {"schemes": args.schemes}, "rows": rows,
              "evaluations": [e.to_dict() for e in evals]}
    if args.json == "-":
        import json

        from .report import _plain

        print(json.dumps(_plain(result), indent=2))
    else:
        print(format_table(rows, cols, title=title))
        if args.json:
            print(f"wrote {write_json(result, args.json)}")
    return 0


def _add_serve(sub):
    from .serve.server import SCHEMES

    s = sub.add_parser("serve", help="serve a model over HTTP: the Open Inference Protocol (KServe v2 REST), "
                                     "metrics at /metrics")
    s.add_argument("--workload", default="lenet5", help="a registered workload (see `gencc workloads`)")
    s.add_argument("--model", default=None, help="your own model instead: 'package.module:factory', a "
                                                 "zero-argument factory returning the vectorised f; needs --input-shape")
    s.add_argument("--input-shape", default=None, help="one input's shape, e.g. 1,28,28 (default: the workload's)")
    s.add_argument("--name", default=None, help="the model's name in the protocol (default: the workload's)")
    s.add_argument("--scheme", choices=SCHEMES, default="gcc")
    s.add_argument("--K", type=int, default=4, help="inputs coded together")
    s.add_argument("--N", type=int, default=12, help="workers (uncoded: K)")
    s.add_argument("--backend", choices=("threads", "local", "ray"), default="threads")
    s.add_argument("--micro-batch", type=int, default=1)
    s.add_argument("--batch-window", type=float, default=0.005, help="seconds a request waits for its batch to fill")
    s.add_argument("--timeout", type=float, default=30.0, help="seconds per batch before it fails")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--max-pending", type=int, default=4096, help="input rows in flight before 503 (load shedding)")
    s.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body, MB")


def _run_serve(args) -> int:
    import numpy as np
    import uvicorn

    from .serve.app import create_app
    from .serve.server import build_executor, output_shape

    if args.model is not None:
        if args.input_shape is None:
            raise ValueError("--model needs --input-shape (one input's shape, e.g. 1,28,28)")
        model, name = args.model, args.name or args.model.rsplit(":", 1)[-1]
    else:
        from .workloads import WorkloadFactory, get

        wl = get(args.workload)
        model, name = WorkloadFactory(args.workload), args.name or args.workload
        if args.input_shape is None:
            args.input_shape = ",".join(map(str, wl.X.shape[1:]))
    in_shape = tuple(int(d) for d in args.input_shape.split(",") if d.strip()) if args.input_shape.strip() else ()
    out_shape = output_shape(model, in_shape)
    ex = build_executor(args.scheme, model, args.K, args.N, backend=args.backend, micro_batch=args.micro_batch,
                        batch_window=args.batch_window, timeout=args.timeout)
    app = create_app(ex, name, in_shape, out_shape, scheme=args.scheme, max_pending=args.max_pending,
                     max_body_bytes=int(args.max_body_mb * 2**20))
    print(f"gencc serve: {name} ({args.scheme}, K = {args.K}, N = {args.N}, {args.backend}) on "
          f"http://{args.host}:{args.port}/v2/models/{name}/infer, input shape {list(in_shape)}, output "
          f"{list(np.zeros(out_shape).shape)}", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")  # Ctrl-C: answers what it accepted
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gencc", description="General Coded Computing")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"gencc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="the main job: at each number of extra workers, which scheme answers best and soonest")
    d.add_argument("--out", default="gencc-demo", help="output folder for the table and plot")
    d.add_argument("--batches", type=int, default=None, help="batches per run (default 100)")
    d.add_argument("--extra", default=None, help="comma list of extra-worker counts E (default 1,2,4,8)")
    d.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("reproduce", help="the paper's experiments: error vs N, vs S, Bernoulli stragglers, DNN table, "
                                             "degraded mode of systematic codes, Byzantine workers")
    r.add_argument("--out", default="gencc-reproduce", help="output folder (one sub-folder per sweep)")
    r.add_argument("--quick", action="store_true", help="a small version, a few minutes on 2 cores")
    r.add_argument("--sweeps", type=_sweeps_arg, default=None,
                   help="comma list of sweeps to run (default: all of rate,stragglers,bernoulli,dnn,degraded,"
                        "byzantine; byzantine: MSE, argmax agreement and flags against the number of Byzantine "
                        "workers A, about 10 minutes on 2 cores)")
    r.add_argument("--fresh", action="store_true", help="ignore results already in --out instead of resuming")
    r.add_argument("--seed", type=int, default=0)
    _add_bench(sub)
    _add_serve(sub)
    sub.add_parser("workloads", help="list the registered workloads")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    _limit_blas_threads()
    try:
        if args.command == "bench":
            run = {"selector": _run_bench_selector, "selfcal": _run_bench_selfcal}.get(args.bench, _run_bench_accuracy)
            return run(args)
        if args.command == "workloads":
            from . import workloads
            from .report import format_table

            print(format_table([{"name": n, "task": t, "description": d} for n, t, d in workloads.describe()]))
            return 0
        if args.command == "reproduce":
            return _run_reproduce(args)
        if args.command == "serve":
            return _run_serve(args)
        if args.command == "demo":
            from .experiments.demo import EXTRA_WORKERS, run_demo

            extra = tuple(int(e) for e in args.extra.split(",")) if args.extra else EXTRA_WORKERS
            return run_demo(out=args.out, batches=args.batches, seed=args.seed, extra=extra)
    except (ValueError, TypeError) as exc:
        print(f"gencc: error: {exc}", file=sys.stderr)
        return 2
    return 1  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
