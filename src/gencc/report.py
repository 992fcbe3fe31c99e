"""Console tables and result files shared by the CLI, benchmarks and experiments."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

__all__ = ["format_table", "write_csv", "write_json", "fmt", "provenance"]


def fmt(v) -> str:
    """Compact human formatting of a cell."""
    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "nan"
        if v == 0:
            return "0"
        a = abs(v)
        return f"{v:.3e}" if a < 1e-3 or a >= 1e5 else f"{v:.4g}"
    return str(v)


def format_table(rows: list[dict], columns: list[str] | None = None, title: str | None = None) -> str:
    """Align rows (dicts) into a plain-text table."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    numeric = [all(isinstance(r.get(c), (int, float, np.number)) or r.get(c) is None for r in rows) for c in columns]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    out = [title] if title else []
    out += [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(row, widths, numeric)) for row in cells]
    return "\n".join(out)


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, (np.floating, float)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


_CODE = ("src", "benchmarks", "tools")  # what makes results: a change elsewhere (docs) leaves them clean


def provenance() -> dict:
    """What made a result: the package version, the git commit (and whether the code that makes
    results, ``src``, ``benchmarks`` and ``tools``, had uncommitted changes), the machine and
    the UTC date; stamped into every result file."""
    import datetime
    import os
    import platform
    import subprocess

    from . import __version__

    commit, dirty = None, None
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
        if commit:
            dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *_CODE],
                                        cwd=root, capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return {"gencc": __version__, "commit": commit, "dirty": dirty, "python": platform.python_version(),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_json(obj, path, *, stamp: bool = True) -> Path:
    """Write JSON (NaN/Inf become null, numpy types become Python).

    A dict is stamped with :func:`provenance` under ``"provenance"`` (unless it
    has one already or ``stamp`` is False), so that every result says what made it.
    """
    if stamp and isinstance(obj, dict) and "provenance" not in obj:
        obj = {**obj, "provenance": provenance()}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(obj), indent=2) + "\n")
    return path


def write_csv(rows: list[dict], path, columns: list[str] | None = None) -> Path:
    """Write rows (dicts) as CSV."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = columns or list(rows[0]) if rows else []
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _plain(r.get(k)) for k in columns})
    return path
