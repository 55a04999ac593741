"""A flag synthesis chose that makes forward's output an integer tensor (issue 18, corpus 11 dev
part b: a two-sided PACT quantiser got ``integer-output-backward``, an error, because synthesis
set ``dequantize=False``, where forward returns uint8 codes; its project calls it with
``dequantize=True``, where the straight-through backward runs).

An integer output only under a flag value gradsmith invented is no demonstrated harm: synthesis
now tries the flag's other value, checks the Function there and reports the integer case as a
warning naming the flag. The planted wrong backward (a window that passes the gradient outside
the clip) still FAILs, and is told apart from the correct one by the contract; a Function whose
output is integer for every flag value, or whose flag value the signature states, keeps the
error. The reduced cases are written here (no project code)."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap

import torch

import gradsmith
from gradsmith.discovery import synthesize
from gradsmith.discovery.layout_search import Synthesized

QUANTISER = '''
import torch
from torch.autograd import Function


class DequantSTE(Function):
    """Quantise x on [0, clip_val]: codes (uint8), or their values when dequantize."""

    @staticmethod
    def forward(ctx, x, clip_val, num_bits, dequantize):
        ctx.save_for_backward(x)
        ctx.clip_val = clip_val
        scale = (2 ** num_bits - 1) / clip_val
        q = torch.round(torch.clamp(x, 0, clip_val) * scale)
        if dequantize:
            return q / scale
        return q.to(torch.uint8)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        inside = (x >= 0) & (x <= ctx.clip_val)
        return grad_output * inside.to(grad_output.dtype), None, None, None
'''

# planted: the gradient passes outside the clip too, where forward is flat
LEAKY = QUANTISER.replace("DequantSTE", "LeakySTE").replace(
    "return grad_output * inside.to(grad_output.dtype), None, None, None",
    "return grad_output.clone(), None, None, None")

ALWAYS_CODES = '''
import torch
from torch.autograd import Function


class AlwaysCodes(Function):
    @staticmethod
    def forward(ctx, x, num_bits, signed):
        q = torch.round(x * 2 ** (num_bits - 2))
        if signed:
            return q.clamp(-128, 127).to(torch.int8)
        return q.clamp(0, 255).to(torch.uint8)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None
'''

# the users' own value: forward's signature states dequantize=False
DEFAULT_CODES = QUANTISER.replace("DequantSTE", "DefaultCodes").replace(
    "num_bits, dequantize):", "num_bits, dequantize=False):")


def _load(tmp_path, stem: str, body: str, name: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def _x() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return 1.5 * torch.randn(3, 4, generator=gen, dtype=torch.float64)


def test_the_flag_is_set_where_forward_returns_floats_and_the_first_value_is_said(tmp_path):
    fn = _load(tmp_path, "intflag_dequant", QUANTISER, "DequantSTE")
    assert fn.apply(_x(), 2.0, 8, False).dtype == torch.uint8  # the value tried first
    found = synthesize(fn)
    assert isinstance(found, Synthesized), getattr(found, "reason", "")
    assert found.args[1:] == (2.0, 8, True)  # not a float tensor standing in for the flag
    assert "dequantize=True chosen: with dequantize=False every output is uint8" in \
        found.description
    assert found.integer_flag == "with dequantize=False every output is uint8"
    # no input set the check runs on gives integer outputs (that variant would be an error)
    for args in [found.args] + [v.args for v in found.variants]:
        assert fn.apply(*args).is_floating_point()


def test_the_correct_ste_gets_no_integer_error_and_its_contract_holds(tmp_path):
    fn = _load(tmp_path, "intflag_dequant_check", QUANTISER, "DequantSTE")
    found = synthesize(fn)
    report = gradsmith.check(fn, *found.args, compat=False)
    assert "integer-output-backward" not in report.codes()
    assert report.codes("error") == {"undeclared-estimator"}  # a quantiser's STE: declare it
    # the independent reference: backward is autograd's gradient of the clamp it estimates
    x = _x().requires_grad_()
    (ste,) = torch.autograd.grad(fn.apply(x, 2.0, 8, True).sum(), x)
    (ref,) = torch.autograd.grad(x.clamp(0, 2.0).sum(), x)
    torch.testing.assert_close(ste, ref)
    declared = gradsmith.check(fn, x.detach().requires_grad_(), 2.0, 8, True, compat=False,
                               surrogate=lambda x, c, b, d: x.clamp(0, c))
    assert declared.passed, declared.codes("error")


def test_the_planted_leaky_window_still_fails(tmp_path):
    fn = _load(tmp_path, "intflag_leaky", LEAKY, "LeakySTE")
    found = synthesize(fn)
    assert isinstance(found, Synthesized) and found.args[3] is True
    report = gradsmith.check(fn, *found.args, compat=False)
    assert not report.passed and "integer-output-backward" not in report.codes("error")
    # under the contract (no gradient outside the clip) the leak is a failure
    x = _x().requires_grad_()
    (leak,) = torch.autograd.grad(fn.apply(x, 2.0, 8, True).sum(), x)
    outside = (x.detach() < 0) | (x.detach() > 2.0)
    assert outside.any() and bool((leak[outside] != 0).all())
    declared = gradsmith.check(fn, x.detach().requires_grad_(), 2.0, 8, True, compat=False,
                               surrogate=lambda x, c, b, d: x.clamp(0, c))
    assert not declared.passed and declared.codes("error") & {"surrogate-mismatch",
                                                              "gradient-mismatch"}


def test_integer_for_every_flag_value_or_a_stated_default_keeps_the_error(tmp_path):
    always = _load(tmp_path, "intflag_always", ALWAYS_CODES, "AlwaysCodes")
    # both values of AlwaysCodes' flag give integers: no value to choose
    assert {always.apply(_x(), 8, s).dtype for s in (False, True)} == {torch.int8, torch.uint8}
    default = _load(tmp_path, "intflag_default", DEFAULT_CODES, "DefaultCodes")
    assert default.apply(_x(), 2.0, 8, True).is_floating_point()  # floats, but not by default
    for fn, name in ((always, "AlwaysCodes"), (default, "DefaultCodes")):
        found = synthesize(fn)
        assert isinstance(found, Synthesized) and not found.integer_flag, name
        report = gradsmith.check(fn, *found.args, compat=False)
        assert [f.code for f in report.errors] == ["integer-output-backward"], name


def test_the_cli_row_says_the_flag_as_a_warning(tmp_path, monkeypatch, capsys):
    from gradsmith.cli import main

    (tmp_path / "intflag_cli_case.py").write_text(textwrap.dedent(QUANTISER))
    monkeypatch.chdir(tmp_path)
    main(["check", "intflag_cli_case.py::DequantSTE", "--no-isolate", "--format", "json"])
    (row,) = json.loads(capsys.readouterr().out)["results"]
    found = {f["code"]: f for f in row["report"]["findings"]}
    warning = found["integer-output-backward"]
    assert warning["severity"] == "warning" and warning["input"] == "dequantize"
    assert "dequantize=False every output is uint8" in warning["message"]
    assert "dequantize=True chosen" in row["inputs"]
    assert found["undeclared-estimator"]["severity"] == "error"


MODE = '''
import torch
from torch.autograd import Function


class ModeQuant(Function):
    @staticmethod
    def forward(ctx, x, mode):
        q = torch.round(x * 4)
        if mode == "codes":
            return q.long()
        if mode == "values":
            return q / 4
        raise ValueError(mode)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None
'''


def test_a_str_mode_is_tried_at_its_other_compared_value(tmp_path):
    fn = _load(tmp_path, "intflag_mode", MODE, "ModeQuant")
    found = synthesize(fn)
    assert isinstance(found, Synthesized) and found.args[1] == "values"
    assert found.integer_flag == "with mode='codes' every output is int64"
    x = _x()
    torch.testing.assert_close(fn.apply(x, "values"), torch.round(x * 4) / 4)
