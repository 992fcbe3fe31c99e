"""Coding schemes: GCC and the peers it is compared with, on one interface."""

from .base import CodingScheme, Decoded
from .approxifer import ApproxIFER
from .bacc import BACC
from .gcc import GCC, LeTCC
from .lcc import LCC
from .parm import ParM
from .replication import Replication, Uncoded
from .self_calibration import SelfCalibration

SCHEMES = {cls.name: cls for cls in (GCC, LeTCC, BACC, ApproxIFER, LCC, Replication, Uncoded)}


def make_scheme(name: str, n_inputs: int, n_workers: int, **params) -> CodingScheme:
    """Build a scheme by its short name (``"gcc"``, ``"letcc"``, ``"bacc"``,
    ``"approxifer"``, ``"lcc"``, ``"replication"``, ``"uncoded"``)."""
    try:
        cls = SCHEMES[name]
    except KeyError:
        raise ValueError(f"scheme must be one of {sorted(SCHEMES)}, got {name!r}") from None
    return cls(n_inputs=n_inputs, n_workers=n_workers, **params)


__all__ = ["CodingScheme", "Decoded", "GCC", "LeTCC", "BACC", "ApproxIFER", "LCC", "ParM", "Replication",
           "Uncoded", "SelfCalibration", "SCHEMES", "make_scheme"]
