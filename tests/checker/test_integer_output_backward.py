"""Forward returns only integer tensors while backward returns a gradient (issue 18, corpus 10b
held-out, spent rows: a binary quantizer whose ``torch.where(..., 0, 1)`` / ``one_hot`` output
is int64, with a straight-through backward). Autograd treats integer outputs as constants, so
that backward never runs and training through the Function silently gets no gradient. Zero
configuration skipped it ("forward returned Tensor, not a floating-point tensor"); a registered
example got the generic ``no-gradient-path``. Both now FAIL with ``integer-output-backward``
naming the input and the dtype. An integer output that is meant (an argmax whose backward
returns only None, outputs marked non-differentiable) keeps today's behaviour."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap

import pytest
import torch

import gradsmith
from gradsmith.discovery import synthesize
from gradsmith.discovery.layout_search import NoInputs, Synthesized

HEADER = "import torch\nfrom torch.autograd import Function\n\n"

SIGN_LONG = """
class SignLong(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x > 0).long()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1).to(grad_output.dtype)
"""

# the fix the finding suggests: the same quantizer returning x's dtype
SIGN_FLOAT = SIGN_LONG.replace("SignLong", "SignFloat").replace(
    "(x > 0).long()", "(x > 0).to(x.dtype)")

ONE_HOT_WITH_BITS = """
class OneHotSte(Function):
    @staticmethod
    def forward(ctx, x, bits):
        ctx.save_for_backward(x)
        idx = torch.argmax(x, dim=-1)
        return torch.nn.functional.one_hot(idx, x.shape[-1]), idx

    @staticmethod
    def backward(ctx, grad_onehot, grad_idx):
        (x,) = ctx.saved_tensors
        return grad_onehot.clone(), None
"""

ARGMAX = """
class Argmax(Function):
    @staticmethod
    def forward(ctx, x):
        return x.argmax(dim=-1)

    @staticmethod
    def backward(ctx, grad_output):
        return None
"""

MARKED = """
class MarkedBucket(Function):
    @staticmethod
    def forward(ctx, x):
        out = (x > 0).long()
        ctx.mark_non_differentiable(out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output
"""


def _load(tmp_path, stem: str, body: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(f"intout_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _x() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)


def test_zero_config_synthesises_inputs_and_the_row_fails_with_the_finding(tmp_path):
    fn = _load(tmp_path, "sign_long_zero", SIGN_LONG).SignLong
    # the independent reference: autograd gives x no gradient through the int64 output, and
    # the same quantizer returning x's dtype gets the straight-through gradient (by hand)
    float_fn = _load(tmp_path, "sign_float", SIGN_FLOAT).SignFloat
    x = _x()
    out = fn.apply(x)
    assert out.dtype == torch.int64 and not out.requires_grad and out.grad_fn is None
    (g,) = torch.autograd.grad(float_fn.apply(x).sum(), x)
    torch.testing.assert_close(g, (x.detach().abs() <= 1).double())
    found = synthesize(fn)
    assert isinstance(found, Synthesized), getattr(found, "reason", "")
    report = gradsmith.check(fn, *found.args, compat=False)
    assert not report.passed
    (finding,) = [f for f in report.errors if f.code == "integer-output-backward"]
    assert "int64" in finding.message and "no gradient reaches x" in finding.message
    assert ".to(x.dtype)" in finding.hint
    assert "no-gradient-path" not in {f.code for f in report.findings}


@pytest.mark.parametrize("cast,dtype", [(".long()", "int64"), ("", "bool")])
def test_a_registered_example_gets_the_finding_not_the_generic_no_gradient_path(tmp_path, cast,
                                                                                 dtype):
    body = SIGN_LONG.replace("(x > 0).long()", f"(x > 0){cast}")
    fn = _load(tmp_path, f"sign_reg_{dtype}", body).SignLong
    assert fn.apply(_x()).dtype == getattr(torch, dtype)
    report = gradsmith.check(fn, _x(), compat=False)
    assert [f.code for f in report.errors] == ["integer-output-backward"]
    assert report.errors[0].input == "x" and f"every output is {dtype}" in report.errors[0].message


def test_only_inputs_backward_gives_a_gradient_are_named_and_every_output_counts(tmp_path):
    fn = _load(tmp_path, "one_hot", ONE_HOT_WITH_BITS).OneHotSte
    x, bits = _x(), torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    report = gradsmith.check(fn, x, bits, compat=False)
    (finding,) = [f for f in report.errors if f.code == "integer-output-backward"]
    assert finding.details["inputs"] == ["x"] and finding.details["output_dtypes"] == ["int64"]


@pytest.mark.parametrize("body,name", [(ARGMAX, "Argmax"), (MARKED, "MarkedBucket")])
def test_a_lost_gradient_is_told_apart_from_an_integer_output_that_is_meant(tmp_path, body,
                                                                          name):
    lost = _load(tmp_path, f"lost_{name}", SIGN_LONG).SignLong
    assert "integer-output-backward" in gradsmith.check(lost, _x(), compat=False).codes()
    fixed = _load(tmp_path, f"fixed_{name}", SIGN_FLOAT).SignFloat
    report = gradsmith.check(fixed, _x(), compat=False)
    assert "integer-output-backward" not in report.codes() and "gradients" in report.checks
    # backward returns only None / the output is marked non-differentiable: meant, as today
    meant = getattr(_load(tmp_path, f"meant_{name}", body), name)
    assert isinstance(synthesize(meant), NoInputs)  # zero config: still a skip
    report = gradsmith.check(meant, _x(), compat=False)
    assert [f.code for f in report.errors] == ["no-gradient-path"]


def test_the_cli_row_fails_with_exit_1_instead_of_skipping(tmp_path, monkeypatch, capsys):
    from gradsmith.cli import main

    # a module name no other test imports: --no-isolate leaves it in sys.modules
    (tmp_path / "intout_cli_case.py").write_text(HEADER + textwrap.dedent(SIGN_LONG + ARGMAX))
    monkeypatch.chdir(tmp_path)
    code = main(["check", "intout_cli_case.py", "--no-isolate", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    rows = {r["name"].split("::")[-1]: r for r in doc["results"]}
    assert code == 1
    assert rows["SignLong"]["verdict"] == "fail"
    assert "integer-output-backward" in {f["code"] for f in rows["SignLong"]["report"]["findings"]}
    assert rows["Argmax"]["verdict"] == "skip"
