"""gencc: General Coded Computing for straggler-resilient distributed inference.

The math (``points``, ``kernels``, ``ridge``, ``interpolation``, ``schemes``,
``stragglers``, ``byzantine``, ``robust``, ``evaluate``) knows nothing of processes; ``gencc.runtime``
runs schemes on real workers; ``gencc.workloads`` and ``gencc.experiments``
sit on top of both.
"""

import logging

from . import byzantine, kernels, points, robust, stragglers
from .errors import IllConditionedWarning, InsufficientReturnsError, MissingOutputsError
from .evaluate import Evaluation, evaluate
from .schemes import (BACC, GCC, LCC, SCHEMES, ApproxIFER, CodingScheme, Decoded, LeTCC, ParM, Replication,
                      SelfCalibration, Uncoded, make_scheme)
from .tuning import tune

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "GCC", "LeTCC", "BACC", "ApproxIFER", "LCC", "ParM", "Replication", "Uncoded", "CodingScheme", "Decoded",
    "SelfCalibration",
    "SCHEMES", "make_scheme", "evaluate", "Evaluation", "tune", "kernels", "points", "stragglers", "byzantine", "robust",
    "InsufficientReturnsError", "MissingOutputsError", "IllConditionedWarning", "__version__",
]


def __getattr__(name):
    # The runtime and the models pull in multiprocessing and torch: load them on first use.
    import importlib

    if name in ("runtime", "workloads", "experiments"):
        return importlib.import_module(f"{__name__}.{name}")
    if name == "CodedExecutor":
        return importlib.import_module(f"{__name__}.runtime").CodedExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
