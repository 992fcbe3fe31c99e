"""The coordinator as a state machine: events and an invented clock in, instructions out.

No executor, no threads, no processes: :class:`Play` stands in for the
dispatcher, carrying out what the coordinator asks (it records the sends,
cancels and restarts, runs the decodes with the runtime's own
:func:`~gencc.runtime.decoding.decode_batch`, and resolves the futures).
"""

from concurrent.futures import Future

import numpy as np
import pytest

import gencc
from gencc.runtime import AdaptiveDeadline, WorkerStragglers
from gencc.runtime.coordinator import (AnswerEarly, Cancel, CloseEarly, Coordinator, Decode, Resolve, Restart, Send,
                                       SendFailed, WorkerQueue)
from gencc.runtime.decoding import decode_batch
from gencc.runtime.events import TaskCancelled, TaskError, TaskResult, WorkerDied, WorkerReady
from gencc.runtime.microbatch import encode_stacked


class Play:
    """The dispatcher's part, played by the test: carries out every instruction it is given."""

    def __init__(self, scheme, **options):
        self.scheme = scheme
        self.co = Coordinator(scheme, **options)
        self.sent, self.cancelled, self.restarted, self.early, self.closed = [], [], [], [], []
        self.refuse = set()  # workers whose sends fail

    def carry(self, instructions):
        for ins in instructions:
            if isinstance(ins, Send):
                self.sent.append((ins.worker, ins.task))
                if ins.worker in self.refuse:
                    self.co.handle(SendFailed(ins.worker, ins.task.batch, ins.task.slot), 0.0)
            elif isinstance(ins, Cancel):
                self.cancelled.append((ins.worker, ins.batch))
            elif isinstance(ins, Restart):
                self.restarted.append(ins.worker)
            elif isinstance(ins, Decode):
                self.carry([self.co.decoded(ins, decode_batch(ins))])
            elif isinstance(ins, Resolve):
                if isinstance(ins.value, BaseException):
                    ins.future.set_exception(ins.value)
                else:
                    ins.future.set_result(ins.value)
            elif isinstance(ins, AnswerEarly):
                self.early.append((ins.rows, ins.outputs.copy(), ins.batch))
            elif isinstance(ins, CloseEarly):
                self.closed.append(ins.batch)
        return [type(i).__name__ for i in instructions]

    def submit(self, X, now):
        X = np.asarray(X, dtype=np.float64)
        fut = Future()
        self.carry(self.co.add_batch(encode_stacked(self.scheme, X, len(X) // self.scheme.n_inputs), fut, now))
        return fut

    def answer(self, worker, batch, slot, y, now):
        return self.carry(self.co.handle(TaskResult(worker, batch, slot, np.asarray(y, float), 0.0), now))

    def tick(self, now, batches=None):
        return self.carry(self.co.advance(now, batches))

    def tasks(self, batch):
        return [(w, t) for w, t in self.sent if t.batch == batch]


def test_hang_timer_measures_each_task_not_the_queue():
    q = WorkerQueue()
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


def test_a_batch_is_sent_to_every_worker_and_decoded_with_cancels_for_what_still_runs():
    play = Play(gencc.Replication(2, 4), timeout=5.0)
    fut = play.submit(np.arange(2.0).reshape(2, 1), now=0.0)
    assert [(w, t.batch, t.slot) for w, t in play.sent] == [(w, 0, w) for w in range(4)]
    assert play.answer(0, 0, 0, [5.0], now=0.1) == []
    assert play.tick(0.1, batches=[0]) == []  # input 1 has no copy yet: waits
    play.answer(1, 0, 1, [6.0], now=0.2)
    assert play.tick(0.2, batches=[0]) == ["Cancel", "Cancel", "Decode"]  # every input has a copy
    assert play.cancelled == [(2, 0), (3, 0)] and not play.co.batches
    res = fut.result(timeout=0)
    assert res.returned == (0, 1) and res.outputs[:, 0].tolist() == [5.0, 6.0]
    assert play.co.stats["batches"] == 1 and play.co.returned_counts == {2: 1}
    assert play.answer(2, 0, 2, [5.0], now=0.3) == [] and play.co.stats["late_results"] == 1
    assert play.carry(play.co.handle(TaskCancelled(3, 0, 3), 0.3)) == []  # the cancelled task reports in


def test_finishing_a_batch_does_not_reset_a_hung_workers_timer_and_it_is_restarted():
    """Defect 2: batches kept flowing, and each finished batch reset the hung worker's clock."""
    play = Play(gencc.Replication(2, 4), timeout=60, hang_timeout=1.0)
    futs = [play.submit(np.ones((2, 1)), now=0.0) for _ in range(3)]  # worker 3 never answers
    sent = list(play.sent)
    for t in np.arange(0.1, 1.6, 0.1):
        for w, task in sent:
            if w != 3 and task.batch in play.co.batches:
                play.answer(w, task.batch, task.slot, np.ones(1), t)
        play.tick(t)
    assert play.restarted == [3] and play.co.stats["hangs"] == 1
    assert all(f.result(timeout=0).returned == (0, 1, 2) for f in futs)


def test_a_restarted_worker_that_never_becomes_ready_is_restarted_again_and_its_tasks_erased():
    play = Play(gencc.Replication(2, 4), timeout=600, hang_timeout=100.0, restart_timeout=5.0)
    fut0 = play.submit(np.ones((2, 1)), now=0.0)
    assert play.carry(play.co.handle(WorkerDied(3, "crashed"), 0.1)) == ["Restart"]
    assert play.co.queues[3].starting and "crashed" in play.co.batches[0].failed[3]
    fut1 = play.submit(np.ones((2, 1)), now=0.2)  # slot 3 queued on the starting worker
    play.tick(4.0)  # not yet past restart_timeout: a starting worker's tasks are not timed
    assert play.restarted == [3] and play.co.batches[1].outstanding.get(3) == 3
    play.tick(5.2)  # never ready: started again, its queued task is an erasure
    assert play.restarted == [3, 3] and play.co.stats["slow_restarts"] == 1
    assert 3 not in play.co.batches[1].outstanding and "not ready" in play.co.batches[1].failed[3]
    play.carry(play.co.handle(WorkerReady(3), 6.0))
    play.tick(20.0)  # ready: no more restarts
    assert play.restarted == [3, 3] and not play.co.queues[3].starting
    for b in (0, 1):
        for w in range(3):
            play.answer(w, b, w, np.ones(1), 20.1)
    play.tick(20.2)
    assert fut0.result(timeout=0).returned == fut1.result(timeout=0).returned == (0, 1, 2)


def test_a_wrong_shape_first_result_does_not_fail_a_batch_with_enough_good_ones():
    """Defect 5: a wrong-shaped result before the output shape is known."""
    play = Play(gencc.GCC(3, 6, kernel="sobolev2"), n_wait=5, timeout=60)
    fut = play.submit(np.ones((3, 2)), now=0.0)
    play.answer(0, 0, 0, np.ones(5), 0.01)  # wrong shape first
    for w in range(1, 6):
        play.answer(w, 0, w, np.ones(2), 0.02)
    assert play.tick(0.03, batches=[0]) == ["Decode"]
    res = fut.result(timeout=0)
    assert res.returned == (1, 2, 3, 4, 5) and "wrong shape" in res.failed[0]
    np.testing.assert_allclose(res.outputs, 1.0, atol=1e-6)


def test_erasures_of_every_kind_and_a_refused_send():
    play = Play(gencc.GCC(2, 4), timeout=60, n_wait=2)
    play.refuse = {0}
    fut = play.submit(np.ones((2, 1)), now=0.0)
    assert play.co.batches[0].failed == {0: "send failed"} and 0 not in play.co.batches[0].outstanding
    play.carry(play.co.handle(TaskError(1, 0, 1, "boom"), 0.1))
    play.answer(2, 0, 2, [np.nan], 0.1)
    failed = play.co.batches[0].failed
    assert failed[1] == "error: boom" and failed[2] == "nan/inf output" and play.co.stats["erasures"] == 2
    # worker 3 alone cannot make K = 2 returns: failed at once (on_insufficient="fail"), its task cancelled
    assert play.tick(0.2) == ["Cancel", "Resolve"] and play.cancelled == [(3, 0)]
    with pytest.raises(gencc.runtime.BatchFailedError) as err:
        fut.result(timeout=0)
    assert set(err.value.failed) == {0, 1, 2}
    assert play.co.stats["failed_batches"] == 1 and not play.co.batches


def test_adaptive_deadline_decodes_from_any_trusted_subset_once_it_passes():
    """GCC(2, 4): after 16 fast tasks the deadline is 1.5 x their p90; a batch with 2 of 4 back decodes then."""
    rule = AdaptiveDeadline(q=0.9, factor=1.5, floor=0.0, cap=10.0, min_samples=8)
    play = Play(gencc.GCC(2, 4), adaptive=rule, timeout=60)
    assert play.co.deadline == 10.0  # the cold start: the cap
    for i in range(4):  # every task answers after 0.1 s
        t0 = float(i)
        play.submit(np.ones((2, 1)), now=t0)
        for w, task in play.tasks(i):
            play.answer(w, i, task.slot, np.ones(1), t0 + 0.1)
        play.tick(t0 + 0.1)
    assert play.co.deadline == pytest.approx(0.15)
    fut = play.submit(np.ones((2, 1)), now=10.0)
    for w, task in play.tasks(4):
        if w in (1, 3):
            play.answer(w, 4, task.slot, np.ones(1), 10.1)
    assert play.tick(10.12) == []  # before the deadline: wait for the others
    assert play.tick(10.16) == ["Cancel", "Cancel", "Decode"]
    assert fut.result(timeout=0).returned == (1, 3)


def test_past_the_deadline_replication_waits_for_the_copy_that_answers_its_last_input():
    """Decoding at the deadline from copies of input 0 alone would fail input 1 while its copies ran."""
    rep = gencc.Replication(2, 4)
    play = Play(rep, deadline=0.5, timeout=60, on_insufficient="wait")
    fut = play.submit(np.arange(2.0).reshape(2, 1), now=0.0)
    zero = [w for w in range(4) if rep.assignment[w] == 0]
    one = [w for w in range(4) if rep.assignment[w] == 1]
    for w in zero:
        play.answer(w, 0, w, np.zeros(1), 0.01)
    assert play.tick(0.6) == []  # past the deadline, input 1 still coming: wait
    play.answer(one[0], 0, one[0], np.ones(1), 0.7)
    play.tick(0.71)
    res = fut.result(timeout=0)
    assert res.missing == () and res.outputs[:, 0].tolist() == [0.0, 1.0]


def test_redispatch_sends_missing_slots_to_the_fastest_idle_helpers_once():
    play = Play(gencc.GCC(2, 4), deadline=0.5, timeout=60, on_insufficient="redispatch")
    fut = play.submit(np.ones((2, 1)), now=0.0)
    play.carry(play.co.handle(TaskError(0, 0, 0, "boom"), 0.05))
    play.carry(play.co.handle(TaskError(1, 0, 1, "boom"), 0.05))
    play.carry(play.co.handle(TaskError(2, 0, 2, "boom"), 0.05))
    play.answer(3, 0, 3, np.ones(1), 0.1)  # one return of K = 2; nothing more is out
    assert play.tick(0.2) == ["Send", "Send", "Send"]  # the three erased slots, to idle workers
    assert [t.slot for _, t in play.sent[4:]] == [0, 1, 2] and play.co.stats["redispatched"] == 3
    assert play.sent[4][0] == 3  # the worker that answered, fastest first
    for w, task in play.sent[4:]:
        play.answer(w, 0, task.slot, np.ones(1), 0.3)
    play.tick(0.3)
    assert fut.result(timeout=0).returned == (0, 1, 2, 3)
    assert play.tick(0.4) == []  # nothing is re-sent twice


def test_pull_placement_holds_tasks_until_a_worker_is_idle_and_never_sends_a_decoded_batchs():
    from gencc.stragglers import SlowNodes

    faults = WorkerStragglers(SlowNodes(base=0.25, fraction=0.0, jitter=0.0), 4, seed=3)
    play = Play(gencc.Replication(2, 4), timeout=60, placement="pull", faults=faults)
    fut0 = play.submit(np.ones((2, 1)), now=0.0)
    assert [(w, t.batch, t.slot) for w, t in play.sent] == [(w, 0, w) for w in range(4)]  # all idle
    fut1 = play.submit(np.full((2, 1), 2.0), now=0.0)
    assert len(play.sent) == 4 and list(play.co.pending) == [(1, s) for s in range(4)]  # every worker busy
    assert all(w == -1 for w in play.co.batches[1].outstanding.values())
    play.answer(2, 0, 2, np.ones(1), 0.1)  # worker 2 frees: takes batch 1's slot 0
    assert play.tick(0.1, batches=[0]) == ["Send"]
    assert (play.sent[-1][0], play.sent[-1][1].batch, play.sent[-1][1].slot) == (2, 1, 0)
    assert play.sent[-1][1].fault.delay == pytest.approx(0.25)  # worker 2's own straggler draw
    assert play.co.batches[1].outstanding[0] == 2 and play.co.batches[1].sent_at[0] == 0.1
    play.answer(1, 0, 1, np.ones(1), 0.2)  # replication: batch 0 is complete
    play.tick(0.2, batches=[0])  # decoded; worker 1 takes batch 1's slot 1 (its own)
    assert (play.sent[-1][0], play.sent[-1][1].slot) == (1, 1)
    play.answer(2, 1, 0, np.full(1, 2.0), 0.3)  # slot 0's result, from worker 2
    play.answer(1, 1, 1, np.full(1, 2.0), 0.3)
    play.tick(0.3, batches=[1])  # complete: slots 2 and 3 never went out
    assert fut0.result(timeout=0).returned == (1, 2) and fut1.result(timeout=0).returned == (0, 1)
    stats = play.co.stats
    assert stats["pulled_elsewhere"] == 1 and stats["never_sent"] == 2 and not play.co.pending
    assert len(play.sent) == 6 and (0, 1) not in play.cancelled  # nothing to cancel on the workers for batch 1
    assert faults._count == [1, 2, 2, 1]  # draws only for tasks sent


def test_early_answers_come_once_per_input_from_its_own_worker():
    play = Play(gencc.GCC(2, 4, worker_points="systematic"), timeout=60)
    called = []
    fut = Future()
    coded = encode_stacked(play.scheme, np.array([[1.0], [2.0], [3.0], [4.0]]), 2)  # B = 2
    play.carry(play.co.add_batch(coded, fut, 0.0, on_early=lambda *a: called.append(a)))
    assert play.answer(1, 0, 1, 2.0 * play.sent[1][1].x, 0.1) == ["AnswerEarly"]
    rows, outputs, batch = play.early[0]
    assert rows == [1, 3] and outputs[:, 0].tolist() == [4.0, 8.0] and batch == 0  # rows b*K + 1
    assert play.answer(2, 0, 2, np.ones((2, 1)), 0.1) == []  # a parity worker: no early answer


def test_an_open_batch_is_neither_timed_nor_decoded_and_closes_early_when_its_task_is_late():
    scheme = gencc.GCC(2, 4, worker_points="systematic")
    play = Play(scheme, timeout=5.0, hang_timeout=1.0, deadline=0.2, direct_dispatch=True)
    opened = play.co.next_batch()
    fut = Future()
    assert play.carry(play.co.open_column(opened, 0, np.ones(1), fut, None, now=0.0)) == ["Send"]
    assert play.tick(100.0) == ["CloseEarly"]  # not timed, not failed, but its early task is late
    assert play.restarted == [] and not fut.done() and play.closed == [0]
    coded = encode_stacked(scheme, np.ones((2, 1)), 1)
    assert play.carry(play.co.close_batch(0, coded, 100.0)) == ["Send", "Send", "Send"]  # slots 1, 2, 3
    assert play.co.batches[0].t0 == 100.0
    play.tick(101.5)  # the clock started at the close: now every worker has hung
    assert play.restarted == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="ended before it closed"):
        play.co.close_batch(7, coded, 102.0)


def test_fail_all_resolves_every_batch_and_cancels_its_tasks():
    play = Play(gencc.GCC(2, 4), timeout=60)
    futs = [play.submit(np.ones((2, 1)), now=0.0) for _ in range(2)]
    kinds = play.carry(play.co.fail_all("executor shut down"))
    assert kinds.count("Cancel") == 8 and kinds.count("Resolve") == 2 and not play.co.batches
    for f in futs:
        with pytest.raises(gencc.runtime.BatchFailedError, match="executor shut down"):
            f.result(timeout=0)


def test_the_modules_example_runs():
    import doctest

    from gencc.runtime import coordinator

    assert doctest.testmod(coordinator, raise_on_error=False).failed == 0
