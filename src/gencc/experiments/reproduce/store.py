"""The resumable cell store of one sweep: ``cells.jsonl``, one JSON per line."""

from __future__ import annotations

import json
import math
from pathlib import Path


class Store:
    """Append-only cell results of one sweep: ``{"key": ..., "row": ...}`` per line."""

    def __init__(self, path: Path, resume: bool):
        self.path = path
        self.done: dict[str, dict | None] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume and path.exists():
            for line in path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                    self.done[rec["key"]] = rec["row"]
                except (json.JSONDecodeError, KeyError):  # a line cut short by an interrupt
                    continue
        elif path.exists():
            path.unlink()

    def add(self, key: str, row):
        self.done[key] = row
        with self.path.open("a") as fh:
            fh.write(json.dumps({"key": key, "row": jsonable(row)}) + "\n")


def jsonable(row):
    if row is None:
        return None
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
