"""The runtime: coded execution on real workers (local processes or Ray actors)."""

from .executor import BatchFailedError, BatchResult, CodedExecutor
from .faults import FAULT_KINDS, Faults, TaskFault

__all__ = ["CodedExecutor", "BatchResult", "BatchFailedError", "Faults", "TaskFault", "FAULT_KINDS"]
