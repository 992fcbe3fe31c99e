"""The gather policy as a pure function, and the executor's bookkeeping, with a fake backend and clock."""

import threading

import numpy as np
import pytest

import gencc
from gencc.runtime.events import TaskResult
from gencc.runtime.faults import TaskFault
from gencc.runtime.executor import CodedExecutor, _settle, _WorkerQueue
from gencc.runtime.gather import GatherPolicy, GatherState, decide

POLICY = GatherPolicy(deadline=1.0, timeout=5.0, on_insufficient="fail")


def state(**kw):
    base = dict(elapsed=0.1, enough=False, decodable=False, reachable=True, outstanding=3, can_redispatch=False)
    return GatherState(**{**base, **kw})


def test_decodes_when_enough_or_at_the_deadline_or_when_nothing_more_can_come():
    assert decide(state(enough=True, decodable=True), POLICY).kind == "decode"
    assert decide(state(decodable=True), POLICY).kind == "wait"  # more may come before the deadline
    assert decide(state(decodable=True, elapsed=1.0), POLICY).kind == "decode"
    assert decide(state(decodable=True, outstanding=0), POLICY).kind == "decode"
    # "enough" never overrides the scheme's floor
    assert decide(state(enough=True, decodable=False), POLICY).kind == "wait"


def test_with_tasks_sent_at_different_times_the_deadline_counts_from_the_latest_still_out():
    # direct dispatch: a systematic task left long ago, the batch (and its parity) just now
    assert decide(state(decodable=True, elapsed=0.1, waited=1.2), POLICY).kind == "decode"  # all out are late
    assert decide(state(decodable=True, elapsed=1.2, waited=0.3), POLICY).kind == "wait"  # one just left
    assert decide(state(decodable=False, elapsed=5.0, waited=0.3), POLICY).kind == "fail"  # timeout: from elapsed


def test_at_the_deadline_a_decode_that_leaves_answerable_inputs_unanswered_waits():
    # replication / ParM: some input's only copies are still out
    assert decide(state(decodable=True, elapsed=1.5, covers=False), POLICY).kind == "wait"
    assert decide(state(decodable=True, elapsed=1.5, covers=True), POLICY).kind == "decode"
    # nothing more can come, or the timeout: decode what can be (the rest fail explicitly)
    assert decide(state(decodable=True, elapsed=1.5, covers=False, outstanding=0), POLICY).kind == "decode"
    assert decide(state(decodable=True, elapsed=5.0, covers=False), POLICY).kind == "decode"
    assert decide(state(decodable=True, enough=True, covers=False), POLICY).kind == "decode"


def test_never_answers_from_an_undecodable_set():
    for elapsed in (0.0, 0.5, 1.0, 4.9):
        for outstanding in (0, 1, 5):
            for policy in ("fail", "wait", "redispatch"):
                a = decide(state(elapsed=elapsed, outstanding=outstanding, reachable=outstanding > 0),
                           GatherPolicy(1.0, 5.0, policy))
                assert a.kind != "decode"


def test_insufficient_fails_waits_or_redispatches():
    hopeless = state(reachable=False, outstanding=2)
    assert decide(hopeless, POLICY) == decide(hopeless, POLICY)  # pure
    assert decide(hopeless, POLICY).kind == "fail" and "too few" in decide(hopeless, POLICY).reason
    wait = GatherPolicy(1.0, 5.0, "wait")
    assert decide(hopeless, wait).kind == "wait"
    assert decide(state(reachable=False, outstanding=0), wait).kind == "fail"  # waiting cannot help
    late = state(elapsed=1.5)  # past the deadline, not decodable, still reachable
    assert decide(late, POLICY).kind == "fail"
    assert decide(late, wait).kind == "wait"
    redo = GatherPolicy(1.0, 5.0, "redispatch")
    assert decide(state(elapsed=1.5, can_redispatch=True), redo).kind == "redispatch"
    a = decide(state(elapsed=1.5, outstanding=0, reachable=False), redo)
    assert a.kind == "fail" and "even after re-dispatch" in a.reason


def test_timeout_decodes_what_can_be_decoded_and_fails_the_rest():
    a = decide(state(elapsed=5.0), GatherPolicy(None, 5.0, "wait"))
    assert a.kind == "fail" and "timed out after 5 s" in a.reason
    assert decide(state(elapsed=100.0), GatherPolicy(None, 5.0, "wait")).kind == "fail"
    # no deadline, one straggler still out: at the timeout the K answers in hand are returned
    assert decide(state(elapsed=4.9, decodable=True), GatherPolicy(None, 5.0, "fail")).kind == "wait"
    assert decide(state(elapsed=5.0, decodable=True), GatherPolicy(None, 5.0, "fail")).kind == "decode"


def test_hang_timer_measures_each_task_not_the_queue():
    q = _WorkerQueue()
    q.push(0, 3, now=0.0)
    q.push(1, 3, now=0.5)
    q.ack(1, 3, now=2.0)  # a later task answered (or cancelled): the head keeps its own start
    assert q.head_since == 0.0
    q.ack(0, 3, now=3.0)
    assert q.head_since is None and not q.tasks
    q.push(2, 3, now=4.0)
    q.push(3, 3, now=4.1)
    q.ack(2, 3, now=6.0)
    assert q.head_since == 6.0  # the next task starts when the previous one ends


class FakeBackend:
    """Records what the executor sends; the test plays the workers."""

    name = "fake"

    def __init__(self, n):
        self.n_workers, self.sent, self.cancelled, self.restarted = n, [], [], []
        self.events, self.lock = [], threading.Lock()

    def start(self):
        pass

    def submit(self, w, task):
        self.sent.append((w, task))
        return True

    def cancel(self, w, batch):
        self.cancelled.append((w, batch))

    def poll(self, timeout):
        with self.lock:
            out, self.events = self.events, []
        return out

    def restart(self, w):
        self.restarted.append(w)

    def shutdown(self):
        pass


def test_finishing_a_batch_does_not_reset_a_hung_workers_timer_and_it_is_restarted():
    """Defect 2: batches kept flowing, and each finished batch reset the hung worker's clock."""
    be = FakeBackend(4)
    ex = CodedExecutor("unused", gencc.Replication(2, 4), be, timeout=60, hang_timeout=1.0)
    try:
        ex._stop.set()
        ex._thread.join()
        for _ in range(3):  # worker 3 never answers; the others answer every batch at once
            fut = ex.submit(np.ones((2, 1)))
        sent = list(be.sent)
        now = ex._batches[0].t0
        for t in np.arange(0.1, 1.6, 0.1):
            with ex._lock:
                for w, task in sent:
                    if w != 3 and task.batch in ex._batches:
                        ex._handle(TaskResult(w, task.batch, task.slot, np.ones(1), 0.0), now + t)
                ex._check_hangs(now + t)
                settle = [s for b in list(ex._batches.values()) if (s := ex._step(b, now + t))]
            _settle(ex._run_decodes(settle))
        assert be.restarted == [3]
        assert fut.result(timeout=0).returned == (0, 1, 2)
    finally:
        ex.shutdown(wait=False)


def test_a_restarted_worker_that_never_becomes_ready_is_restarted_again_and_its_tasks_erased():
    from gencc.runtime.events import WorkerDied, WorkerReady

    be = FakeBackend(4)
    ex = CodedExecutor("unused", gencc.Replication(2, 4), be, timeout=600, hang_timeout=100.0, restart_timeout=5.0)
    try:
        ex._stop.set()
        ex._thread.join()
        fut = ex.submit(np.ones((2, 1)))
        t0 = ex._batches[0].t0
        with ex._lock:
            ex._handle(WorkerDied(3, "crashed"), t0 + 0.1)
            assert be.restarted == [3] and ex._queues[3].starting
            ex._dispatch(ex._batches[0], 3, 3, TaskFault(), t0 + 0.2)  # re-sent to the starting worker
            ex._check_hangs(t0 + 4.0)  # not yet past restart_timeout: its task is not timed
            assert be.restarted == [3] and ex._batches[0].outstanding.get(3) == 3
            ex._check_hangs(t0 + 5.2)  # never ready: started again, its queued task is an erasure
            assert be.restarted == [3, 3] and ex.stats["slow_restarts"] == 1
            assert 3 not in ex._batches[0].outstanding and "not ready" in ex._batches[0].failed[3]
            ex._handle(WorkerReady(3), t0 + 6.0)
            ex._check_hangs(t0 + 20.0)  # ready: no more restarts
            assert be.restarted == [3, 3] and not ex._queues[3].starting
            for w in range(3):
                ex._handle(TaskResult(w, 0, w, np.ones(1), 0.0), t0 + 20.1)
            settle = [s for b in list(ex._batches.values()) if (s := ex._step(b, t0 + 20.2))]
        _settle(ex._run_decodes(settle))
        assert fut.result(timeout=0).returned == (0, 1, 2)
        with pytest.raises(ValueError, match="restart_timeout"):
            CodedExecutor("unused", gencc.Replication(2, 4), FakeBackend(4), restart_timeout=0)
    finally:
        ex.shutdown(wait=False)


def test_a_wrong_shape_first_result_does_not_fail_a_batch_with_enough_good_ones():
    """Defect 5: a wrong-shaped result before the output shape is known."""
    be = FakeBackend(6)
    ex = CodedExecutor("unused", gencc.GCC(3, 6, kernel="sobolev2"), be, n_wait=5, timeout=60)
    try:
        ex._stop.set()
        ex._thread.join()
        fut = ex.submit(np.ones((3, 2)))
        b = ex._batches[0]
        with ex._lock:
            ex._handle(TaskResult(0, 0, 0, np.ones(5), 0.0), b.t0 + 0.01)  # wrong shape first
            for w in range(1, 6):
                ex._handle(TaskResult(w, 0, w, np.ones(2), 0.0), b.t0 + 0.02)
            done = ex._step(b, b.t0 + 0.03)
        assert done is not None
        _, res = ex._run_decodes([done])[0]  # the decode runs outside the lock
        assert res.returned == (1, 2, 3, 4, 5) and "wrong shape" in res.failed[0]
        np.testing.assert_allclose(res.outputs, 1.0, atol=1e-6)
    finally:
        ex.shutdown(wait=False)


@pytest.mark.parametrize("scheme, n_min", [(gencc.GCC(4, 12), 4), (gencc.BACC(4, 12), 4),
                                           (gencc.LCC(3, 8, degree=2), 5), (gencc.Replication(4, 12), 1)])
def test_each_scheme_documents_the_returns_it_stands_behind(scheme, n_min):
    assert scheme.trusted_returns == n_min
    assert not scheme.can_decode(range(n_min - 1))
    assert scheme.can_decode(range(n_min))
    assert scheme.is_complete(range(scheme.n_workers))


def test_a_systematic_code_is_complete_once_every_systematic_worker_returned():
    s = gencc.GCC(4, 8, worker_points="systematic")
    assert s.is_complete([0, 1, 2, 3]) and s.can_decode([0, 1, 2, 3])
    assert not s.is_complete([0, 1, 2, 4, 5, 6, 7]) and s.can_decode([0, 1, 2, 4])
    lcc = gencc.LCC(4, 12, degree=2, worker_points="systematic")  # threshold 7
    assert lcc.can_decode([0, 1, 2, 3]) and not lcc.can_decode([0, 1, 2, 4, 5, 6])
    assert lcc.is_complete([0, 1, 2, 3]) and not gencc.LCC(4, 12, degree=2).is_complete(range(7))
    assert lcc.decode_with_info(np.ones((4, 1)), [0, 1, 2, 3]).error_estimate == 0.0


def test_an_unforeseen_error_fails_its_batch_not_the_dispatcher():
    """A scheme raising something unexpected used to kill the dispatcher and strand every future."""

    class Exploding(gencc.GCC):
        def decode_with_info(self, Y, returned):
            raise IndexError("boom")

    be = FakeBackend(4)
    with CodedExecutor("unused", Exploding(2, 4, kernel="sobolev2"), be, timeout=5) as ex:
        fut = ex.submit(np.ones((2, 1)))
        with be.lock:
            be.events = [TaskResult(w, 0, w, np.ones(1), 0.0) for w in range(4)]
        with pytest.raises(Exception, match="internal error: IndexError"):
            fut.result(timeout=5)
        fut2 = ex.submit(np.ones((2, 1)))  # the dispatcher is still alive
        with be.lock:
            be.events = [TaskResult(w, 1, w, np.ones(1), 0.0) for w in range(4)]
        with pytest.raises(Exception, match="internal error"):
            fut2.result(timeout=5)


# -- any-subset policies: adaptive deadline, early answers, hedging ------------------------------------
from gencc.runtime.gather import AdaptiveDeadline, adaptive_deadline, early_inputs, hedge_due, pick_worker  # noqa: E402


def test_adaptive_deadline_is_a_clipped_quantile_and_the_cap_until_enough_samples():
    rule = AdaptiveDeadline(q=0.5, factor=2.0, floor=0.1, cap=5.0, window=4, min_samples=3)
    assert adaptive_deadline([1.0, 1.0], rule) == 5.0  # too few: the cap
    assert adaptive_deadline([1.0, 1.0, 1.0], rule) == 2.0
    assert adaptive_deadline([9.0, 1.0, 1.0, 1.0, 1.0], rule) == 2.0  # only the last `window`
    assert adaptive_deadline([0.01] * 5, rule) == 0.1  # the floor
    assert adaptive_deadline([100.0] * 5, rule) == 5.0  # the cap
    with pytest.raises(ValueError, match="q must"):
        AdaptiveDeadline(q=0.0)
    with pytest.raises(ValueError, match="floor and cap"):
        AdaptiveDeadline(floor=2.0, cap=1.0)


def test_adaptive_deadline_starts_at_initial_until_enough_samples():
    rule = AdaptiveDeadline(q=0.5, factor=2.0, floor=0.1, cap=5.0, window=4, min_samples=3, initial=0.3)
    assert adaptive_deadline([], rule) == 0.3 and adaptive_deadline([1.0, 1.0], rule) == 0.3
    assert adaptive_deadline([1.0, 1.0, 1.0], rule) == 2.0  # then the quantile, as without it
    with pytest.raises(ValueError, match="initial must be None or in"):
        AdaptiveDeadline(floor=0.1, cap=5.0, initial=6.0)
    from test_runtime import MODEL
    with CodedExecutor(MODEL, gencc.GCC(2, 4), "threads", deadline=rule) as ex:  # the executors start there
        assert ex.deadline == 0.3
    with gencc.runtime.HedgedExecutor(MODEL, 2, "threads", hedge_delay=rule) as hx:
        assert hx.hedge_delay == 0.3


def test_early_inputs_are_the_returned_direct_slots_not_yet_answered():
    direct = {0: 0, 1: 1, 2: 2}  # a systematic code with K = 3; slots 3.. are parity
    assert early_inputs([4, 2, 0], direct) == [0, 2]
    assert early_inputs([4, 2, 0], direct, answered=[0]) == [2]
    assert early_inputs([3, 4], direct) == []
    assert early_inputs([0, 1], {}) == []  # a non-systematic code answers nothing early
    assert early_inputs([3, 4], {3: 0, 4: 1}) == [0, 1]  # replication: every copy carries an input


def test_hedge_goes_after_the_delay_once_per_copy_up_to_max_copies():
    assert not hedge_due(0.05, 0.1, copies=1, max_copies=2)
    assert hedge_due(0.1, 0.1, copies=1, max_copies=2)
    assert not hedge_due(10.0, 0.1, copies=2, max_copies=2)
    assert not hedge_due(0.15, 0.1, copies=2, max_copies=3) and hedge_due(0.2, 0.1, copies=2, max_copies=3)


def test_a_copy_goes_to_an_idle_worker_else_the_least_loaded_never_one_holding_it():
    assert pick_worker([2, 0, 1]) == 1
    assert pick_worker([2, 0, 1], exclude=[1]) == 2
    assert pick_worker([1, 1, -1], exclude=[0]) == 1  # -1: restarting
    assert pick_worker([1, -1], exclude=[0]) is None


def test_adaptive_deadline_decodes_from_any_trusted_subset_once_it_passes():
    """GCC(2, 4): after 20 fast tasks the deadline is 1.5 x their p90; a batch with 2 of 4 back decodes then."""
    be = FakeBackend(4)
    rule = AdaptiveDeadline(q=0.9, factor=1.5, floor=0.0, cap=10.0, min_samples=8)
    ex = CodedExecutor("unused", gencc.GCC(2, 4), be, deadline=rule, timeout=60)
    try:
        ex._stop.set()
        ex._thread.join()
        for i in range(4):  # every task answers after 0.1 s
            ex.submit(np.ones((2, 1)))
            t0 = ex._batches[i].t0
            with ex._lock:
                for w, task in [s for s in be.sent if s[1].batch == i]:
                    ex._handle(TaskResult(w, task.batch, task.slot, np.ones(1), 0.0), t0 + 0.1)
                settle = [s for b in list(ex._batches.values()) if (s := ex._step(b, t0 + 0.1))]
            _settle(ex._run_decodes(settle))
        assert ex.deadline == pytest.approx(0.15)
        fut = ex.submit(np.ones((2, 1)))
        b = ex._batches[4]
        with ex._lock:
            for w, task in [s for s in be.sent if s[1].batch == 4 and s[0] in (1, 3)]:
                ex._handle(TaskResult(w, task.batch, task.slot, np.ones(1), 0.0), b.t0 + 0.1)
            assert ex._step(b, b.t0 + 0.12) is None  # before the deadline: wait for the others
            done = ex._step(b, b.t0 + 0.16)
        _settle(ex._run_decodes([done]))
        assert fut.result(timeout=0).returned == (1, 3)
    finally:
        ex.shutdown(wait=False)


def test_assign_idle_sends_the_oldest_tasks_to_their_own_worker_or_another_idle_one():
    from gencc.runtime.gather import assign_idle

    anyone = lambda s, w: True  # noqa: E731
    assert assign_idle([0, 1, 2], [], anyone) == []
    assert assign_idle([3, 1, 2], [2, 1], anyone) == [(0, 1), (1, 2)]  # slot 3: lowest idle; slot 1: 1 is taken
    assert assign_idle([1, 2], [2, 1], anyone) == [(0, 1), (1, 2)]  # each to its own
    # ParM-like: slot 3 runs another model, only on worker 3; it waits without holding back slot 0
    parity = lambda s, w: (s == 3) == (w == 3)  # noqa: E731
    assert assign_idle([3, 0], [1], parity) == [(1, 1)]
    assert assign_idle([3, 0], [3, 1], parity) == [(0, 3), (1, 1)]


def test_a_curve_answers_every_input_once_it_decodes_replication_only_those_with_a_copy():
    gcc = gencc.GCC(4, 12)
    assert not gcc.available([]).any() and gcc.available([7]).all()
    rep = gencc.Replication(2, 4)
    held = [rep.assignment[w] for w in range(4)]
    w0 = held.index(0)
    mask = rep.available([w0])
    assert mask[0] and not mask[1]


def test_past_the_deadline_replication_waits_for_the_copy_that_answers_its_last_input():
    """Decoding at the deadline from copies of input 0 alone would fail input 1 while its copies ran."""
    rep = gencc.Replication(2, 4)
    be = FakeBackend(4)
    ex = CodedExecutor("unused", rep, be, deadline=0.5, timeout=60, on_insufficient="wait")
    try:
        ex._stop.set()
        ex._thread.join()
        fut = ex.submit(np.arange(2.0).reshape(2, 1))
        b = ex._batches[0]
        zero = [w for w in range(4) if rep.assignment[w] == 0]
        one = [w for w in range(4) if rep.assignment[w] == 1]
        with ex._lock:
            for w in zero:
                ex._handle(TaskResult(w, 0, w, np.zeros(1), 0.0), b.t0 + 0.01)
            assert ex._step(b, b.t0 + 0.6) is None  # past the deadline, input 1 still coming: wait
            ex._handle(TaskResult(one[0], 0, one[0], np.ones(1), 0.0), b.t0 + 0.7)
            done = ex._step(b, b.t0 + 0.71)
        _settle(ex._run_decodes([done]))
        res = fut.result(timeout=0)
        assert res.missing == () and res.outputs[:, 0].tolist() == [0.0, 1.0]
    finally:
        ex.shutdown(wait=False)
