"""When a batch is decoded, failed, re-dispatched or left waiting: one pure function.

:func:`decide` maps what is known about a batch at time ``elapsed`` to an
action. It knows nothing of processes or kernels: the executor measures the
state (asking the scheme what a returned set can decode) and carries the
action out. Tested with made-up states and a made-up clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GatherPolicy", "GatherState", "Action", "decide", "ON_INSUFFICIENT", "AdaptiveDeadline",
           "adaptive_deadline", "early_inputs", "hedge_due"]

ON_INSUFFICIENT = ("fail", "wait", "redispatch")


@dataclass(frozen=True)
class GatherPolicy:
    """How long a batch waits and what it does when too few workers return.

    Attributes
    ----------
    deadline : float or None
        Seconds after dispatch at which to decode with whatever arrived, if
        that is decodable.
    timeout : float
        Seconds after dispatch at which the batch ends: decoded if decodable,
        failed otherwise.
    on_insufficient : {"fail", "wait", "redispatch"}
        When the batch cannot become decodable in time (every outstanding
        task would not be enough, or the deadline passed without enough):
        fail at once, wait until ``timeout``, or re-send the missing coded
        inputs to idle workers and keep waiting.
    """

    deadline: float | None
    timeout: float
    on_insufficient: str = "fail"


@dataclass(frozen=True)
class GatherState:
    """What the executor knows about one batch.

    Attributes
    ----------
    elapsed : float
        Seconds since dispatch.
    enough : bool
        Waiting longer cannot improve the answer, or the caller's ``n_wait``
        is met: decode now.
    decodable : bool
        The usable results in hand make a decode the scheme (and the
        caller's ``n_min``) stands behind.
    reachable : bool
        The batch would be decodable if every outstanding task returned.
    outstanding : int
        Tasks still running or queued.
    can_redispatch : bool
        Some missing coded input has not been re-sent yet and a worker can
        take it.
    covers : bool, optional
        A decode now answers every input that the outstanding tasks could
        still answer: False for a scheme that answers input by input
        (replication, ParM) while the only copy of some unanswered input is
        still out. Default True (a curve answers every input once decodable).
    waited : float, optional
        Where the batch's tasks left at different times (direct dispatch):
        seconds the most recently sent of the outstanding tasks has been
        out. The deadline then counts from it: a batch is past its deadline
        when every task still out is late, however long ago the batch
        closed. None: from ``elapsed``.
    """

    elapsed: float
    enough: bool
    decodable: bool
    reachable: bool
    outstanding: int
    can_redispatch: bool = False
    covers: bool = True
    waited: float | None = None


@dataclass(frozen=True)
class Action:
    """``kind`` is "wait", "decode", "fail" or "redispatch"; ``reason`` says why a batch fails."""

    kind: str
    reason: str = ""


WAIT = Action("wait")
DECODE = Action("decode")
REDISPATCH = Action("redispatch")


def decide(state: GatherState, policy: GatherPolicy) -> Action:
    """The action to take for a batch in ``state`` under ``policy``.

    Parameters
    ----------
    state : GatherState
    policy : GatherPolicy

    Returns
    -------
    Action

    Notes
    -----
    In order: decode when ``enough``; decode when decodable and nothing more
    can arrive, or when the deadline passed and the decode ``covers`` every
    input the outstanding tasks could answer (a decode that leaves an input
    unanswered fails that input, so at the deadline it waits for the task
    that can answer it: ParM with K - 1 systematic returns waits for the last
    one or the parity, as it failed 2-14% of requests under load when it did
    not); past ``timeout``, decode if decodable and fail otherwise; then, if the
    batch cannot become decodable (nothing outstanding would suffice) or the
    deadline passed without a decodable set, apply ``on_insufficient``.
    A batch that is not decodable and has nothing outstanding and nothing to
    re-send fails whatever the policy: waiting cannot help it.
    """
    waited = state.elapsed if state.waited is None else state.waited
    past_deadline = policy.deadline is not None and waited >= policy.deadline
    if state.enough and state.decodable:
        return DECODE
    if state.decodable and (state.outstanding == 0 or (past_deadline and state.covers)):
        return DECODE
    if state.elapsed >= policy.timeout:
        if state.decodable:  # the stragglers are late, the answer is not
            return DECODE
        return Action("fail", f"timed out after {policy.timeout:g} s")
    short = not state.reachable or (past_deadline and not state.decodable)
    if not short:
        return WAIT
    if policy.on_insufficient == "redispatch" and state.can_redispatch:
        return REDISPATCH
    if state.outstanding == 0:
        after = ", even after re-dispatch" if policy.on_insufficient == "redispatch" else ""
        return Action("fail", f"too few workers returned{after}")
    if policy.on_insufficient == "fail":
        return Action("fail", "too few workers returned")
    return WAIT


@dataclass(frozen=True)
class AdaptiveDeadline:
    """A deadline that follows the observed task latencies.

    The rule (:func:`adaptive_deadline`): ``clip(factor * quantile(recent, q),
    floor, cap)`` where ``recent`` are the latencies (dispatch to result) of
    the last ``window`` tasks; with fewer than ``min_samples`` of them the
    deadline is ``initial``, or ``cap`` when that is None.

    Attributes
    ----------
    q : float
        Quantile of the recent task latencies, in (0, 1]. Default 0.9.
    factor : float
        Multiplies the quantile. Default 1.5.
    floor : float
        Seconds; the deadline is never shorter. Default 0.
    cap : float
        Seconds; the deadline is never longer. Default 1.
    window : int
        How many recent task latencies are kept. Default 512.
    min_samples : int
        Latencies needed before the quantile is trusted. Default 20.
    initial : float, optional
        Seconds, in [floor, cap]: the deadline of a cold start, until
        ``min_samples`` latencies are seen. Default None: ``cap``, which a
        slow task in the very first batches then waits out (a cold executor
        of the load benchmark answered its first two requests in 385 ms, at
        its 400 ms cap); set it to the latency you expect of f.
    """

    q: float = 0.9
    factor: float = 1.5
    floor: float = 0.0
    cap: float = 1.0
    window: int = 512
    min_samples: int = 20
    initial: float | None = None

    def __post_init__(self):
        if not 0 < self.q <= 1:
            raise ValueError(f"q must be in (0, 1], got {self.q!r}")
        if not self.factor > 0:
            raise ValueError(f"factor must be > 0, got {self.factor!r}")
        if not 0 <= self.floor <= self.cap:
            raise ValueError(f"floor and cap must satisfy 0 <= floor <= cap, got floor={self.floor!r}, "
                             f"cap={self.cap!r}")
        if self.initial is not None and not self.floor <= self.initial <= self.cap:
            raise ValueError(f"initial must be None or in [floor, cap] = [{self.floor!r}, {self.cap!r}], "
                             f"got {self.initial!r}")
        if self.window < 1 or self.min_samples < 1:
            raise ValueError(f"window and min_samples must be >= 1, got {self.window!r}, {self.min_samples!r}")


def adaptive_deadline(latencies, rule: AdaptiveDeadline) -> float:
    """The deadline, in seconds, that ``rule`` gives for these recent task latencies.

    Parameters
    ----------
    latencies : sequence of float
        Recent per-task latencies, seconds (the last ``rule.window`` are used).
    rule : AdaptiveDeadline

    Returns
    -------
    float
        ``clip(rule.factor * quantile(latencies, rule.q), rule.floor, rule.cap)``,
        or ``rule.initial`` (``rule.cap`` if None) with fewer than
        ``rule.min_samples`` latencies.
    """
    lat = np.asarray(list(latencies)[-rule.window:], dtype=np.float64)
    if lat.size < rule.min_samples:
        return float(rule.cap if rule.initial is None else rule.initial)
    return float(np.clip(rule.factor * np.quantile(lat, rule.q), rule.floor, rule.cap))


def early_inputs(returned, direct, answered=()) -> list[int]:
    """Inputs of a batch that can be answered now, before any decode.

    Parameters
    ----------
    returned : iterable of int
        Slots (coded inputs) whose usable result is in.
    direct : dict of int -> int
        Slot -> the input it carries unchanged (a systematic code's workers
        0..K-1; every worker of uncoded or replication); empty for a code
        with no such slot.
    answered : iterable of int
        Inputs already answered early (not repeated).

    Returns
    -------
    list of int
        Inputs, sorted, whose own slot returned and that were not answered yet.
    """
    done = set(answered)
    return sorted({direct[s] for s in returned if s in direct} - done)


def hedge_due(elapsed: float, hedge_delay: float, copies: int, max_copies: int) -> bool:
    """Whether a request still unanswered after ``elapsed`` seconds gets another copy.

    Parameters
    ----------
    elapsed : float
        Seconds since its first copy was sent.
    hedge_delay : float
        Seconds after which the next copy goes (Dean and Barroso: the p95 of
        observed latencies); copy ``c`` (1-based) goes at ``(c - 1) * hedge_delay``.
    copies : int
        Copies sent so far (>= 1).
    max_copies : int
        Most copies a request may have (2: one backup).

    Returns
    -------
    bool
    """
    return copies < max_copies and elapsed >= copies * hedge_delay
