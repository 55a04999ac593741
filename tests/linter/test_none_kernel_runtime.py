"""GS236 at run time (issue 19, CogDL's SPMMFunction): backward hands the optional weight,
None on that branch, to a compiled kernel whose parameter is a tensor; pybind11 rejects
None with a TypeError, so the backward of every unweighted call fails. The stand-in kernels
below compute on numpy (no autograd graph) and check their arguments as pybind11 does."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
from torch.utils import cpp_extension

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "none_kernel.py"


def _dense(rowptr, colind, weight, n_cols):
    a = torch.zeros(len(rowptr) - 1, n_cols, dtype=torch.float64)
    for i in range(len(rowptr) - 1):
        for k in range(int(rowptr[i]), int(rowptr[i + 1])):
            a[i, int(colind[k])] += 1.0 if weight is None else float(weight[k])
    return a


def _tensor(value, name):
    if not isinstance(value, torch.Tensor):  # pybind11's check of a torch::Tensor argument
        raise TypeError(f"{name}(): incompatible function arguments: got {type(value)}")
    return value


def _stand_in(n_cols):
    def csr_spmm(rowptr, colind, weight, feat):
        a = _dense(rowptr, colind, _tensor(weight, "csr_spmm"), n_cols)
        return torch.from_numpy(a.numpy() @ feat.detach().numpy())

    def csr_spmm_no_edge_value(rowptr, colind, feat):
        return torch.from_numpy(_dense(rowptr, colind, None, n_cols).numpy()
                                @ feat.detach().numpy())

    def csr2csc(rowptr, colind, weight):
        at = _dense(rowptr, colind, _tensor(weight, "csr2csc"), n_cols).t()
        idx = at.nonzero()  # row-major: the CSR of the transpose
        counts = torch.bincount(idx[:, 0], minlength=at.shape[0])
        colptr = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
        return colptr, idx[:, 1], at[idx[:, 0], idx[:, 1]]

    return types.SimpleNamespace(csr_spmm=csr_spmm, csr2csc=csr2csc,
                                 csr_spmm_no_edge_value=csr_spmm_no_edge_value)


@pytest.fixture
def mod(load_fixture, monkeypatch):
    monkeypatch.setattr(cpp_extension, "load", lambda *args, **kwargs: _stand_in(3))
    return load_fixture(FIXTURE, "none_kernel_fixture")


def test_none_weight_reaches_the_kernel_and_backward_raises_typeerror(mod):
    findings = [(f.line, f.code) for f in lint(FIXTURE, config=False)]
    line = next(i for i, text in enumerate(FIXTURE.read_text().splitlines(), 1)
                if "# GS236" in text)
    assert findings == [(line, "GS236")]

    rowptr, colind = torch.tensor([0, 2, 3, 4]), torch.tensor([0, 2, 1, 2])
    feat = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 4.0]], dtype=torch.float64,
                        requires_grad=True)
    grad_out = torch.tensor([[1.0, 0.0], [2.0, 1.0], [-1.0, 3.0]], dtype=torch.float64)
    a = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                     dtype=torch.float64)  # by hand from rowptr/colind
    out = mod.Spmm.apply(rowptr, colind, feat, None, False)
    torch.testing.assert_close(out, a @ feat.detach())  # forward takes the no-weight kernel
    with pytest.raises(TypeError, match="csr2csc"):
        out.backward(grad_out)

    (ref,) = torch.autograd.grad(a @ feat, feat, grad_out)
    weight = torch.tensor([2.0, 1.0, -1.0, 3.0], dtype=torch.float64)
    aw = _dense(rowptr, colind, weight, 3)
    (ref_w,) = torch.autograd.grad(aw @ feat, feat, grad_out)
    (got,) = torch.autograd.grad(mod.Spmm.apply(rowptr, colind, feat, weight, False), feat,
                                 grad_out)
    torch.testing.assert_close(got, ref_w)  # the weighted branch is right
    (got,) = torch.autograd.grad(mod.SpmmFilled.apply(rowptr, colind, feat, None, False),
                                 feat, grad_out)
    torch.testing.assert_close(got, ref)  # the fix: ones in place of the missing weight
