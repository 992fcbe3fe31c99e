"""Byzantine workers in the runtime: the fault plan's lies, and the robust decode flagging them."""

import os

import numpy as np
import pytest

import gencc
from gencc import byzantine as bz
from gencc.runtime import CodedExecutor, Faults, TaskFault
from gencc.runtime.faults import BYZANTINE_KINDS, apply_output_fault, run_faulty

MODEL = "_models:xsinx"


def f(X):
    return X * np.sin(X)


@pytest.fixture(autouse=True)
def _importable_models(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _lie(kind, y, n=3, faults=None, batch=0):
    faults = faults or Faults(workers={n: kind}, points=np.linspace(-1, 1, 8), output_scale=0.5)
    tf = faults.plan(batch, 8)[n]
    assert tf.kind == kind and tf.params is not None
    return run_faulty(lambda: y, tf), tf


def test_each_byzantine_kind_answers_a_finite_wrong_output_of_the_same_shape():
    y = np.array([[1.0, 2.0, -0.5], [0.3, 0.7, 1.5]])
    assert BYZANTINE_KINDS == tuple(bz.ATTACKS)
    for kind in BYZANTINE_KINDS:
        run_faulty(lambda: y + 10, TaskFault())  # this thread's previous task, what "copy" answers
        out, _ = _lie(kind, y)
        assert out.shape == y.shape and np.all(np.isfinite(out)) and not np.array_equal(out, y), kind
    assert np.array_equal(_lie("sign-flip", y)[0], -y)
    assert np.allclose(_lie("scale", y)[0], 10 * y)  # gencc.byzantine's default factor
    assert np.allclose(_lie("bias", y)[0], y + 0.5)  # multiple 1 x output_scale
    r = _lie("random", y)[0]
    assert np.all(r >= y.min()) and np.all(r <= y.max())  # the worker's own output range by default
    ranged = Faults(workers={3: "random"}, output_range=(5.0, 6.0))
    assert np.all((_lie("random", y, faults=ranged)[0] >= 5) & (_lie("random", y, faults=ranged)[0] <= 6))
    scaled = Faults(workers={3: "scale"}, attack_params={"scale": {"factor": -3.0}})
    assert np.allclose(_lie("scale", y, faults=scaled)[0], -3 * y)
    # per-coordinate output_scale broadcasts over a micro-batch's rows
    per = Faults(workers={3: "bias"}, output_scale=[1.0, 2.0, 3.0])
    assert np.allclose(_lie("bias", y, faults=per)[0] - y, [[1, 2, 3], [1, 2, 3]])


def test_copy_answers_the_previous_tasks_output_or_zeros_first():
    import threading

    got = {}

    def fresh_thread():  # a worker thread with no previous task
        tf = Faults(workers={0: "copy"}).plan(0, 2)[0]
        got["first"] = run_faulty(lambda: np.ones(3), tf)
        got["second"] = run_faulty(lambda: np.full(3, 7.0), tf)
        got["other_shape"] = run_faulty(lambda: np.ones(4), tf)

    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join()
    assert np.array_equal(got["first"], np.zeros(3))  # nothing cached yet: an unwritten buffer
    assert np.array_equal(got["second"], np.ones(3))  # the previous task's honest output
    assert np.array_equal(got["other_shape"], np.zeros(4))


def test_colluders_add_the_same_smooth_curve_of_their_points():
    beta = np.linspace(-1, 1, 10)
    faults = Faults(workers={2: "colluding", 5: "colluding", 8: "colluding"}, points=beta, output_scale=2.0,
                    attack_params={"colluding": {"amplitude": 1.5, "frequency": 2.0}})
    plan = faults.plan(4, 10)
    y = np.array([0.5, -1.0, 2.0, 0.0])
    D = np.stack([apply_output_fault(y, plan[n].kind, plan[n].params) - y for n in (2, 5, 8)])
    assert np.linalg.matrix_rank(D, tol=1e-10) == 1  # one direction for all
    # exactly gencc.byzantine's curve, drawn from the batch's shared seed
    model = bz.ColludingSmooth(amplitude=1.5, frequency=2.0)
    scale = bz.OutputScale(np.full(4, 2.0), np.zeros(4), np.ones(4))
    want = model.lie(np.tile(y, (3, 1)), scale, beta[[2, 5, 8]], np.random.default_rng(plan[2].params["shared_seed"]))
    assert np.allclose(D, want - y)
    other = faults.plan(5, 10)  # another batch: another curve
    assert not np.allclose(apply_output_fault(y, other[2].kind, other[2].params) - y, D[0])


def test_plans_are_seeded_and_unchanged_without_byzantine_faults():
    a = Faults(nan=0.2, error=0.1, byzantine={"sign-flip": 0.2, "bias": 0.1}, seed=3)
    p1, p2 = a.plan(7, 50), a.plan(7, 50)
    assert p1 == p2
    kinds = {t.kind for t in p1}
    assert {"sign-flip", "bias"} <= kinds and all((t.params is not None) == (t.kind in BYZANTINE_KINDS) for t in p1)
    base = Faults(nan=0.2, error=0.1, seed=3).plan(7, 50)
    assert [t.kind for t in Faults(nan=0.2, error=0.1, byzantine={"copy": 0.0}, seed=3).plan(7, 50)] == \
        [t.kind for t in base]
    assert all(t.params is None for t in base)


def test_bad_byzantine_arguments_raise_errors_naming_them():
    with pytest.raises(ValueError, match="byzantine keys must be among"):
        Faults(byzantine={"cosmic-rays": 0.1})
    with pytest.raises(ValueError, match=r"byzantine\['bias'\] must be in \[0, 1\]"):
        Faults(byzantine={"bias": 1.5})
    with pytest.raises(ValueError, match="sum to at most 1"):
        Faults(nan=0.6, byzantine={"bias": 0.6})
    with pytest.raises(ValueError, match=r"workers\[2\] must be one of"):
        Faults(workers={2: "lie"})
    with pytest.raises(ValueError, match="needs points=scheme.beta"):
        Faults(workers={2: "colluding"})
    with pytest.raises(ValueError, match="factor must differ from 1"):
        Faults(attack_params={"scale": {"factor": 1.0}})
    with pytest.raises(TypeError, match="takes no parameter"):
        Faults(attack_params={"sign-flip": {"factor": 2.0}})
    with pytest.raises(ValueError, match="attack_params keys"):
        Faults(attack_params={"nan": {}})
    with pytest.raises(ValueError, match="output_scale must be"):
        Faults(output_scale=0.0)
    with pytest.raises(ValueError, match="output_scale must be"):
        Faults(output_scale="big")
    with pytest.raises(ValueError, match="output_range must be"):
        Faults(output_range=(2.0, 1.0))
    with pytest.raises(ValueError, match="points must hold one point per worker"):
        Faults(workers={1: "colluding"}, points=[0.0, 1.0]).plan(0, 4)


def _run(backend, robust, liars, batches=3, micro_batch=1, N=20, **faults_kw):
    scheme = gencc.GCC(4, N, robust=robust)
    faults = Faults(workers=liars, points=scheme.beta, output_scale=0.5, **faults_kw)
    rng = np.random.default_rng(1)
    X = rng.uniform(1.0, 2.5, size=(batches, 4 * micro_batch, 3))
    opts = {"preload": ("gencc.runtime.backends.worker", "_models")} if backend == "local" else {}
    with CodedExecutor(MODEL, scheme, backend, timeout=30, micro_batch=micro_batch, faults=faults,
                       backend_options=opts) as ex:
        results = [ex.submit(x).result(timeout=60) for x in X]
        stats = dict(ex.stats)
    errs = [float(np.mean((r.outputs - f(x)) ** 2)) for r, x in zip(results, X)]
    return results, errs, stats


LIARS = {3: "scale", 11: "sign-flip", 16: "bias"}


def test_robust_gcc_flags_exactly_the_liars_and_decodes_close_to_f():
    results, errs, stats = _run("threads", True, LIARS)
    for r in results:
        assert r.flagged == (3, 11, 16) and set(r.flagged) <= set(r.returned) and not r.failed
        assert r.decode_info["flagged"].tolist() == [3, 11, 16]
    assert max(errs) < 1e-3, errs
    assert stats["flagged"] == 3 * len(results)
    _, honest, _ = _run("threads", True, {}, batches=1)
    assert max(errs) < 20 * honest[0] + 1e-6  # about the cost of three fewer returns


def test_worker_processes_lie_as_planned_and_are_flagged():
    results, errs, stats = _run("local", True, {2: "scale", 7: "bias"}, batches=2, N=10)
    assert [r.flagged for r in results] == [(2, 7), (2, 7)] and stats["flagged"] == 4
    assert max(errs) < 1e-2, errs


def test_plain_gcc_flags_nobody_and_the_liars_ruin_its_outputs():
    results, errs, stats = _run("threads", False, LIARS)
    assert all(r.flagged == () for r in results) and "flagged" not in stats
    _, robust_errs, _ = _run("threads", True, LIARS)
    assert min(errs) > 100 * max(robust_errs) and min(errs) > 0.01, (errs, robust_errs)


def test_micro_batched_tasks_and_colluders_reach_the_decoder():
    results, errs, _ = _run("threads", True, {5: "colluding", 6: "colluding", 14: "scale"}, micro_batch=2,
                            attack_params={"colluding": {"amplitude": 3.0}})
    for r in results:
        assert r.outputs.shape == (8, 3) and len(r.returned) == 20 and not r.failed  # lies are not erasures
        assert 14 in r.flagged
    assert max(errs) < 1e-2, errs
