"""The documentation executes: every Python block of its pages runs, and the site builds with
warnings as errors."""

import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted([DOCS / "index.md", DOCS / "getting-started.md", *DOCS.glob("guide/*.md")])
BLOCKS = [(page, i, code) for page in PAGES
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))]


def test_every_page_of_the_site_is_listed():
    assert len(PAGES) >= 10 and len(BLOCKS) >= 4


@pytest.mark.parametrize("page, index, code", BLOCKS, ids=[f"{p.relative_to(DOCS)}#{i}" for p, i, _ in BLOCKS])
def test_code_block_runs(page, index, code, tmp_path, monkeypatch):
    script = tmp_path / "block.py"
    script.write_text(code)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")


def test_the_site_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("pydata_sphinx_theme")
    pytest.importorskip("numpydoc")
    pytest.importorskip("myst_parser")
    generated = DOCS / "api" / "generated"
    shutil.rmtree(generated, ignore_errors=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                               str(DOCS), str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(generated, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-6000:]
    html = tmp_path / "html"
    index = (html / "index.html").read_text()
    assert "getting-started.html" in index and "guide/self-calibration.html" in index
    results = (html / "results.html").read_text()
    assert "selector_bench" in results and "source commits since" in results  # generated at build time
    text = re.sub(r"<[^>]+>", "", results)  # code blocks are highlighted token by token
    assert "gencc bench selfcal --out results/self_calibration" in text  # each study's command, from studies.toml
    import json

    seed = json.loads((DOCS.parent / "results" / "self_calibration" / "selfcal.json").read_text())["seed"]
    page = (html / "guide" / "self-calibration.html").read_text()
    assert f"Seed {seed}" in page and "default selection" in page  # prose and tables read from the JSON
    unresolved = [p.name for p in html.rglob("*.html") if "_static" not in p.parts and "{{" in p.read_text()]
    assert not unresolved  # every substitution resolved
    gcc = (html / "api" / "generated" / "gencc.GCC.html").read_text()
    assert "n_inputs" in gcc and "Notes" in gcc  # the docstrings are rendered, numpydoc sections included
