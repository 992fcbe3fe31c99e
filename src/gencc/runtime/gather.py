"""When a batch is decoded, failed, re-dispatched or left waiting: one pure function.

:func:`decide` maps what is known about a batch at time ``elapsed`` to an
action. It knows nothing of processes or kernels: the executor measures the
state (asking the scheme what a returned set can decode) and carries the
action out. Tested with made-up states and a made-up clock.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GatherPolicy", "GatherState", "Action", "decide", "ON_INSUFFICIENT"]

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
    """

    elapsed: float
    enough: bool
    decodable: bool
    reachable: bool
    outstanding: int
    can_redispatch: bool = False


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
    can arrive or the deadline passed; past ``timeout``, decode if decodable
    and fail otherwise; then, if the
    batch cannot become decodable (nothing outstanding would suffice) or the
    deadline passed without a decodable set, apply ``on_insufficient``.
    A batch that is not decodable and has nothing outstanding and nothing to
    re-send fails whatever the policy: waiting cannot help it.
    """
    past_deadline = policy.deadline is not None and state.elapsed >= policy.deadline
    if state.enough and state.decodable:
        return DECODE
    if state.decodable and (state.outstanding == 0 or past_deadline):
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
