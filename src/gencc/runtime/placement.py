"""Where a task goes: pure functions of worker loads, idle workers and who ran what.

Two placements (``CodedExecutor(placement=...)``, ``HedgedExecutor``): ``"pinned"`` sends
slot n to worker n at once, queued there (a hedged copy to the least-loaded worker,
:func:`pick_worker`); ``"pull"`` holds tasks at the master until a worker is idle
(:func:`assign_idle`). A slot re-sent after its worker failed goes to one of
:func:`redispatch_helpers`. The coordinator applies them; they know nothing of processes,
batches or kernels, and are tested with made-up loads.
"""

from __future__ import annotations

__all__ = ["PLACEMENTS", "pick_worker", "assign_idle", "redispatch_helpers"]

PLACEMENTS = ("pinned", "pull")


def pick_worker(loads, exclude=()) -> int | None:
    """The worker for a new copy: idle if any, else the least loaded (lowest index on ties).

    Parameters
    ----------
    loads : sequence of int
        Tasks each worker holds (running or queued); a negative load marks a
        worker that cannot take tasks (restarting).
    exclude : iterable of int
        Workers that already hold a copy of this request.

    Returns
    -------
    int or None
        None when no worker can take it.
    """
    skip = set(exclude)
    best = None
    for w, load in enumerate(loads):
        if w in skip or load < 0:
            continue
        if best is None or load < loads[best]:
            best = w
    return best


def assign_idle(pending, idle, same_model) -> list[tuple[int, int]]:
    """Pull placement: which waiting tasks go now, and to which idle workers.

    Parameters
    ----------
    pending : sequence of int
        The slot (coded input) of each task waiting at the master, oldest first.
    idle : iterable of int
        Workers holding no task that can take one.
    same_model : callable (slot, worker) -> bool
        Whether ``worker`` runs the function ``slot`` needs (ParM's parity
        workers run another model than its systematic ones).

    Returns
    -------
    list of (int, int)
        (position in ``pending``, worker) pairs, oldest task first. A task
        goes to its own worker (worker n for slot n) if that one is idle, else
        to the lowest-numbered idle worker that runs its model; a task no idle
        worker can run waits without holding back the younger ones.
    """
    free = sorted(set(idle))
    out = []
    for i, slot in enumerate(pending):
        if not free:
            break
        w = slot if slot in free and same_model(slot, slot) else next(
            (v for v in free if same_model(slot, v)), None)
        if w is None:
            continue
        free.remove(w)
        out.append((i, w))
    return out


def redispatch_helpers(same_model, answered_order, busy) -> list[int]:
    """Workers to re-send a slot to: those that answered its batch and are free, fastest
    first, then idle ones of the same model; if none is free, those that answered.

    Parameters
    ----------
    same_model : iterable of int
        Workers running the model the slot needs.
    answered_order : sequence of int
        Workers that answered this batch, fastest first (duplicates allowed).
    busy : callable (worker) -> bool
        Whether a worker holds a task.

    Returns
    -------
    list of int
    """
    same = set(same_model)
    answered = list(dict.fromkeys(w for w in answered_order if w in same))
    idle = [w for w in sorted(same) if not busy(w) and w not in answered]
    return [w for w in answered if not busy(w)] + idle or answered
