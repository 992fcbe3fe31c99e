"""The README's runtime example runs as written and finishes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


@pytest.mark.timeout(300)
def test_readme_fault_injection_example_runs_and_finishes(tmp_path):
    pytest.importorskip("torch")
    text = README.read_text()
    block = re.search(r"<!-- runtime-example -->\n```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(block)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    m = re.search(r"(\d+) of 200 inputs answered, argmax agreement with f ([0-9.]+)", out.stdout)
    assert m, out.stdout
    assert int(m.group(1)) >= 150 and float(m.group(2)) >= 0.8


def test_every_marked_readme_figure_equals_its_result():
    """README figures sit between ``<!--fig:name-->`` markers and are filled from the result JSON
    (``tools/readme_figures.py``, the docs' own substitutions): none may drift from its result."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_figures", ROOT / "tools" / "readme_figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    text = (ROOT / "README.md").read_text()
    assert len(figures.FIGURE.findall(text)) >= 20
    assert figures.render(text, figures.substitutions()) == text, "run python tools/readme_figures.py"
    with pytest.raises(KeyError, match="no result behind"):
        figures.render("<!--fig:not_a_result-->1x<!--/fig-->", figures.substitutions())
