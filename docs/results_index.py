"""Write ``results.md``: every study folder under results/, how it was stamped, how much of the
source has changed since it was made, and the command that regenerates it (``results/studies.toml``).
Run by ``conf.py`` at each build; the page is not committed.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
RESULTS = ROOT / "results"
MANIFEST = RESULTS / "studies.toml"


def _git(*args) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _stamp(folder: Path) -> dict | None:
    for path in sorted(folder.rglob("*.json")):
        try:
            prov = json.loads(path.read_text()).get("provenance")
        except (ValueError, AttributeError, OSError):
            continue
        if isinstance(prov, dict) and prov.get("commit"):
            return prov
    return None


def studies() -> dict:
    """``results/studies.toml``: study -> {command, minutes, note?}."""
    return tomllib.loads(MANIFEST.read_text())


def rows() -> list[dict]:
    """One row per study folder: files, stamp, last commit that changed it, source commits since,
    the pages that read it and its command."""
    guides = {p.name: p.read_text() for p in (DOCS / "guide").glob("*.md")}
    manifest = studies()
    out = []
    for folder in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
        files = [p for p in folder.rglob("*") if p.is_file()]
        stamp = _stamp(folder)
        made = stamp["commit"] if stamp else _git("log", "-1", "--format=%H", "--", str(folder.relative_to(ROOT)))
        when = stamp["date"][:10] if stamp else _git("log", "-1", "--format=%cs", "--", str(folder.relative_to(ROOT)))
        since = _git("rev-list", "--count", f"{made}..HEAD", "--", "src") if made else None
        pages = sorted(name.removesuffix(".md") for name, text in guides.items() if f"{folder.name}/" in text)
        out.append({"study": folder.name, "files": len(files),
                    "stamp": (f"{stamp['commit'][:7]}{' (uncommitted changes)' if stamp.get('dirty') else ''}"
                              if stamp else "none"),
                    "made": when or "unknown", "source_commits_since": "unknown" if since is None else int(since),
                    "pages": pages, **manifest.get(folder.name, {})})
    return out


def write(path: Path = DOCS / "results.md") -> Path:
    lines = [
        "# Results and their age",
        "",
        "Every study folder under `results/`, generated at build time. *Stamp*: the commit recorded in the",
        "result's own JSON (`provenance`); folders without one were made before results were stamped,",
        "and their date is that of the last commit that changed them. *Source commits since*: commits",
        "that changed `src/` after the result was made, so a result with many is older than the code it",
        "describes: rerun its command (below, from `results/studies.toml`) before trusting it for the",
        "present code.",
        "",
        "| study | files | stamp | made | source commits since | described on |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows():
        pages = ", ".join(f"[{p}](guide/{p}.md)" for p in r["pages"]) or "-"
        lines.append(f"| `{r['study']}` | {r['files']} | {r['stamp']} | {r['made']} | "
                     f"{r['source_commits_since']} | {pages} |")
    lines += ["", "## Regenerating a study", "",
              "From the repository root, in the environment of the README's test command; about how",
              "long each takes on 2 cores.", ""]
    for r in rows():
        note = f" ({r['note']})" if r.get("note") else ""
        lines += [f"**`{r['study']}`**, about {r.get('minutes', '?')} min{note}:", "", "```sh",
                  r.get("command", "# no command recorded"), "```", ""]
    text = "\n".join(lines) + "\n"
    if not path.exists() or path.read_text() != text:  # unchanged: leave it, so Sphinx does not rebuild
        path.write_text(text)
    return path


if __name__ == "__main__":
    print(write())
