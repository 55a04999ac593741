"""Quantizers whose parameters learn (issue 18, corpus 4's LSQ, LSQ+ and PACT Functions): the
step, offset or clip gets its own gradient rule in backward, so zero configuration used to
report a gradient-mismatch on the parameter and no declaration (or a template). Now the
printed line is a surrogate gradsmith ran against backward (also on inputs spread across the
quantization window) that passes when pasted exactly as printed; with it in place, a planted
wrong backward (a missing gradient scale, a wrong window, the gradient of the wrong input, a
wrong slope) still FAILs."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
import torch

import gradsmith

HEADER = """\
import torch
from torch.autograd import Function

import gradsmith


class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, g):
        return g

"""

# LSQ+ (learned step and offset, gradient scale g), written as real code writes it: the
# rounding inside backward is the straight-through RoundSTE too.
STEP_OFFSET = """
class StepOffsetQuant(Function):
    @staticmethod
    def forward(ctx, x, step, g, lo, hi, offset):
        ctx.save_for_backward(x, step, offset)
        ctx.other = g, lo, hi
        return RoundSTE.apply(torch.div(x - offset, step).clamp(lo, hi)) * step + offset

    @staticmethod
    def backward(ctx, grad):
        x, step, offset = ctx.saved_tensors
        g, lo, hi = ctx.other
        q = (x - offset) / step
        below = (q < {lo_edge}).float()
        above = (q > hi).float()
        inside = 1.0 - below - above
        grad_step = ((below * lo + above * hi + inside * RoundSTE.apply(q) - inside * q)
                     * grad * {g_step}).sum().unsqueeze(dim=0)
        grad_offset = ((below + above) * grad * g).sum().unsqueeze(dim=0)
        return {x_slope} * inside * grad, {step_grad}, None, None, None, {offset_grad}
"""
STEP_OFFSET_RIGHT = {"lo_edge": "lo", "g_step": "g", "x_slope": "1.0",
                     "step_grad": "grad_step", "offset_grad": "grad_offset"}
STEP_OFFSET_WRONG = {
    "missing gradient scale": {"g_step": "1.0"},
    "wrong window": {"lo_edge": "lo + 0.5"},
    "gradient of the wrong input": {"step_grad": "grad_offset", "offset_grad": "grad_step"},
    "wrong slope": {"x_slope": "2.0"},
}

# LSQ (learned step only), per-tensor
STEP = """
class StepQuant(Function):
    @staticmethod
    def forward(ctx, x, step, g, lo, hi):
        ctx.save_for_backward(x, step)
        ctx.other = g, lo, hi
        return RoundSTE.apply(torch.div(x, step).clamp(lo, hi)) * step

    @staticmethod
    def backward(ctx, grad):
        x, step = ctx.saved_tensors
        g, lo, hi = ctx.other
        q = x / step
        below = (q < lo).float()
        above = (q > {hi_edge}).float()
        inside = 1.0 - below - above
        grad_step = ((below * lo + above * hi + inside * RoundSTE.apply(q) - inside * q)
                     * grad * {g_step}).sum().unsqueeze(dim=0)
        return inside * grad, grad_step, None, None, None
"""
STEP_RIGHT = {"hi_edge": "hi", "g_step": "g"}
STEP_WRONG = {"missing gradient scale": {"g_step": "1.0"},
              "wrong window": {"hi_edge": "hi - 0.5"},
              "doubled gradient scale": {"g_step": "2 * g"}}

# LSQ per channel: one step per row of the weight (laid along the transposed view)
CHANNEL = """
class ChannelStep(Function):
    @staticmethod
    def forward(ctx, weight, alpha, g, lo, hi):
        ctx.save_for_backward(weight, alpha)
        ctx.other = g, lo, hi
        sizes = weight.size()
        w = torch.transpose(weight.contiguous().view(weight.size()[0], -1), 0, 1)
        a = torch.broadcast_to(alpha, w.size())
        w_q = RoundSTE.apply(torch.div(w, a).clamp(lo, hi)) * a
        return torch.transpose(w_q, 0, 1).contiguous().view(sizes)

    @staticmethod
    def backward(ctx, grad):
        weight, alpha = ctx.saved_tensors
        g, lo, hi = ctx.other
        sizes = weight.size()
        w = torch.transpose(weight.contiguous().view(weight.size()[0], -1), 0, 1)
        a = torch.broadcast_to(alpha, w.size())
        q = torch.transpose(w / a, 0, 1).contiguous().view(sizes)
        below = (q < lo).float()
        above = (q > hi).float()
        inside = 1.0 - below - above
        grad_alpha = (below * lo + above * hi + inside * RoundSTE.apply(q) - inside * q) * grad
        grad_alpha = {g_step} * grad_alpha.contiguous().view(grad_alpha.size()[0], -1).sum({dim})
        return inside * grad, grad_alpha, None, None, None
"""
CHANNEL_RIGHT = {"g_step": "g", "dim": "dim=1"}
CHANNEL_WRONG = {"missing gradient scale": {"g_step": "1.0"},
                 "summed over the wrong dimension": {"dim": "dim=1).flip(0"}}

# PACT: clip at a learned alpha, quantised; d/dalpha = 1 where x >= alpha
CLIP = """
class LearnedClip(Function):
    @staticmethod
    def forward(ctx, x, alpha, k):
        ctx.save_for_backward(x, alpha)
        y = torch.clamp(x, min=0, max=alpha.item())
        scale = (2 ** k - 1) / alpha
        return torch.round(y * scale) / scale

    @staticmethod
    def backward(ctx, grad):
        x, alpha = ctx.saved_tensors
        inside = ~((x < {lower}) | (x > alpha))
        grad_alpha = torch.sum(grad * torch.ge(x, {alpha_edge}).float()).view(-1)
        return grad * inside.float(), {alpha_grad}, None
"""
CLIP_RIGHT = {"lower": "0", "alpha_edge": "alpha", "alpha_grad": "grad_alpha"}
CLIP_WRONG = {"wrong window": {"lower": "-0.5"},
              "wrong region for alpha": {"alpha_edge": "alpha / 2"},
              "no gradient for alpha": {"alpha_grad": "torch.zeros(1, dtype=x.dtype)"}}


def _tensor(value, shape=()):
    return torch.full(shape, value, dtype=torch.float64, requires_grad=True)


def _x(seed, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(4, 5, generator=gen, dtype=torch.float64)).requires_grad_()


def _step_offset_inputs():
    # LSQ+'s activation quantizer: 4 bits unsigned, g = 1 / sqrt(N * Qp)
    return _x(1), _tensor(0.2), 1 / (20 * 15) ** 0.5, 0, 15, _tensor(-1.0, (1,))


def _step_inputs():
    # LSQ's signed weight quantizer: 3 bits, a step of 0.1 (most of randn outside the window)
    return _x(2), _tensor(0.1, (1,)), 1 / (20 * 3) ** 0.5, -4, 3


def _channel_inputs():
    steps = torch.tensor([0.2, 0.3, 0.5, 0.1], dtype=torch.float64, requires_grad=True)
    return _x(4), steps, 1 / (20 * 3) ** 0.5, -4, 3


def _clip_inputs():
    gen = torch.Generator().manual_seed(3)
    x = (2 * torch.randn(4, 5, generator=gen, dtype=torch.float64)).requires_grad_()
    return x, torch.tensor(1.3, dtype=torch.float64, requires_grad=True), 3


CASES = {
    # name: (template, right fill, wrong fills, inputs)
    "StepOffsetQuant": (STEP_OFFSET, STEP_OFFSET_RIGHT, STEP_OFFSET_WRONG, _step_offset_inputs),
    "StepQuant": (STEP, STEP_RIGHT, STEP_WRONG, _step_inputs),
    "ChannelStep": (CHANNEL, CHANNEL_RIGHT, CHANNEL_WRONG, _channel_inputs),
    "LearnedClip": (CLIP, CLIP_RIGHT, CLIP_WRONG, _clip_inputs),
}


def _load(tmp_path, stem: str, text: str):
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"learned_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _printed(tmp_path, name):
    template, right, _, inputs = CASES[name]
    fn = getattr(_load(tmp_path, "plain", HEADER + template.format(**right)), name)
    args = inputs()
    report = gradsmith.check(fn, *args, compat=False)
    found = [f for f in report.errors if f.code == "undeclared-estimator"]
    assert found, str(report)
    assert "gradient-mismatch" not in report.codes("error"), str(report)
    return fn, found[0]


@pytest.mark.parametrize("name", list(CASES))
def test_the_printed_declaration_is_checked_and_passes_as_printed(tmp_path, name):
    fn, finding = _printed(tmp_path, name)
    line = finding.details["declaration"]
    assert finding.details["verified"] and "..." not in line, line
    assert "learned quantization parameter" in finding.message
    template, right, _, _ = CASES[name]
    torch.manual_seed(0)  # the line's own torch.randn: a fixed draw
    pasted = getattr(_load(tmp_path, "pasted", HEADER + line + template.format(**right)), name)
    again = gradsmith.check(pasted, compat=False)
    assert again.passed, f"{line}\n{again}"


def _reference(name, args, v):
    """The family's gradients by hand (plain PyTorch, no gradsmith): LSQ/LSQ+'s straight-
    through rule (Esser et al. 2020, Bhalgat et al. 2020), PACT's (Choi et al. 2018)."""
    if name == "LearnedClip":
        x, alpha, _ = args
        return [v * ((x >= 0) & (x <= alpha)), (v * (x >= alpha)).sum().reshape(alpha.shape)]
    x, step, g, lo, hi = args[:5]
    offset = args[5] if len(args) > 5 else torch.zeros((), dtype=x.dtype)
    rows = step.numel() > 1  # one step per row
    q = (x - offset) / (step.reshape(-1, 1) if rows else step)
    inside = (q >= lo) & (q <= hi)
    ds = torch.where(q < lo, lo, torch.where(q > hi, hi, q.round() - q))
    grads = [v * inside, (g * v * ds).sum(1) if rows else (g * v * ds).sum().reshape(step.shape)]
    if len(args) > 5:
        grads.append((g * v * ~inside).sum().reshape(offset.shape))
    return grads


@pytest.mark.parametrize("name", list(CASES))
def test_the_declared_surrogate_is_the_family_gradient(tmp_path, name):
    _, finding = _printed(tmp_path, name)
    line = finding.details["declaration"]
    source = re.search(r"surrogate=(lambda .*)\)$", line).group(1)
    surrogate = eval(source, {"torch": torch})  # noqa: S307 - gradsmith's own suggestion
    factory = line[len("@gradsmith.example("):].split(", surrogate=")[0]
    gen = torch.Generator().manual_seed(1)
    for scale in (0.1, 1.0, 3.0):  # inside the window, across it, far outside
        args = list(eval(factory, {"torch": torch})())  # noqa: S307
        args[0] = scale * torch.randn(args[0].shape, generator=gen, dtype=args[0].dtype)
        leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a
                  for a in args]
        diff = [a for a in leaves if isinstance(a, torch.Tensor)]
        out = surrogate(*leaves)
        v = torch.randn(out.shape, generator=gen, dtype=out.dtype)
        got = torch.autograd.grad(out, diff, v)
        want = _reference(name, [a.detach() if isinstance(a, torch.Tensor) else a
                                 for a in leaves], v)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b.to(a.dtype), rtol=1e-9, atol=1e-12)


WRONG = [pytest.param(name, kind, id=f"{name}-{kind}")
         for name, (_, _, wrong, _) in CASES.items() for kind in wrong]


@pytest.mark.parametrize("name, kind", WRONG)
def test_a_planted_wrong_backward_fails_with_the_declaration_in_place(tmp_path, name, kind):
    _, finding = _printed(tmp_path, name)
    line = finding.details["declaration"]
    template, right, wrong, _ = CASES[name]
    mutant = template.format(**{**right, **wrong[kind]})
    fn = getattr(_load(tmp_path, "mutant", HEADER + line + mutant), name)
    torch.manual_seed(0)
    report = gradsmith.check(fn, compat=False)
    assert not report.passed
    assert "surrogate-mismatch" in report.codes("error"), str(report)
