"""The layers stay apart: the math never imports the runtime, the experiments or the CLI, and the
runtime never reaches into kernels and solvers (it sees schemes through their interface)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "gencc"
TOP = ("runtime", "experiments", "workloads", "cli", "serve")  # what sits on top of the math
MATH_INTERNALS = ("kernels", "ridge", "statespace", "interpolation", "_statespace_jit", "_statespace_gen", "points")


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _parse(source: str) -> ast.AST:
    try:
        return ast.parse(source)
    except SystemError:  # CPython 3.11 shares the AST constructor's depth counter between threads, and its
        # tracebacks call ast.parse: a traceback formatted on another thread meanwhile (a logged worker
        # error) makes this parse fail spuriously (python/cpython#106905); a second parse is unaffected
        return ast.parse(source)


def _imports(path: Path) -> set[str]:
    """Every gencc module ``path`` imports, at the top or inside a function."""
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(_parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("gencc"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("gencc"):
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)
    return out


def _under(name: str, prefixes) -> bool:
    return any(name == f"gencc.{p}" or name.startswith(f"gencc.{p}.") for p in prefixes)


MATH = [p for p in sorted(PKG.rglob("*.py")) if p.relative_to(PKG).parts[0].removesuffix(".py") not in TOP
        and p != PKG / "__init__.py"]  # the package's __init__ loads the runtime lazily, by name only
RUNTIME = sorted((PKG / "runtime").rglob("*.py"))


@pytest.mark.parametrize("path", MATH, ids=lambda p: str(p.relative_to(PKG)))
def test_the_math_imports_nothing_above_it(path):
    bad = sorted(n for n in _imports(path) if _under(n, TOP))
    assert not bad, f"{path.relative_to(PKG)} imports {bad}"


@pytest.mark.parametrize("path", RUNTIME, ids=lambda p: str(p.relative_to(PKG)))
def test_the_runtime_knows_no_kernels_or_solvers(path):
    bad = sorted(n for n in _imports(path) if _under(n, MATH_INTERNALS + ("experiments", "cli", "serve")))
    assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_the_import_scan_sees_relative_and_lazy_imports():
    executor = _imports(PKG / "runtime" / "executor.py")
    assert "gencc.schemes.self_calibration" in executor  # a lazy import inside a function
    assert "gencc.errors" in _imports(PKG / "runtime" / "coordinator.py")  # a relative import two levels up
    assert len(MATH) > 20 and len(RUNTIME) > 10
