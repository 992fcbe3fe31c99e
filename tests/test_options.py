"""The executor's options, checked in one place (gencc.runtime.options)."""

import doctest

import pytest

import gencc
from gencc.runtime import AdaptiveDeadline, options
from gencc.runtime.options import executor_options


def test_doctest():
    assert doctest.testmod(options, raise_on_error=False).failed == 0


def test_defaults_and_derived_values():
    o = executor_options(gencc.GCC(4, 8))
    assert (o.n_wait, o.n_min, o.deadline, o.adaptive, o.timeout, o.hang_timeout, o.restart_timeout) == \
        (8, None, None, None, 30.0, 30.0, 60.0)
    rule = AdaptiveDeadline(q=0.9)
    o = executor_options(gencc.GCC(4, 8), deadline=rule, hang_timeout=90.0)
    assert o.adaptive is rule and o.deadline is None and o.restart_timeout == 90.0


@pytest.mark.parametrize("kw, match", [
    (dict(n_wait=3), r"n_wait must be in \[4, 8\]"),
    (dict(n_min=9), r"n_min must be in"),
    (dict(timeout=0), r"timeout must be > 0"),
    (dict(hang_timeout=0), r"hang_timeout must be > 0 seconds"),
    (dict(restart_timeout=0), r"restart_timeout must be > 0 seconds"),
    (dict(placement="random"), r"placement"),
    (dict(on_insufficient="guess"), r"on_insufficient"),
    (dict(column_window=0.01), r"column_window needs direct_dispatch=True"),
    (dict(deadline=-1.0), r"deadline"),
])
def test_bad_options_name_the_argument(kw, match):
    with pytest.raises(ValueError, match=match):
        executor_options(gencc.GCC(4, 8), **kw)
