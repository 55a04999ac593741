"""A Function whose forward needs a complex tensor it reads as a spectrum (issue 18, corpus 8b
dev: an ``atan2(x.imag, x.real)`` phase was a skip, "imag is not implemented for tensors with
non-complex dtypes"): synthesis repairs the input to complex from that message (or from
``torch.view_as_real``'s), the check compares backward with finite differences in PyTorch's
convention for a real function of a complex input (the one gradcheck uses), and the row reaches
the command line (a complex value in the inputs' record had crashed the result pipe).

Reduced cases written here; references are torch's own ``angle`` and ``abs`` under autograd.
A planted conjugated backward FAILs.
"""

from __future__ import annotations

import inspect
import json

import pytest
import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import Synthesized, synthesize
from gradsmith.repro.capture import capture_value
from gradsmith.repro.script import _expr


class Phase(Function):
    """The phase of a complex tensor, its gradient written out with view_as_complex."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return torch.atan2(z.imag, z.real)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        r2 = (z.real.square() + z.imag.square()).clamp_min(1e-12)
        return torch.view_as_complex(torch.stack((-z.imag * g / r2, z.real * g / r2), dim=-1))


class PhaseConjugated(Phase):
    """Planted: the conjugate of the right gradient (the imaginary part's sign flipped)."""

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        r2 = (z.real.square() + z.imag.square()).clamp_min(1e-12)
        return torch.view_as_complex(torch.stack((-z.imag * g / r2, -z.real * g / r2), dim=-1))


class Power(Function):
    """|z|^2 read through view_as_real; PyTorch's gradient of a real L(z) is dL/dRe + i dL/dIm."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return torch.view_as_real(z).square().sum(-1)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * z * g


class PowerConjugated(Power):
    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * z.conj() * g


def _synthesised(fn) -> Synthesized:
    found = synthesize(fn)
    assert isinstance(found, Synthesized), found
    return found


@pytest.mark.parametrize(("fn", "message"), [
    (Phase, "imag is not implemented for tensors with non-complex dtypes"),
    (Power, "view_as_real is only supported for complex tensors"),
])
def test_a_spectrum_forward_reads_gets_a_complex_input(fn, message):
    found = _synthesised(fn)
    (z,) = found.args
    assert z.is_complex() and z.requires_grad
    assert "complex128" in found.description and message in found.description


@pytest.mark.parametrize(("fn", "reference"), [
    (Phase, torch.angle), (Power, lambda z: z.abs().square()),
])
def test_the_correct_functions_pass_and_agree_with_torch(fn, reference):
    (z,) = _synthesised(fn).args
    torch.manual_seed(0)
    g = torch.randn(z.shape, dtype=torch.float64)
    (got,) = torch.autograd.grad(fn.apply(z), z, g)
    (want,) = torch.autograd.grad(reference(z), z, g)  # torch's own complex convention
    torch.testing.assert_close(got, want)
    report = gradsmith.check(fn, z)
    assert report.passed, report
    assert "gradients" in report.checks


@pytest.mark.parametrize("fn", [PhaseConjugated, PowerConjugated])
def test_a_conjugated_backward_fails(fn):
    (z,) = _synthesised(fn).args
    report = gradsmith.check(fn, z)
    assert "gradient-mismatch" in report.codes("error"), report


def test_complex_values_are_recorded_as_plain_data_and_rebuilt():
    z = torch.tensor([1 + 2j, -0.5j, complex(float("nan"), 1.0)], dtype=torch.complex128)
    spec = capture_value(z)
    assert all(isinstance(v, str) for v in spec["values"])  # not complex: JSON and the pipe
    json.dumps(spec)
    expr, _ = _expr(spec)
    rebuilt = eval(expr, {"torch": torch})  # noqa: S307  (the repro script's own expression)
    torch.testing.assert_close(rebuilt, z, equal_nan=True)


# The same two classes as a user's file, for the command line.
SOURCE = ("import torch\nfrom torch.autograd import Function\n\n\n"
          + inspect.getsource(Phase) + "\n\n" + inspect.getsource(PhaseConjugated))


def test_the_command_line_gives_each_a_row(tmp_path, monkeypatch, capsys, warm_worker_template):
    from gradsmith.cli import main

    (tmp_path / "phase.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    code = main(["check", "phase.py", "--format", "json", "--timeout", "120"])
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert code == 1
    assert rows["phase.py::Phase"]["verdict"] == "pass", rows["phase.py::Phase"]
    wrong = rows["phase.py::PhaseConjugated"]
    assert wrong["verdict"] == "fail"
    assert "gradient-mismatch" in {f["code"] for f in wrong["report"]["findings"]
                                   if f["severity"] == "error"}
