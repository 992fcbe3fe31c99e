"""Coded micro-batches, the streaming submit_one and the threads backend: real properties, no timing."""

import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest

import gencc
from gencc.errors import BatchFailedError, InvalidInputError, MissingOutputsError
from gencc.runtime import AnswerInfo, CodedExecutor, Faults, RequestFuture
from gencc.runtime.microbatch import decode_stacked, encode_stacked, requests_of_inputs
from gencc.runtime.stream import RequestBatcher, due, padded_rows
from gencc.runtime.backends.threads import ThreadBackend

from test_runtime import MODEL, _alive, _importable_models, _opts, f  # noqa: F401

RNG = np.random.default_rng(11)
BACKENDS = ["local", "threads"]


# -- the stacking itself (no workers) -----------------------------------------------------------
@pytest.mark.parametrize("scheme", [gencc.BACC(4, 10), gencc.LCC(3, 8, degree=1), gencc.GCC(4, 10, kernel="sobolev2"),
                                    gencc.GCC(4, 10, worker_points="systematic", kernel="sobolev2")])
def test_stacked_coding_equals_coding_each_batch_for_a_fixed_decoder(scheme):
    K, B = scheme.n_inputs, 5
    X = RNG.uniform(-2, 2, size=(B * K, 2, 3))
    coded = encode_stacked(scheme, X, B)
    assert coded.shape == (scheme.n_workers, B, 2, 3)
    for b in range(B):  # worker n's b-th coded input is batch b's n-th coded input
        np.testing.assert_allclose(coded[:, b], scheme.encode(X[b * K:(b + 1) * K]), rtol=1e-12, atol=1e-12)
    returned = [0, 2, 3, 5, 6, 7] if scheme.n_workers == 8 else [1, 2, 4, 5, 7, 8, 9]
    Y = f(coded)[returned]
    out, missing, info, _ = decode_stacked(scheme, Y, returned, B)
    assert out.shape == (B * K, 2, 3) and missing == ()
    for b in range(B):
        np.testing.assert_allclose(out[b * K:(b + 1) * K], scheme.decode(f(coded[:, b])[returned], returned),
                                   rtol=1e-9, atol=1e-12)
    if scheme.systematic:  # inputs 1 and 2 were answered by their own worker, in every one of the B batches
        assert info["exact"].tolist() == [False, True, True, False] * B


def test_the_adaptive_decoder_chooses_its_kernel_jointly_over_the_stacked_batches():
    scheme, K, B = gencc.GCC(4, 10), 4, 3
    X = RNG.uniform(-2, 2, size=(B * K, 2))
    coded = encode_stacked(scheme, X, B)
    returned = [0, 1, 3, 4, 6, 8, 9]
    Y = f(coded)[returned]  # (7, B, 2)
    out, _, info, est = decode_stacked(scheme, Y, returned, B)
    joint = scheme.decode_with_info(Y.reshape(len(returned), B * 2), returned)  # one decode of (7, B*2)
    np.testing.assert_allclose(out, joint.estimate.reshape(K, B, 2).transpose(1, 0, 2).reshape(B * K, 2))
    assert est == joint.error_estimate


def test_a_replicated_input_without_a_copy_is_missing_in_every_stacked_batch():
    scheme, B = gencc.Replication(2, 4), 3
    X = RNG.uniform(-1, 1, size=(B * 2, 2))
    coded = encode_stacked(scheme, X, B)
    out, missing, _, _ = decode_stacked(scheme, f(coded)[[0, 2]], [0, 2], B)  # both copies of input 1 lost
    assert missing == requests_of_inputs([1], 2, B) == (1, 3, 5)
    np.testing.assert_allclose(out[[0, 2, 4]], f(X[[0, 2, 4]]))
    assert np.isnan(out[[1, 3, 5]]).all()


# -- on real workers ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_micro_batched_answers_equal_the_simulated_decode_of_the_same_returned_set(backend):
    scheme, B = gencc.GCC(4, 10), 3  # adaptive: compared with the joint decode of the same returns
    faults = Faults(workers={2: "error", 5: "nan", 7: "wrong_shape", 8: "crash"})
    X = RNG.uniform(-3, 3, size=(B * 4, 3))
    with CodedExecutor(MODEL, scheme, backend, micro_batch=B, timeout=60, faults=faults,
                       backend_options=_opts(backend)) as ex:
        res = ex.submit(X).result(timeout=90)
    assert res.micro_batch == B and res.outputs.shape == (B * 4, 3)
    assert set(res.failed) == {2, 5, 7, 8} and "shape" in res.failed[7]
    ret = list(res.returned)
    assert ret == [0, 1, 3, 4, 6, 9]
    expected, _, _, est = decode_stacked(scheme, f(encode_stacked(scheme, X, B))[ret], ret, B)
    np.testing.assert_allclose(res.outputs, expected, rtol=1e-9, atol=1e-12)
    assert res.error_estimate == pytest.approx(est) and set(res.compute_seconds) == set(ret)


@pytest.mark.parametrize("backend", BACKENDS)
def test_systematic_and_replicated_micro_batches_are_exact_with_no_stragglers(backend):
    X = list(RNG.uniform(-3, 3, size=(30, 2)))  # not a multiple of B*K: the last batch is padded
    with CodedExecutor(MODEL, gencc.GCC(4, 8, worker_points="systematic"), backend, micro_batch=4, timeout=60,
                       backend_options=_opts(backend)) as ex:
        outs = list(ex.map(X))
        res = ex.submit(np.stack(X[:8])).result(timeout=60)  # B = 2 <= micro_batch
    np.testing.assert_allclose(np.stack(outs), f(np.stack(X)), rtol=1e-12)
    assert res.decode_info["exact"].shape == (8,) and res.decode_info["exact"].all()
    np.testing.assert_allclose(res.outputs, f(np.stack(X[:8])), rtol=1e-12)
    with CodedExecutor(MODEL, gencc.Replication(3, 6), backend, micro_batch=2, timeout=60,
                       backend_options=_opts(backend)) as ex:
        outs = list(ex.map(X))
    np.testing.assert_allclose(np.stack(outs), f(np.stack(X)), rtol=1e-12)


def test_map_with_micro_batches_answers_each_bad_input_by_itself():
    X = [RNG.uniform(-1, 1, size=2) for _ in range(13)]
    X[4] = np.array([np.nan, 1.0])  # the fast path: checked with its chunk
    X[9] = np.ones(3)  # another shape
    with CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", micro_batch=3, timeout=60) as ex:
        outs = list(ex.map(X, return_exceptions=True))
    assert len(outs) == 13
    assert isinstance(outs[4], InvalidInputError) and "input 4" in str(outs[4])
    assert isinstance(outs[9], InvalidInputError) and "input 9" in str(outs[9])
    good = [k for k in range(13) if k not in (4, 9)]
    np.testing.assert_allclose(np.stack([outs[k] for k in good]), f(np.stack([X[k] for k in good])))


def test_map_of_an_array_cuts_it_into_batches_and_answers_its_bad_rows_by_themselves(monkeypatch):
    import gencc.runtime.ordered_map as map_module

    per_row = []  # inputs that went through the row-by-row check
    check = map_module.check_input
    monkeypatch.setattr(map_module, "check_input", lambda x, i, shape: per_row.append(i) or check(x, i, shape))
    X = RNG.uniform(-1, 1, size=(15, 2))
    X[5, 1], X[11, 0] = np.nan, -np.inf  # in two different batches of 6; the last batch, 3 rows, is padded
    with np.errstate(invalid="ignore"):  # the NaN and Inf rows: never sent, compared only where finite
        expected = f(X)
    with CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", micro_batch=3, timeout=60, max_in_flight=1) as ex:
        outs = []
        for i, y in enumerate(ex.map(X, return_exceptions=True)):
            outs.append(y)
            X[: (i // 6 + 1) * 6] = 7.0  # rows already cut into a batch, some still queued: they must keep
            # their answers (rows not yet reached are read when map reaches them, as from any iterable)
        assert per_row == []  # the array was cut whole, never checked row by row
        X = RNG.uniform(-1, 1, size=(15, 2))
        X[5, 1], X[11, 0] = np.nan, -np.inf
        rows = list(ex.map(list(X), return_exceptions=True))  # the same inputs row by row
        assert per_row  # that path does check rows one by one
        ints = list(ex.map(np.arange(8).reshape(4, 2)))  # integers are computed as float64
    with CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", micro_batch=3, timeout=60) as ex:
        scalars = list(ex.map(np.array([0.5, -1.0, 2.0])))  # a 1-D array: inputs of shape ()
    assert len(outs) == 15
    for k in (5, 11):
        assert isinstance(outs[k], InvalidInputError) and outs[k].index == k and f"input {k}" in str(outs[k])
        assert isinstance(rows[k], InvalidInputError) and str(rows[k]) == str(outs[k])
    good = [k for k in range(15) if k not in (5, 11)]
    np.testing.assert_allclose(np.stack([outs[k] for k in good]), expected[good])
    np.testing.assert_allclose(np.stack([rows[k] for k in good]), f(X[good]))
    np.testing.assert_allclose(np.stack(ints), f(np.arange(8.0).reshape(4, 2)))
    np.testing.assert_allclose(np.stack(scalars), f(np.array([0.5, -1.0, 2.0])))


def test_map_waits_for_a_batch_whose_waiter_wakes_before_its_done_callbacks(monkeypatch):
    # a future wakes its waiters (and a done callback wakes map's) before its later done callbacks
    # have run: map must not take that gap for "no answer" (it once raised TimeoutError there,
    # intermittently, under load). The gap is widened here to 30 ms after every callback.
    def slow_callbacks(self):
        for callback in self._done_callbacks:
            callback(self)
            time.sleep(0.03)

    monkeypatch.setattr(Future, "_invoke_callbacks", slow_callbacks)
    X = RNG.uniform(-1, 1, size=(8, 2))
    slow = Faults(workers={n: "slow" for n in range(4)}, slow_delay=0.05)  # map waits on every batch
    with CodedExecutor(MODEL, gencc.GCC(2, 4, kernel="sobolev2"), "threads", micro_batch=2, timeout=60,
                       faults=slow) as ex:
        outs = list(ex.map(X))
    assert len(outs) == 8 and all(np.all(np.isfinite(o)) for o in outs)


def test_submit_checks_the_batch_size():
    with CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", micro_batch=2, timeout=20) as ex:
        with pytest.raises(ValueError, match=r"X must have shape \(B\*K, \*in_shape\) with K = 2 and 1 <= B <= "
                                             r"micro_batch = 2, got shape \(6, 1\)"):
            ex.submit(np.ones((6, 1)))
        with pytest.raises(ValueError, match=r"X must have shape .* got shape \(3, 1\)"):
            ex.submit(np.ones((3, 1)))
    with pytest.raises(ValueError, match="micro_batch must be"):
        CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", micro_batch=0)
    with pytest.raises(ValueError, match="batch_window must be"):
        CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", batch_window=-1)


# -- the streaming submit -----------------------------------------------------------------------
def test_the_window_policy():
    assert due(6, 6, 0.0, 1.0)  # full
    assert not due(5, 6, 0.5, 1.0) and due(5, 6, 1.0, 1.0)  # partial: only once the window expired
    assert not due(0, 6, 10.0, 1.0)
    assert [padded_rows(n, 4) for n in (1, 4, 5, 8)] == [4, 4, 8, 8]


def test_a_batcher_pads_a_partial_batch_and_gives_every_request_its_row():
    got = []

    class Res:
        def output(self, i):
            if i == 2:
                raise MissingOutputsError("no copy", missing=np.array([2]), partial=None, n_returned=0,
                                          n_required=1)
            return got[-1][i]

        def answer_info(self, i):
            return AnswerInfo(exact=False, error_estimate=float(i), batch=len(got) - 1)

    def dispatch(X):
        got.append(X)
        fut = Future()
        fut.set_result(Res())
        return fut

    batcher = RequestBatcher(dispatch, capacity=8, K=4, window=3600.0)
    futs = [batcher.put(np.full(2, float(i))) for i in range(11)]  # one full batch, 3 left waiting
    assert len(got) == 1 and got[0].shape == (8, 2)
    assert not any(fu.done() for fu in futs[8:])
    futs[9].cancel()  # still waiting in the window: cancellable
    batcher.close(flush=True)
    assert got[1].shape == (4, 2)  # 2 live requests padded to K = 4
    np.testing.assert_allclose(got[1][:, 0], [8, 10, 10, 10])
    assert futs[9].cancelled() and futs[10].result()[0] == 10 and futs[8].result()[0] == 8
    assert futs[10].info.error_estimate == 1.0 and futs[10].info.batch == 1 and futs[9].info is None
    with pytest.raises(MissingOutputsError):
        futs[2].result()
    with pytest.raises(RuntimeError, match="shut down"):
        batcher.put(np.zeros(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stream_of_single_requests_is_answered_and_shutdown_loses_none(backend):
    X = RNG.uniform(-3, 3, size=(10, 2))
    scheme = gencc.Replication(3, 6)
    ex = CodedExecutor(MODEL, scheme, backend, micro_batch=2, batch_window=3600.0, timeout=60,
                       backend_options=_opts(backend))
    try:
        futs = [ex.submit_one(x) for x in X]  # 6 fill a batch; 4 wait for a window that never expires
        np.testing.assert_allclose(np.stack([fu.result(timeout=60) for fu in futs[:6]]), f(X[:6]))
        assert not any(fu.done() for fu in futs[6:])
        bad = ex.submit_one(np.array([np.inf, 0.0]))
        other = ex.submit_one(np.ones(3))
        with pytest.raises(InvalidInputError, match="NaN or Inf"):
            bad.result(timeout=0)
        with pytest.raises(InvalidInputError, match="shape"):
            other.result(timeout=0)
    finally:
        ex.shutdown(wait=True)  # the 4 waiting requests are dispatched, not lost
    np.testing.assert_allclose(np.stack([fu.result(timeout=0) for fu in futs[6:]]), f(X[6:]))
    with pytest.raises(RuntimeError, match="shut down"):
        ex.submit_one(X[0])


def test_the_window_expiring_dispatches_a_partial_batch():
    with CodedExecutor(MODEL, gencc.GCC(4, 8, worker_points="systematic"), "threads", micro_batch=8,
                       batch_window=0.05, timeout=60) as ex:
        x = RNG.uniform(-1, 1, size=3)
        y = ex.submit_one(x).result(timeout=60)  # nothing else comes: only the window can send it
        assert ex._batcher.partial == 1 and ex._batcher.batches == 1
    np.testing.assert_allclose(y, f(x), rtol=1e-12)


def test_shutdown_with_cancel_futures_cancels_the_waiting_requests_and_fails_the_running_ones():
    ex = CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", micro_batch=1, batch_window=3600.0, timeout=60,
                       faults=Faults(workers={0: "slow", 1: "slow", 2: "slow", 3: "slow"}, slow_delay=30.0))
    running = [ex.submit_one(RNG.uniform(size=2)) for _ in range(2)]  # a full batch: dispatched, slow
    waiting = ex.submit_one(RNG.uniform(size=2))
    ex.shutdown(wait=True, cancel_futures=True)
    assert waiting.cancelled()
    for fu in running:
        with pytest.raises(BatchFailedError, match="shut down"):
            fu.result(timeout=0)


def test_concurrent_streams_are_all_answered():
    X = RNG.uniform(-3, 3, size=(4, 40, 2))
    results = [None] * 4
    with CodedExecutor(MODEL, gencc.Replication(4, 8), "threads", micro_batch=4, batch_window=0.01,
                       timeout=60) as ex:
        def client(c):
            futs = [ex.submit_one(x) for x in X[c]]
            results[c] = np.stack([fu.result(timeout=60) for fu in futs])

        threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    for c in range(4):
        np.testing.assert_allclose(results[c], f(X[c]))


# -- the threads backend --------------------------------------------------------------------------
def test_a_thread_that_crashes_is_an_erasure_and_is_replaced_not_the_process():
    with CodedExecutor(MODEL, gencc.BACC(3, 6), "threads", timeout=30, faults=Faults(workers={4: "crash"})) as ex:
        for _ in range(3):
            res = ex.submit(RNG.uniform(-1, 1, size=(3, 2))).result(timeout=30)
            assert 4 in res.failed and 4 not in res.returned
        assert ex.stats["crashes"] >= 1 and ex.backend.restarts[4] >= 1
    assert ex.backend.pid_history == []


def test_restarts_past_the_cap_of_abandoned_threads_wait_for_one_to_end():
    be = ThreadBackend(MODEL, 4, max_abandoned=0)
    with CodedExecutor(MODEL, gencc.Replication(2, 4), be, timeout=30, hang_timeout=0.3,
                       faults=Faults(workers={3: "hang"})) as ex:
        end = time.monotonic() + 60
        while be.restarts[3] < 2 and time.monotonic() < end:  # worker 3 hangs on every task
            res = ex.submit(RNG.uniform(-1, 1, size=(2, 2))).result(timeout=30)
            assert res.missing == ()  # the batches finish from the other copies
        # the first restart was refused (one abandoned thread is over the cap of 0); the worker came back
        # once that thread ended, hung again and was restarted again
        assert ex.stats["hangs"] >= 2 and be.restarts[3] >= 2
    with pytest.raises(ValueError, match="max_abandoned must be"):
        ThreadBackend(MODEL, 4, max_abandoned=-1)


# -- per-input early answers and hedged requests, with a fake backend and an injected clock -------------
from gencc.runtime.events import TaskCancelled, TaskResult  # noqa: E402
from gencc.runtime.executor import _settle  # noqa: E402
from gencc.runtime.hedged import HedgedExecutor  # noqa: E402

from test_gather import FakeBackend  # noqa: E402


def _frozen(ex):
    """Stop the dispatcher thread: the test moves the events and the clock."""
    ex._stop.set()
    ex._thread.join()


def test_a_systematic_code_answers_each_request_when_its_own_worker_returns():
    be = FakeBackend(4)
    ex = CodedExecutor("unused", gencc.GCC(2, 4, worker_points="systematic"), be, batch_window=3600.0, timeout=60)
    try:
        _frozen(ex)
        futs = [ex.submit_one(np.full(1, float(i + 1))) for i in range(2)]  # a full batch: dispatched at once
        now = time.monotonic()
        task = {w: t for w, t in be.sent}
        ex._turn([TaskResult(1, 0, 1, 2.0 * task[1].x, 0.0)], now + 0.1)  # input 1's own worker
        assert futs[1].result(timeout=0) == pytest.approx([4.0]) and not futs[0].done()
        assert futs[1].info == AnswerInfo(exact=True, error_estimate=0.0, trusted=True, n_returned=None, batch=0,
                                          rmse=0.0, rmse_p90=0.0)
        assert futs[0].info is None  # pending
        ex._turn([TaskResult(w, 0, w, 2.0 * task[w].x, 0.0) for w in (2, 3)], now + 0.2)
        assert not futs[0].done()  # 3 of 4 in, not complete (worker 0 missing): waits for all N by default
        done = []
        futs[0].add_done_callback(done.append)
        ex._turn([], now + 61.0)  # the timeout: decoded from 1, 2, 3
        assert futs[0].done() and futs[0].info.n_returned == 3 and not futs[0].info.exact
        assert be.restarted == [0]  # busy past hang_timeout (= timeout): restarted, its task an erasure
        info = futs[0].info
        assert info.trusted and info.error_estimate is not None and 0.0 <= info.rmse <= info.rmse_p90
        np.testing.assert_allclose(futs[0].result(timeout=0), [2.0], atol=1e-6)  # f = 2x decodes exactly
    finally:
        ex.shutdown(wait=False)


def test_an_answer_decoded_from_fewer_than_the_trusted_returns_says_so():
    be = FakeBackend(5)
    ex = CodedExecutor("unused", gencc.GCC(3, 5, worker_points="systematic"), be, batch_window=3600.0, timeout=60,
                       n_min=2, deadline=1.0)
    try:
        _frozen(ex)
        futs = [ex.submit_one(np.full(1, float(i + 1))) for i in range(3)]
        now = time.monotonic()
        task = {w: t for w, t in be.sent}
        # inputs 1 and 2's own workers; input 0's and both parities never return
        ex._turn([TaskResult(w, 0, w, 2.0 * task[w].x, 0.0) for w in (1, 2)], now + 0.1)
        ex._turn([], now + 0.5)
        assert not futs[0].done()  # before the deadline: waits
        ex._turn([], now + 1.5)  # past it: decoded from 2 < K = 3
        assert futs[0].info.exact is False and futs[0].info.trusted is False and futs[0].info.n_returned == 2
        assert futs[0].info.error_estimate is not None
        for fu in futs[1:]:  # exact answers are trusted whatever the batch
            assert fu.info.exact and fu.info.trusted and fu.info.error_estimate == 0.0
    finally:
        ex.shutdown(wait=False)


def test_a_request_future_keeps_the_first_answer_and_its_info():
    fut = RequestFuture()
    first, second = AnswerInfo(True, 0.0), AnswerInfo(False, 0.5, trusted=False)
    assert fut.info is None and fut.answer(np.ones(2), first)
    assert not fut.answer(np.zeros(2), second) and not fut.fail(RuntimeError("late"))
    assert fut.info is first and fut.result()[0] == 1.0
    cancelled = RequestFuture()
    assert cancelled.cancel() and not cancelled.answer(np.ones(2), first) and cancelled.info is None
    failed = RequestFuture()
    assert failed.fail(ValueError("bad")) and failed.info is None
    with pytest.raises(ValueError, match="bad"):
        failed.result()


def test_a_slow_primary_is_hedged_the_backup_answers_and_the_loser_is_cancelled():
    be = FakeBackend(3)
    ex = HedgedExecutor("unused", 3, be, hedge_delay=0.5, timeout=60)
    try:
        _frozen(ex)
        futs = [ex.submit(np.full((1, 1), float(i))) for i in range(3)]  # one per worker: all busy
        t0 = min(r.t0 for r in ex._reqs.values())
        assert [w for w, _ in be.sent] == [0, 1, 2]
        with ex._lock:  # workers 0 and 2 answer fast; worker 1 is slow
            done = [ex._handle(TaskResult(w, w, 0, np.full((1, 1), 10.0 * w), 0.0), t0 + 0.1) for w in (0, 2)]
            for req in list(ex._reqs.values()):
                assert ex._sweep(req, t0 + 0.2) == []  # not yet past the hedge delay
            for req in list(ex._reqs.values()):
                ex._sweep(req, t0 + 0.6)  # request 1 is hedged onto an idle worker
        _settle([p for d in done for p in d])
        assert be.sent[-1][0] in (0, 2) and be.sent[-1][1].batch == 1 and be.sent[-1][1].slot == 1
        backup = be.sent[-1][0]
        with ex._lock:
            won = ex._handle(TaskResult(backup, 1, 1, np.full((1, 1), 10.0), 0.0), t0 + 0.7)
        _settle(won)
        res = futs[1].result(timeout=0)
        assert res.copy == 1 and res.worker == backup and res.outputs[0, 0] == 10.0
        assert (1, 1) in be.cancelled  # the primary is told to drop it
        with ex._lock:  # the cancelled primary reports in: nothing more happens
            assert ex._handle(TaskCancelled(1, 1, 0), t0 + 0.8) == []
        assert all(f.done() and f.exception() is None for f in futs)
        assert ex.stats["hedged"] == 1 and ex.stats["backup_won"] == 1 and ex.stats["answered"] == 3
        assert ex.stats["failed"] == 0 and not ex._reqs and ex._loads == [0, 0, 0]
    finally:
        ex.shutdown(wait=False)


def test_hedged_requests_answer_every_input_on_real_workers():
    with HedgedExecutor(MODEL, 3, "threads", hedge_delay=0.05, timeout=30) as ex:
        X = RNG.normal(size=(12, 4))
        got = np.stack(list(ex.map(X, timeout=60)))
        fut = ex.submit_one(X[0])
        fut.result(timeout=60)
    np.testing.assert_allclose(got, f(X), rtol=1e-9, atol=1e-9)
    assert ex.stats["answered"] == 13 and ex.stats["failed"] == 0
    assert fut.info == AnswerInfo(exact=True, error_estimate=0.0, rmse=0.0, rmse_p90=0.0)


def test_hedged_bad_inputs_fail_alone_and_every_other_input_is_answered():
    from gencc.errors import InvalidInputError

    X = [RNG.normal(size=4) for _ in range(6)]
    X[1] = np.full(4, np.nan)
    X[3] = np.ones(3)  # another shape than the first request's
    X[4] = np.ones(4) * 1j
    with HedgedExecutor(MODEL, 3, "threads", micro_batch=2, hedge_delay=0.05, timeout=30) as ex:
        got = list(ex.map(X, return_exceptions=True, timeout=60))
        with pytest.raises(ValueError, match="X .*(NaN|Inf|finite)"):
            ex.submit(np.full((1, 4), np.inf))
    for i in (1, 3, 4):
        assert isinstance(got[i], InvalidInputError) and got[i].index == i
    for i in (0, 2, 5):
        np.testing.assert_allclose(got[i], f(X[i][None])[0], rtol=1e-9, atol=1e-9)
    assert ex.stats["failed"] == 0


def test_map_yields_an_input_when_its_own_worker_returns_before_the_batch_decodes():
    be = FakeBackend(4)
    ex = CodedExecutor("unused", gencc.GCC(2, 4, worker_points="systematic"), be, timeout=60)
    got = []
    try:
        gen = ex.map(np.array([[1.0], [2.0]]))
        t = threading.Thread(target=lambda: got.append(next(gen)), daemon=True)
        t.start()
        for _ in range(1000):  # until the batch is dispatched (bounded)
            if len(be.sent) == 4:
                break
            time.sleep(0.01)
        x0 = [task.x for w, task in be.sent if w == 0][0]
        with be.lock:  # only input 0's own worker answers: the batch cannot decode yet
            be.events.append(TaskResult(0, 0, 0, 3.0 * x0, 0.0))
        t.join(timeout=30)
        assert got and got[0] == pytest.approx([3.0])
        assert ex.stats["batches"] == 0  # the batch is still waiting for a decodable set
    finally:
        ex.shutdown(wait=False)


def test_a_hedged_request_whose_every_copy_fails_gets_an_explicit_error():
    from gencc.runtime.events import TaskError

    be = FakeBackend(2)
    ex = HedgedExecutor("unused", 2, be, hedge_delay=0.5, timeout=60)
    try:
        _frozen(ex)
        fut = ex.submit(np.ones((1, 1)))
        t0 = ex._reqs[0].t0
        with ex._lock:
            out = ex._handle(TaskError(0, 0, 0, "boom"), t0 + 0.1)  # the primary fails: a copy goes at once
            assert out == [] and be.sent[-1][0] == 1
            out = ex._handle(TaskError(1, 0, 1, "boom again"), t0 + 0.2)  # no copies left: fails
        _settle(out)
        with pytest.raises(BatchFailedError, match="boom again"):
            fut.result(timeout=0)
        assert ex.stats["failed"] == 1 and not ex._reqs
    finally:
        ex.shutdown(wait=False)


# -- pull placement: a task waits at the master until a worker is idle ----------------------------------
def test_placement_is_checked():
    with pytest.raises(ValueError, match="placement must be one of"):
        CodedExecutor("unused", gencc.Replication(2, 4), FakeBackend(4), placement="anywhere")


@pytest.mark.parametrize("backend", BACKENDS)
def test_pull_placement_answers_a_stream_exactly_with_a_slow_worker(backend):
    from gencc.runtime import WorkerStragglers
    from gencc.stragglers import SlowNodes

    X = RNG.uniform(-3, 3, size=(24, 3))
    faults = WorkerStragglers(SlowNodes(base=0.002, fraction=0.3, slowdown=40.0), 4, seed=5)  # 80 ms stragglers
    with CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), backend, micro_batch=2, batch_window=0.02, timeout=60,
                       direct_dispatch=True, placement="pull", faults=faults, backend_options=_opts(backend)) as ex:
        futs = [ex.submit_one(x) for x in X]
        Y = np.stack([fu.result(timeout=60) for fu in futs])
    exact = np.array([fu.info.exact for fu in futs])
    np.testing.assert_array_equal(Y[exact], f(X[exact]))  # a systematic slot's output, whichever worker ran it
    np.testing.assert_allclose(Y, f(X), atol=0.5)
    assert ex.stats["failed_batches"] == 0 and ex.stats["batches"] == 6


def test_hedged_pull_placement_waits_for_an_idle_worker_instead_of_queueing():
    be = FakeBackend(2)
    ex = HedgedExecutor("unused", 2, be, hedge_delay=0.5, timeout=60, placement="pull")
    try:
        _frozen(ex)
        futs = [ex.submit(np.full((1, 1), float(i))) for i in range(3)]
        assert [(w, t.batch) for w, t in be.sent] == [(0, 0), (1, 1)]  # request 2 waits at the master
        t0 = ex._reqs[0].t0
        with ex._lock:
            for req in list(ex._reqs.values()):
                assert ex._sweep(req, t0 + 0.1) == []  # nobody idle: no failure, no send
            done = ex._handle(TaskResult(1, 1, 0, np.full((1, 1), 1.0), 0.0), t0 + 0.2)
            for req in list(ex._reqs.values()):
                ex._sweep(req, t0 + 0.2)  # request 0 is not yet due a backup; request 2 takes worker 1
        assert (be.sent[-1][0], be.sent[-1][1].batch) == (1, 2) and ex._reqs[2].sent0 == t0 + 0.2
        with ex._lock:
            for req in list(ex._reqs.values()):
                ex._sweep(req, t0 + 0.6)  # request 0 is due a backup, but worker 1 is busy: it waits
            assert len(be.sent) == 3
            done += ex._handle(TaskResult(1, 2, 0, np.full((1, 1), 2.0), 0.0), t0 + 0.65)
            for req in list(ex._reqs.values()):
                ex._sweep(req, t0 + 0.65)
            assert (be.sent[-1][0], be.sent[-1][1].batch, be.sent[-1][1].slot) == (1, 0, 1)  # the backup
            done += ex._handle(TaskResult(1, 0, 1, np.full((1, 1), 0.0), 0.0), t0 + 0.7)
        _settle(done)
        assert [fu.result(timeout=0).outputs[0, 0] for fu in futs] == [0.0, 1.0, 2.0]
        assert futs[0].result(timeout=0).copy == 1 and (0, 0) in be.cancelled
    finally:
        ex.shutdown(wait=False)


# -- direct dispatch: a systematic task leaves as soon as its input's rows are in ---------------------
from gencc.runtime.direct import ColumnBatcher, column_due, column_row  # noqa: E402

SYS = dict(worker_points="systematic", kernel="sobolev2")


def test_column_major_rows_fill_each_input_in_turn():
    B, K = 3, 2
    rows = [column_row(j, B, K) for j in range(B * K)]
    assert rows == [0, 2, 4, 1, 3, 5]  # input 0 of sub-batches 0, 1, 2, then input 1 of each
    assert sorted(rows) == list(range(B * K))
    for k in range(K):  # requests k*B .. k*B + B-1 are exactly input k's rows b*K + k
        assert sorted(rows[k * B:(k + 1) * B]) == [b * K + k for b in range(B)]
    assert [column_row(j, 1, 4) for j in range(4)] == [0, 1, 2, 3]  # B = 1: arrival order


class _FakeDirect:
    """The executor's side of a ColumnBatcher, recorded."""

    def __init__(self):
        self.opened, self.sent, self.closed, self.dispatched = 0, [], [], []

    def open(self):
        self.opened += 1
        return ("token", self.opened)

    def send(self, token, k, Xk, on_early):
        self.sent.append((token, k, Xk))
        fut = Future()
        fut.set_running_or_notify_cancel()
        self.batch = fut
        return fut

    def close(self, token, X):
        self.closed.append((token, X))
        return self.batch

    def dispatch(self, X, on_early=None, opened=None):
        self.dispatched.append((opened, X))
        fut = Future()
        fut.set_result(gencc.runtime.BatchResult(batch=0, outputs=np.asarray(X)))
        return fut


def test_the_early_sent_columns_are_the_coded_tasks_of_the_whole_batch():
    scheme, B, K = gencc.GCC(2, 5, **SYS), 3, 2
    direct = _FakeDirect()
    batcher = ColumnBatcher(direct.dispatch, B * K, K, 3600.0, direct)
    X = RNG.uniform(-2, 2, size=(5, 2))
    futs = [batcher.put(x) for x in X[:4]]
    assert [k for _, k, _ in direct.sent] == [0]  # input 0's B rows are in: sent; input 1 has 1 of 3
    futs[3].cancel()  # waiting: cancellable, and its row stays
    futs.append(batcher.put(X[4]))
    assert not direct.closed
    batcher.close(flush=True)  # 5 of 6: the missing row is padded
    assert [k for _, k, _ in direct.sent] == [0] and direct.opened == 1
    (token, full), = direct.closed
    assert token == ("token", 1) and full.shape == (B * K, 2)
    for j, x in enumerate(X):  # request j is row column_row(j)
        np.testing.assert_array_equal(full[column_row(j, B, K)], x)
    np.testing.assert_array_equal(full[5], X[4])  # padding: a copy of a real row
    coded = encode_stacked(scheme, full, B)
    for token, k, Xk in direct.sent:  # what went early is exactly the direct slot's task of the full encode
        np.testing.assert_array_equal(Xk, coded[k])
        np.testing.assert_array_equal(Xk, full[k::K])
    assert futs[3].cancelled() and all(fu.running() for i, fu in enumerate(futs) if i != 3)
    direct.batch.set_result(gencc.runtime.BatchResult(batch=0, outputs=2.0 * full))
    assert futs[3].cancelled()
    for j in (0, 1, 2, 4):
        np.testing.assert_array_equal(futs[j].result(timeout=0), 2.0 * X[j])


def test_a_batch_that_closes_before_any_input_is_complete_keeps_the_plain_layout():
    direct = _FakeDirect()
    batcher = ColumnBatcher(direct.dispatch, 8, 4, 3600.0, direct)  # B = 2, K = 4
    futs = [batcher.put(np.zeros(2))]  # input 0 needs B = 2 rows: not complete
    batcher.close(flush=True)
    assert not direct.sent and not direct.closed
    (opened, X), = direct.dispatched
    assert opened == ("token", 1)  # under the index taken when it opened
    np.testing.assert_array_equal(X[:, 0], [0, 0, 0, 0])  # one request padded to K, as RequestBatcher does
    assert futs[0].result(timeout=0)[0] == 0


def test_column_due_only_for_a_partial_column_past_its_window():
    assert column_due(1, 2, 0.03, 0.02) and column_due(3, 2, 0.02, 0.02)
    assert not column_due(1, 2, 0.01, 0.02)  # not yet
    assert not column_due(2, 2, 9.0, 0.02) and not column_due(0, 2, 9.0, 0.02)  # complete, or none started
    assert not column_due(1, 2, 9.0, None)  # no column window: wait for the batch


def _wait_for(cond, seconds=10.0):
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        time.sleep(0.005)
    return cond()


def test_a_partial_column_goes_out_padded_at_its_window_and_the_next_request_starts_the_next_input():
    B, K = 3, 2
    direct = _FakeDirect()
    batcher = ColumnBatcher(direct.dispatch, B * K, K, 3600.0, direct, column_window=0.02)
    X = RNG.uniform(-2, 2, size=(4, 2))
    futs = [batcher.put(X[0])]
    assert _wait_for(lambda: len(direct.sent) == 1)  # input 0 with 1 of its 3 rows: sent by the window
    (token, k, Xk), = direct.sent
    assert k == 0 and batcher.padded_columns == 1
    np.testing.assert_array_equal(Xk, np.stack([X[0]] * B))  # padded with copies of its real row
    futs += [batcher.put(x) for x in X[1:]]  # input 1's rows: the batch is full, it closes at once
    assert [k for _, k, _ in direct.sent] == [0, 1] and batcher.padded_columns == 1
    (_, full), = direct.closed
    np.testing.assert_array_equal(full[0::K], np.stack([X[0]] * B))
    np.testing.assert_array_equal(full[1::K], X[1:])
    coded = encode_stacked(gencc.GCC(K, 5, **SYS), full, B)
    for _, k, Xk in direct.sent:  # the padding sent early is the batch's own: parity tasks encode the same rows
        np.testing.assert_array_equal(Xk, coded[k])
    direct.batch.set_result(gencc.runtime.BatchResult(batch=0, outputs=2.0 * full))
    for j, fu in enumerate(futs):  # the padding rows have no request; every request its own answer
        np.testing.assert_array_equal(fu.result(timeout=0), 2.0 * X[j])
    batcher.close(flush=True)


def test_column_window_needs_direct_dispatch_and_seconds():
    with pytest.raises(ValueError, match="column_window needs direct_dispatch"):
        CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), "threads", column_window=0.01)
    with pytest.raises(ValueError, match="column_window"):
        CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), "threads", direct_dispatch=True, column_window=-1.0)


def test_a_lone_request_is_answered_exactly_by_the_column_window_not_the_batch_window():
    x = RNG.uniform(-3, 3, size=3)
    with CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), "threads", micro_batch=2, batch_window=3600.0, timeout=60,
                       direct_dispatch=True, column_window=0.01) as ex:
        fut = ex.submit_one(x)
        y = fut.result(timeout=30)  # the batch window alone would hold it an hour
        assert fut.info.exact and ex.padded_columns == 1
        ex.set_column_window(None)
        assert ex._batcher.column_window is None
    np.testing.assert_array_equal(y, f(x[None])[0])


def test_direct_dispatch_needs_workers_that_carry_an_input_unchanged():
    with pytest.raises(ValueError, match="direct_dispatch"):
        CodedExecutor(MODEL, gencc.GCC(2, 4), "threads", direct_dispatch=True)
    with pytest.raises(ValueError, match="direct_dispatch"):
        CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), "threads", early=False, direct_dispatch=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_direct_dispatch_answers_a_stream_exactly(backend):
    X = RNG.uniform(-3, 3, size=(11, 3))
    with CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), backend, micro_batch=2, batch_window=0.05, timeout=60,
                       direct_dispatch=True, backend_options=_opts(backend)) as ex:
        futs = [ex.submit_one(x) for x in X]  # 2 full batches of 4, 3 left for the window
        Y = np.stack([fu.result(timeout=60) for fu in futs])
    np.testing.assert_array_equal(Y, f(X))  # every answer is a systematic worker's own output
    assert ex.stats["batches"] == 3 and ex.stats["failed_batches"] == 0 and ex._batcher.partial == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_complete_input_is_sent_and_answered_while_its_batch_is_open(backend):
    X = RNG.uniform(-3, 3, size=(3, 2))
    ex = CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), backend, micro_batch=2, batch_window=10.0, timeout=60,
                       direct_dispatch=True, backend_options=_opts(backend))
    try:
        futs = [ex.submit_one(x) for x in X[:2]]  # input 0 of both sub-batches: its worker's task goes now
        np.testing.assert_array_equal(np.stack([fu.result(timeout=30) for fu in futs]), f(X[:2]))
        assert ex._batcher.batches == 0 and ex.stats["batches"] == 0  # the batch is still open
        late = ex.submit_one(X[2])
        assert not late.done()
    finally:
        ex.shutdown(wait=True)  # closes the batch: the rest goes out
    np.testing.assert_array_equal(late.result(timeout=0), f(X[2]))
    assert ex._batcher.batches == 1 and ex.stats["batches"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_direct_worker_leaves_its_requests_to_the_decode(backend):
    X = RNG.uniform(-1, 1, size=(8, 2))
    with CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), backend, micro_batch=2, batch_window=0.05, timeout=60,
                       direct_dispatch=True, faults=Faults(workers={0: "error"}),
                       backend_options=_opts(backend)) as ex:
        futs = [ex.submit_one(x) for x in X]
        Y = np.stack([fu.result(timeout=60) for fu in futs])
    assert ex.stats["erasures"] == 2 and ex.stats["batches"] == 2  # worker 0 failed in both batches
    inp1 = [j for j in range(8) if (j % 4) // 2 == 1]  # requests 2, 3, 6, 7 are input 1: its worker's own
    np.testing.assert_array_equal(Y[inp1], f(X[inp1]))
    assert [futs[j].info.exact for j in range(8)] == [j in inp1 for j in range(8)]
    for j in set(range(8)) - set(inp1):
        info = futs[j].info
        assert info.trusted and info.n_returned == 3 and info.error_estimate is not None and info.batch in (0, 1)
    np.testing.assert_allclose(Y, f(X), atol=0.2)  # input 0: decoded from workers 1, 2, 3


def test_an_open_batch_is_neither_timed_nor_decoded_and_its_clock_starts_at_the_close():
    be = FakeBackend(4)
    ex = CodedExecutor("unused", gencc.GCC(2, 4, worker_points="systematic"), be, micro_batch=2,
                       batch_window=3600.0, timeout=5.0, hang_timeout=1.0, direct_dispatch=True)
    try:
        _frozen(ex)
        futs = [ex.submit_one(np.full(1, float(i + 1))) for i in range(2)]  # input 0 complete
        assert [(w, t.slot) for w, t in be.sent] == [(0, 0)] and be.sent[0][1].x.shape == (2, 1)
        sent = time.monotonic()
        ex._turn([], sent + 100.0)  # an open batch's task is not timed, nor is the batch failed past its timeout
        assert be.restarted == [] and not any(fu.done() for fu in futs)
        futs.append(ex.submit_one(np.full(1, 3.0)))
        ex._batcher.close(flush=True)  # the batch closes: slots 1, 2, 3 go out
        closed = time.monotonic()
        assert sorted(t.slot for _, t in be.sent) == [0, 1, 2, 3]
        ex._turn([TaskResult(0, 0, 0, 2.0 * be.sent[0][1].x, 0.0)], closed + 0.5)
        assert [fu.result(timeout=0)[0] for fu in futs[:2]] == [2.0, 4.0]
        ex._turn([], closed + 0.9)
        assert be.restarted == []
        ex._turn([], closed + 1.5)  # workers 1, 2, 3 (sent at the close) have hung
        assert be.restarted == [1, 2, 3]
    finally:
        ex.shutdown(wait=False)


def test_an_open_batch_whose_early_task_is_late_closes_before_its_window():
    # worker 0 (input 0's own) is slow; past the deadline the batch closes, though its window is an
    # hour, and its requests are decoded from the other workers
    X = RNG.uniform(-1, 1, size=(3, 2))
    with CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), "threads", micro_batch=2, batch_window=3600.0, timeout=60,
                       deadline=0.2, direct_dispatch=True,
                       faults=Faults(workers={0: "slow"}, slow_delay=30.0)) as ex:
        futs = [ex.submit_one(x) for x in X]  # requests 0, 1: input 0 (sent at once); 2: input 1
        Y = np.stack([fu.result(timeout=30) for fu in futs])
        assert ex.stats["early_closes"] == 1 and ex._batcher.batches == 1
    np.testing.assert_array_equal(Y[2], f(X[2]))  # input 1's own worker
    np.testing.assert_allclose(Y, f(X), atol=0.2)  # input 0: decoded from workers 1, 2, 3


def test_shutdown_with_cancel_futures_leaves_no_request_of_an_open_batch_pending():
    ex = CodedExecutor(MODEL, gencc.GCC(2, 4, **SYS), "threads", micro_batch=2, batch_window=3600.0, timeout=60,
                       direct_dispatch=True, faults=Faults(workers={0: "slow"}, slow_delay=30.0))
    running = [ex.submit_one(RNG.uniform(size=2)) for _ in range(2)]  # input 0 sent to the slow worker 0
    waiting = ex.submit_one(RNG.uniform(size=2))
    assert all(fu.running() for fu in running) and not waiting.running()
    ex.shutdown(wait=True, cancel_futures=True)
    assert waiting.cancelled()
    for fu in running:
        with pytest.raises(BatchFailedError, match="shut down"):
            fu.result(timeout=0)


def test_the_readmes_serving_choices_run_as_written_and_answer_every_request():
    # "Choosing, from these measurements" in docs/guide/serving-under-load.md: both executors exactly as written there
    from gencc.runtime import AdaptiveDeadline

    K, N, t = 4, 5, 0.01
    X = RNG.uniform(-1, 1, size=(12, 3))
    with HedgedExecutor(MODEL, N, "threads", hedge_delay=AdaptiveDeadline(q=0.65, factor=1.0, cap=10 * t),
                        max_copies=3, placement="pull") as ex:
        futs = [ex.submit_one(x) for x in X]
        np.testing.assert_allclose(np.stack([fut.result(timeout=60) for fut in futs]), f(X), rtol=1e-12)
        assert all(fut.info.exact for fut in futs)
    with CodedExecutor(MODEL, gencc.GCC(K, N, worker_points="systematic"), "threads",
                       deadline=AdaptiveDeadline(q=0.9, factor=1.0, floor=0.5 * t, cap=10 * t),
                       on_insufficient="wait", n_min=K - 1, direct_dispatch=True) as ex:
        futs = [ex.submit_one(x) for x in X]
        got = np.stack([fut.result(timeout=60) for fut in futs])
    exact = np.array([fut.info.exact for fut in futs])
    assert exact.any()  # no worker is slow here: the systematic workers answer their own inputs
    np.testing.assert_allclose(got[exact], f(X[exact]), rtol=1e-12)


# -- map: bounded lookahead, and what is left is abandoned when the caller stops -----------------------
def _answer_when_sent(be, batch, output, n_tasks):
    """A worker stand-in: once ``n_tasks`` tasks of ``batch`` are sent, answer each with ``output(task)``."""
    def run():
        for _ in range(3000):  # bounded: 30 s
            tasks = [(w, t) for w, t in list(be.sent) if t.batch == batch]
            if len(tasks) >= n_tasks:
                with be.lock:
                    be.events.extend(TaskResult(w, t.batch, t.slot, output(t), 0.0) for w, t in tasks)
                return
            time.sleep(0.01)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("kind", ["coded", "hedged"])
def test_map_reads_ahead_at_most_max_in_flight_batches_and_abandons_them_when_the_caller_stops(kind):
    be = FakeBackend(4)
    if kind == "coded":  # Replication(2, 4): batches of K = 2 inputs, every worker gets one task
        ex = CodedExecutor("unused", gencc.Replication(2, 4), be, timeout=60, max_in_flight=2)
        per_batch, n_tasks, answer = 2, 4, (lambda t: t.x)
    else:  # one input a group, one copy each (no hedge within the test)
        ex = HedgedExecutor("unused", 4, be, hedge_delay=60.0, timeout=60, max_in_flight=2)
        per_batch, n_tasks, answer = 1, 1, (lambda t: t.x)
    read = []

    def inputs():
        for i in range(100):
            read.append(i)
            yield np.full(1, float(i + 1))

    try:
        gen = ex.map(inputs())
        worker = _answer_when_sent(be, 0, answer, n_tasks)
        assert next(gen) == pytest.approx([1.0])
        worker.join(timeout=30)
        assert len(read) <= 2 * per_batch + 1  # the lookahead: two batches, and the input that would start a third
        gen.close()  # the caller stops: the batch still out is abandoned, its tasks cancelled, nothing more is read
        n_read = len(read)
        key = "abandoned_batches" if kind == "coded" else "abandoned"
        for _ in range(500):  # the dispatcher's next turn drops them (bounded: 5 s)
            if ex.stats[key] and be.cancelled:
                break
            time.sleep(0.01)
        assert ex.stats[key] == 1
        assert {b for _, b in be.cancelled} == {1}
        assert max(t.batch for _, t in be.sent) == 1 and len(read) == n_read
    finally:
        ex.shutdown(wait=False)
