"""The gather policy as a pure function, and the executor with a fake backend (the coordinator's
bookkeeping under an invented clock is in test_coordinator)."""

import threading

import numpy as np
import pytest

import gencc
from gencc.runtime.events import TaskResult
from gencc.runtime.executor import CodedExecutor
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
from gencc.runtime.gather import AdaptiveDeadline, adaptive_deadline, early_inputs, hedge_due  # noqa: E402
from gencc.runtime.placement import pick_worker  # noqa: E402


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


def test_assign_idle_sends_the_oldest_tasks_to_their_own_worker_or_another_idle_one():
    from gencc.runtime.placement import assign_idle

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


def test_a_failed_slot_goes_to_the_fastest_free_worker_that_answered_then_an_idle_one():
    from gencc.runtime.placement import redispatch_helpers

    busy = {2, 5}.__contains__
    # answered fastest first (4 twice: two slots), 2 busy, 7 runs another model
    assert redispatch_helpers([0, 1, 2, 3, 4, 5], [4, 2, 4, 0, 7], busy) == [4, 0, 1, 3]
    assert redispatch_helpers([2, 5], [2], busy) == [2]  # nobody free: those that answered
    assert redispatch_helpers([2, 5], [], busy) == []


def test_workers_spread_over_nodes_so_that_a_lost_node_takes_no_two_neighbours():
    from gencc.runtime.placement import spread_over_nodes
    from gencc.schemes.gcc import widest_hole

    # replication: the two copies of each input on different nodes
    rep = gencc.Replication(4, 8)
    res = spread_over_nodes(rep, ["node_a", "node_b"])
    for k in range(4):
        assert {next(iter(res[w])) for w in range(8) if rep.assignment[w] == k} == {"node_a", "node_b"}
    # GCC: losing a node leaves single-node holes, and the decode stays far better than with the
    # contiguous placement (workers 0..7 on one node), whose loss is an extrapolation
    K, N = 4, 16
    g = gencc.GCC(K, N)
    res = spread_over_nodes(g, ["a", "b"], amount=0.5)
    assert all(len(r) == 1 and list(r.values()) == [0.5] for r in res)
    X = np.linspace(-2.5, 2.5, K)[:, None]
    Y = X * np.sin(X)
    coded = g.encode(X)
    out = coded * np.sin(coded)
    for lost in ("a", "b"):
        kept = np.array([w for w in range(N) if lost not in res[w]])
        assert widest_hole(g.beta, kept) == 1 and g.can_decode(kept)
        contiguous = np.arange(N // 2) if lost == "b" else np.arange(N // 2, N)
        spread_err = np.max(np.abs(g.decode(out[kept], kept) - Y))
        block_err = np.max(np.abs(g.decode(out[contiguous], contiguous) - Y))
        assert spread_err < 0.1 * block_err
    with pytest.raises(ValueError, match="nodes must be"):
        spread_over_nodes(g, [])
    with pytest.raises(ValueError, match="amount must be"):
        spread_over_nodes(g, ["a"], amount=0)
