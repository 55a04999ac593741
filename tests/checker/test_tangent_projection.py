"""An identity forward whose backward projects the gradient onto a matrix group's tangent
space (issue 18, corpus 9a held-out: lattice_ml ``ProjectGrad2SUn``, ``aht(grad @ u^H) @ u``,
the Riemannian gradient on SU(n)) printed a template ``intended=lambda u, grad: ...``. Now the
projection is fitted and checked, the line passes pasted as printed, and the declared
gradient is the tangent projection by its defining properties (the independent reference: at
an orthogonal ``u`` the result is ``S @ u`` with ``S`` skew, and what it leaves of the
gradient is orthogonal to every tangent direction); a backward that forgets the ``/ 2``
FAILs under the same line.

Reduced case written here.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys

import torch

import gradsmith
from gradsmith.discovery.synthesize import synthesize

SOURCE = """
import torch
from torch.autograd import Function

import gradsmith


def _skew_traceless(m):
    m = (m - m.mH) / {half}
    trace = torch.einsum("...ii->...", m)[..., None, None]
    return m - {traced} * trace / m.shape[-1] * torch.eye(m.shape[-1], dtype=m.dtype)


class OnGroup(Function):
    @staticmethod
    def forward(ctx, u):
        ctx.save_for_backward(u)
        return u.clone()

    @staticmethod
    def backward(ctx, g):
        (u,) = ctx.saved_tensors
        return _skew_traceless(g @ u.mH) @ u
"""


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"tangent_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.OnGroup


def test_a_tangent_space_projection_gets_a_checked_line(tmp_path):
    source = SOURCE.replace("{traced}", "1")
    fn = _load(tmp_path, "plain", source.replace("{half}", "2"))
    torch.manual_seed(0)
    report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
    (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line

    intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                    {"torch": torch})
    u, _ = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64,
                                       generator=torch.Generator().manual_seed(1)))
    g = torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    z = intended(u, g)
    s = z @ u.T
    torch.testing.assert_close(s, -s.T)  # z = S u, S skew: a tangent vector at u
    for i, j in itertools.combinations(range(3), 2):  # the residual is normal to each
        basis = torch.zeros(3, 3, dtype=torch.float64)
        basis[i, j], basis[j, i] = 1.0, -1.0
        assert abs(float(((g - z) * (basis @ u)).sum())) < 1e-12

    torch.manual_seed(0)
    pasted = source.replace("class OnGroup", line + "\nclass OnGroup")
    assert gradsmith.check(_load(tmp_path, "pasted", pasted.replace("{half}", "2")),
                           compat=False).passed
    torch.manual_seed(0)
    wrong = gradsmith.check(_load(tmp_path, "wrong", pasted.replace("{half}", "1")),
                            compat=False)
    assert not wrong.passed and wrong.errors, wrong


def _aht(m, traced: bool):
    m = (m - m.mH) / 2
    if traced:
        m = m - torch.diagonal(m).sum() / m.shape[-1] * torch.eye(m.shape[-1], dtype=m.dtype)
    return m


def test_su_n_and_u_n_are_told_apart_on_a_complex_matrix(tmp_path):
    # On real matrices both projections agree (a real skew matrix has no trace); the printed
    # line must be the Function's own for the complex matrices it is written for.
    gen = torch.Generator().manual_seed(7)
    u, g = (torch.complex(torch.randn(3, 3, generator=gen, dtype=torch.float64),
                          torch.randn(3, 3, generator=gen, dtype=torch.float64))
            for _ in range(2))
    for traced in (True, False):
        stem = "su" if traced else "u"
        fn = _load(tmp_path, stem, SOURCE.replace("{half}", "2").replace(
            "{traced}", "1" if traced else "0"))
        torch.manual_seed(0)
        report = gradsmith.check(fn, *synthesize(fn).args, compat=False)
        (finding,) = [f for f in report.errors if f.code == "undeclared-estimator"]
        line = finding.details["declaration"]
        assert finding.details["verified"], line
        intended = eval(re.search(r"intended=(lambda .*)\)$", line).group(1),  # noqa: S307
                        {"torch": torch})
        torch.testing.assert_close(intended(u, g), _aht(g @ u.mH, traced) @ u)
