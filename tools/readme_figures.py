"""Fill README.md's figures from the studies' result JSON, as the documentation site does.

Each figure of the README that a study measured sits between markers that name it,
``<!--fig:selector_p90-->2.72x<!--/fig-->``; the names are those of
``docs/tables.py``'s :func:`substitutions`, so the README and the site quote one source.

    python tools/readme_figures.py           # rewrite README.md
    python tools/readme_figures.py --check   # exit 1 if any figure differs from its result

``tests/test_readme.py`` runs the check, so a README figure cannot drift from its result.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIGURE = re.compile(r"<!--fig:(?P<name>[a-z0-9_]+)-->(?P<value>.*?)<!--/fig-->", re.S)


def substitutions() -> dict:
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import tables
    finally:
        sys.path.pop(0)
    return tables.substitutions()


def render(text: str, subs: dict) -> str:
    """``text`` with every marked figure replaced by its value in ``subs``."""
    unknown = sorted({m["name"] for m in FIGURE.finditer(text)} - set(subs))
    if unknown:
        raise KeyError(f"README figures with no result behind them: {unknown}")
    return FIGURE.sub(lambda m: f"<!--fig:{m['name']}-->{subs[m['name']]}<!--/fig-->", text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report figures that differ")
    args = ap.parse_args(argv)
    text = README.read_text()
    new = render(text, substitutions())
    if args.check:
        stale = [(m["name"], m["value"]) for m, n in zip(FIGURE.finditer(text), FIGURE.finditer(new))
                 if m["value"] != n["value"]]
        for name, value in stale:
            print(f"README figure {name}: {value!r} differs from its result", file=sys.stderr)
        return 1 if stale else 0
    if new != text:
        README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
