"""The options of a :class:`~gencc.runtime.CodedExecutor`, checked in one place: :func:`executor_options`."""

from __future__ import annotations

from dataclasses import dataclass

from .._validation import check_choice, check_int, check_nonnegative
from .gather import ON_INSUFFICIENT, AdaptiveDeadline
from .placement import PLACEMENTS

__all__ = ["ExecutorOptions", "executor_options", "check_column_window"]


@dataclass(frozen=True)
class ExecutorOptions:
    """A :class:`~gencc.runtime.CodedExecutor`'s checked options (see its docstring for each).

    ``deadline`` is the fixed deadline in seconds (None: none, or an adaptive one), ``adaptive``
    the :class:`~gencc.runtime.AdaptiveDeadline` (None: none)."""

    n_min: int | None
    n_wait: int
    deadline: float | None
    adaptive: AdaptiveDeadline | None
    direct_dispatch: bool
    timeout: float
    on_insufficient: str
    placement: str
    hang_timeout: float
    restart_timeout: float
    max_error: float | None
    max_in_flight: int
    micro_batch: int
    batch_window: float
    column_window: float | None


def check_column_window(seconds, direct_dispatch: bool) -> float | None:
    """``column_window`` checked: None, or seconds >= 0 under direct dispatch."""
    if seconds is None:
        return None
    if not direct_dispatch:
        raise ValueError("column_window needs direct_dispatch=True (it times an input's task, which "
                         "only direct dispatch sends before its batch closes)")
    return check_nonnegative(seconds, "column_window")


def _positive(value, name, why=""):
    value = check_nonnegative(value, name)
    if value == 0:
        raise ValueError(f"{name} must be > 0{why}")
    return value


def executor_options(scheme, *, n_min=None, n_wait=None, deadline=None, timeout=30.0, on_insufficient="fail",
                     placement="pinned", hang_timeout=None, restart_timeout=None, max_error=None, max_in_flight=4,
                     micro_batch=1, batch_window=0.005, direct_dispatch=False,
                     column_window=None) -> ExecutorOptions:
    """Check a :class:`~gencc.runtime.CodedExecutor`'s options against its ``scheme``.

    Every bad value raises a ``ValueError`` or ``TypeError`` naming the argument and what was
    expected, before any worker starts.

    Parameters
    ----------
    scheme : CodingScheme
        Gives the bounds of ``n_min`` and ``n_wait`` (its minimum and trusted returns, N).
    n_min, n_wait, deadline, timeout, on_insufficient, placement, hang_timeout, restart_timeout, max_error, \
max_in_flight, micro_batch, batch_window, direct_dispatch, column_window
        As in :class:`~gencc.runtime.CodedExecutor`.

    Returns
    -------
    ExecutorOptions

    Examples
    --------
    >>> import gencc
    >>> executor_options(gencc.GCC(4, 8), n_wait=6).n_wait
    6
    """
    N = scheme.n_workers
    n_min = None if n_min is None else check_int(n_min, "n_min")
    if n_min is not None and not scheme.min_returns <= n_min <= N:
        raise ValueError(f"n_min must be in [{scheme.min_returns}, {N}] (the scheme's minimum returns, "
                         f"n_workers), got {n_min}")
    floor = scheme.trusted_returns if n_min is None else n_min
    n_wait = N if n_wait is None else check_int(n_wait, "n_wait")
    if not floor <= n_wait <= N:
        raise ValueError(f"n_wait must be in [{floor}, {N}] (n_min, or the scheme's trusted returns "
                         f"{scheme.trusted_returns} unless n_min lowers it; n_workers), got {n_wait}")
    adaptive = deadline if isinstance(deadline, AdaptiveDeadline) else None
    if adaptive is None and deadline is not None:
        deadline = check_nonnegative(deadline, "deadline")
    timeout = _positive(timeout, "timeout")
    hang_timeout = (timeout if hang_timeout is None else
                    _positive(hang_timeout, "hang_timeout", " seconds (0 would restart every busy worker at once)"))
    restart_timeout = (max(60.0, hang_timeout) if restart_timeout is None else
                       _positive(restart_timeout, "restart_timeout",
                                 " seconds (0 would restart every restarted worker at once)"))
    direct_dispatch = bool(direct_dispatch)
    return ExecutorOptions(
        n_min=n_min, n_wait=n_wait, deadline=None if adaptive else deadline, adaptive=adaptive,
        direct_dispatch=direct_dispatch, timeout=timeout,
        on_insufficient=check_choice(on_insufficient, "on_insufficient", ON_INSUFFICIENT),
        placement=check_choice(placement, "placement", PLACEMENTS), hang_timeout=hang_timeout,
        restart_timeout=restart_timeout, max_error=None if max_error is None else check_nonnegative(max_error, "max_error"),
        max_in_flight=check_int(max_in_flight, "max_in_flight"), micro_batch=check_int(micro_batch, "micro_batch"),
        batch_window=check_nonnegative(batch_window, "batch_window"),
        column_window=check_column_window(column_window, direct_dispatch))
