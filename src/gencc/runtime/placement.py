"""Where a task goes: pure functions of worker loads, idle workers and who ran what.

Two placements (``CodedExecutor(placement=...)``, ``HedgedExecutor``): ``"pinned"`` sends
slot n to worker n at once, queued there (a hedged copy to the least-loaded worker,
:func:`pick_worker`); ``"pull"`` holds tasks at the master until a worker is idle
(:func:`assign_idle`). A slot re-sent after its worker failed goes to one of
:func:`redispatch_helpers`. Across the nodes of a cluster, :func:`spread_over_nodes` deals the
workers out so that a lost node takes no two neighbours. The coordinator applies them; they know nothing of processes,
batches or kernels, and are tested with made-up loads.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PLACEMENTS", "pick_worker", "assign_idle", "redispatch_helpers", "spread_over_nodes"]

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


def spread_over_nodes(scheme, nodes, amount: float = 1.0) -> list[dict]:
    """Per-worker Ray resources that deal the workers out over ``nodes`` so a lost node takes no
    two neighbours.

    Parameters
    ----------
    scheme : CodingScheme
        Its workers are ordered by what their outputs stand for: the copy's input for
        replication (``scheme.assignment``), else the worker's point (``scheme.beta``), else the
        worker index; consecutive workers in that order go to consecutive nodes, round robin.
    nodes : sequence of str
        The custom resource that names each node (``ray start --resources='{"node_a": 8}'``).
    amount : float, default 1.0
        How much of its node's resource each worker asks for.

    Returns
    -------
    list of dict, length N
        ``backend_options={"resources": ...}`` for the Ray backend.

    Notes
    -----
    A node's loss is an erasure of its workers. Dealt out in order of the worker points, the
    erasures of one node out of c are holes one node wide (c - 1 wide at most) spread over the
    whole interval, which every decoder bridges; a contiguous placement (workers 0..N/c-1 on the
    first node) leaves a hole of N/c adjacent workers, an extrapolation over part of the
    interval. For replication the copies of one input land on different nodes, so a lost node
    costs no input while another node holds a copy.

    Examples
    --------
    >>> import gencc
    >>> spread_over_nodes(gencc.Replication(2, 4), ["node_a", "node_b"])
    [{'node_a': 1.0}, {'node_a': 1.0}, {'node_b': 1.0}, {'node_b': 1.0}]
    """
    nodes = list(nodes)
    if not nodes or not all(isinstance(n, str) and n for n in nodes):
        raise ValueError(f"nodes must be a non-empty list of resource names, got {nodes!r}")
    if not (isinstance(amount, (int, float)) and not isinstance(amount, bool) and amount > 0):
        raise ValueError(f"amount must be a number > 0, got {amount!r}")
    n_workers = int(scheme.n_workers)
    assignment = getattr(scheme, "assignment", None)
    beta = getattr(scheme, "beta", None)
    if assignment is not None:
        order = np.lexsort((np.arange(n_workers), np.asarray(assignment)))
    elif beta is not None:
        order = np.argsort(np.asarray(beta, dtype=np.float64), kind="stable")
    else:
        order = np.arange(n_workers)
    out = [None] * n_workers
    for i, w in enumerate(order.tolist()):
        out[w] = {nodes[i % len(nodes)]: float(amount)}
    return out
