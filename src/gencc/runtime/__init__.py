"""The runtime: coded execution on real workers (local processes or Ray actors).

``executor`` encodes and runs the dispatcher thread, which only moves events;
``coordinator`` is the thread-free state machine behind it (events and the
clock in, instructions out); ``decoding`` turns a retired batch into its
result; ``gather`` decides, as a pure function, when a batch is decoded or
failed; ``backends`` holds the contract
a pool of workers keeps and its implementations, ``local`` (processes),
``threads`` and ``ray`` (actors); ``events`` names what crosses between them;
``faults`` injects stragglers and faults, the same way on both; ``hedged``
serves uncoded with hedged requests (the baseline); ``request`` is the
future of one ``submit_one`` request and how its answer was obtained.
"""

from ..errors import BatchFailedError, ErrorBoundExceededError, InvalidInputError
from .backends import Backend
from .batch import BatchResult
from .executor import CodedExecutor
from .faults import FAULT_KINDS, Faults, TaskFault, WorkerStragglers
from .gather import AdaptiveDeadline, GatherPolicy, GatherState, decide
from .hedged import HedgedExecutor, HedgedResult
from .request import AnswerInfo, RequestFuture

__all__ = ["CodedExecutor", "BatchResult", "BatchFailedError", "ErrorBoundExceededError", "InvalidInputError",
           "Faults", "TaskFault", "FAULT_KINDS", "Backend", "GatherPolicy", "GatherState", "decide",
           "AdaptiveDeadline", "HedgedExecutor", "HedgedResult", "WorkerStragglers", "AnswerInfo", "RequestFuture"]
