"""Sphinx configuration: the gencc documentation site (pydata theme, numpydoc, MyST Markdown).

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (``pip install -e ".[docs]"``).
"""

import re
import sys
from pathlib import Path

import gencc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_index  # noqa: E402
import tables  # noqa: E402

results_index.write()  # results.md: every study, its stamp and its age against the source
tables.write()  # the studies' tables, from their JSON, for the pages to include

project = "gencc"
author = "the gencc developers"
version = release = gencc.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
# only the site's own sources are built (the studies' data lives in results/)
include_patterns = ["index.md", "getting-started.md", "results.md", "guide/*.md", "api/*.rst",
                    "api/generated/*.rst"]
exclude_patterns = ["_build"]

myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "substitution"]
myst_substitutions = tables.substitutions()  # single figures quoted in the prose, from the result JSON

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# The docstrings write shapes as in the code, ``(n, *out_shape)``, and returned sets as |F|: plain
# text to a reader of the source, markup to docutils. Both are escaped here, not in the docstrings.
rst_prolog = r"""
.. |F| replace:: \|F\|
"""
_STAR = re.compile(r"(?<=[\s(,\[])\*(?=[A-Za-z_]\w*[),\]])")


def _escape_shapes(app, what, name, obj, options, lines):
    parts = "\n".join(lines).split("``")  # outside ``literals`` only, where a backslash would show
    text = "``".join(_STAR.sub(r"\\*", p) if i % 2 == 0 else p for i, p in enumerate(parts))
    lines[:] = text.split("\n")


def setup(app):
    app.connect("autodoc-process-docstring", _escape_shapes, priority=100)

html_theme = "pydata_sphinx_theme"
html_title = f"gencc {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
