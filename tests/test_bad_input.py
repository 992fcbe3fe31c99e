import numpy as np
import pytest

import gencc


@pytest.mark.parametrize("cls", [gencc.GCC, gencc.LeTCC, gencc.BACC, gencc.LCC, gencc.Replication])
def test_constructor_rejects_bad_sizes(cls):
    with pytest.raises(ValueError, match="n_inputs must be an integer >= 1"):
        cls(0, 5)
    with pytest.raises(TypeError, match="n_workers must be an integer"):
        cls(2, 5.5)


def test_replication_needs_enough_workers():
    with pytest.raises(ValueError, match="n_workers must be >= n_inputs = 4"):
        gencc.Replication(4, 3)


def test_bad_hyper_parameters():
    with pytest.raises(ValueError, match="lam_dec must be a finite number >= 0"):
        gencc.GCC(3, 8, lam_dec=-1.0)
    with pytest.raises(ValueError, match="lam_enc must be a finite number >= 0"):
        gencc.LeTCC(3, 8, lam_enc=float("nan"))
    with pytest.raises(ValueError, match="kernel must be a Kernel or one of"):
        gencc.GCC(3, 8, kernel="laplacian")
    with pytest.raises(ValueError, match="criterion"):
        gencc.GCC(3, 8, criterion="aic")
    with pytest.raises(ValueError, match="data_points must be one of"):
        gencc.BACC(3, 8, data_points="random")


@pytest.fixture
def scheme():
    return gencc.GCC(3, 8)


def test_encode_shape_and_values(scheme):
    with pytest.raises(ValueError, match=r"X must have 3 rows \(shape \(3, \.\.\.\)\), got shape \(4, 2\)"):
        scheme.encode(np.zeros((4, 2)))
    X = np.zeros((3, 2))
    X[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"X contains NaN or Inf in rows \[1\]"):
        scheme.encode(X)
    with pytest.raises(ValueError, match="X must have shape"):
        scheme.encode(3.0)
    with pytest.raises(TypeError, match="X must be a numeric array"):
        scheme.encode([["a", "b"]] * 3)
    with pytest.raises(TypeError, match="X must be real; got a complex array"):
        scheme.encode(np.zeros((3, 2)) + 1j)  # its imaginary part used to be dropped with a warning


def test_decode_checks_returned_and_outputs(scheme):
    Y = np.zeros((3, 2))
    with pytest.raises(ValueError, match="returned must not repeat a worker, got duplicates \\[1\\]"):
        scheme.decode(Y, [1, 1, 2])
    with pytest.raises(ValueError, match=r"returned must index workers in \[0, 8\), got out-of-range \[8\]"):
        scheme.decode(Y, [0, 1, 8])
    with pytest.raises(ValueError, match=r"returned must index workers in \[0, 8\), got out-of-range \[-1\]"):
        scheme.decode(Y, [0, 1, -1])
    with pytest.raises(ValueError, match=r"Y must have 3 rows"):
        scheme.decode(np.zeros((2, 2)), [0, 1, 2])
    with pytest.raises(ValueError, match=r"Y contains NaN or Inf in rows \[2\]"):
        scheme.decode(np.array([[0.0], [1.0], [np.inf]]), [0, 1, 2])
    with pytest.raises(TypeError, match="integer worker indices"):
        scheme.decode(Y, [0.5, 1, 2])
    with pytest.raises(ValueError, match="1-D sequence"):
        scheme.decode(Y, [[0, 1, 2]])


def test_too_few_returns(scheme):
    with pytest.raises(gencc.InsufficientReturnsError, match="GCC needs at least 1 returned workers to decode, got 0") as e:
        scheme.decode(np.zeros((0, 2)), [])
    assert e.value.n_returned == 0 and e.value.n_required == 1


def test_bad_straggler_arguments():
    from gencc import stragglers as st

    with pytest.raises(ValueError, match="p must be in \\[0, 1\\)"):
        st.BernoulliStragglers(1.0)
    with pytest.raises(ValueError, match="n_stragglers must be an integer >= 0"):
        st.RandomStragglers(-1)
    with pytest.raises(ValueError, match="n_stragglers must be < n_workers = 4"):
        st.RandomStragglers(4).returned(4, 0)
    with pytest.raises(ValueError, match="needs wait_for, deadline, or both"):
        st.LatencyStragglers(st.ShiftedExponential())
    with pytest.raises(ValueError, match="is adversarial"):
        st.ContiguousStragglers(1).returned(5, 0)
