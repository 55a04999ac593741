"""The embedded examples: each matches plain PyTorch (forward, gradient, second order) and
passes ``gradsmith.check``; their bad-input paths raise ``GradsmithError``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch
import torch.nn.functional as F

import gradsmith.examples
from gradsmith import GradsmithError
from gradsmith._example import examples_of


def _all_examples() -> list[type]:
    found = []
    for info in pkgutil.iter_modules(gradsmith.examples.__path__, "gradsmith.examples."):
        module = importlib.import_module(info.name)
        found += [obj for _, obj in inspect.getmembers(module, inspect.isclass)
                  if issubclass(obj, torch.autograd.Function) and obj.__module__ == module.__name__]
    return found


def _gumbel(logits, tau):
    noise = -torch.empty_like(logits).exponential_().log()
    return torch.softmax((logits + noise) / tau, dim=-1)


# name -> (forward reference, gradient reference or None if it is the forward's autograd).
REFERENCES = {
    "Linear": (F.linear, None),
    "BatchedMatmul": (torch.bmm, None),
    "ChannelBiasAdd": (lambda x, b: x + b[None, :, None, None], None),
    "BroadcastAdd": (torch.add, None),
    "WeightedSum": (torch.matmul, None),
    "Conv1d": (lambda x, w, b, s, p: F.conv1d(x, w, b, stride=s, padding=p), None),
    "Sum": (lambda x, dim, keepdim=False: torch.sum(x, dim, keepdim=keepdim), None),
    "Mean": (lambda x, dim, keepdim=False: torch.mean(x, dim, keepdim=keepdim), None),
    "Max": (lambda x, dim, keepdim=False: tuple(torch.max(x, dim, keepdim=keepdim)), None),
    "LogSumExp": (torch.logsumexp, None),
    "Exp": (torch.exp, None),
    "Gelu": (F.gelu, None),
    "Silu": (F.silu, None),
    "BatchNorm": (lambda x, eps: F.batch_norm(x, None, None, training=True, eps=eps), None),
    "Sigmoid": (torch.sigmoid, None),
    "Tanh": (torch.tanh, None),
    "ClippedReLU": (lambda x, c: torch.clamp(x, 0, c), None),
    "Swish": (lambda x, beta: x * torch.sigmoid(beta * x), None),
    "SoftThreshold": (F.softshrink, None),
    "FusedAddReLU": (lambda a, b: F.relu(a + b), None),
    "FusedLinearReLU": (lambda x, w, b: F.relu(F.linear(x, w, b)), None),
    "Square": (torch.square, None),
    "StopGradient": (lambda x: x, lambda x: x * 0),
    "GradientScale": (lambda x, alpha: x, lambda x, alpha: x * alpha),
    "SignSTE": (torch.sign, lambda x: x),
    "SignClippedSTE": (torch.sign, lambda x: x.clamp(-1, 1)),
    "GumbelSoftmax": (_gumbel, None),
    "ConditionalScale": (lambda x: torch.where(x > 0, 2 * x, x / 2), None),
    "SmoothRound": (lambda x, alpha: 0.5 + 0.5 * torch.tanh(alpha * (x - 0.5)), None),
    "ScaledSigmoid": (lambda x, scale: scale * torch.sigmoid(x), None),
    "ExternalTanh": (torch.tanh, None),
}

# Approximate by design (finite differences, O(eps^2) = 1e-6) and once-differentiable.
APPROXIMATE = {"ExternalTanh": {"rtol": 1e-5, "atol": 1e-6}}

CASES = [pytest.param(cls, i, id=f"{cls.__name__}[{ex.name or i}]")
         for cls in _all_examples() for i, ex in enumerate(examples_of(cls))]


def test_every_example_has_a_reference_and_registered_inputs():
    classes = _all_examples()
    assert len(classes) >= 20
    assert {c.__name__ for c in classes} == set(REFERENCES)
    assert all(examples_of(c) for c in classes)
    assert all(c.__doc__ and "Example:" in c.__doc__ for c in classes)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _differentiable(args):
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def _grads(fn, args, seed, second_order=True):
    """First and second derivatives of a seeded random projection of fn's output."""
    torch.manual_seed(seed)
    out = _first(fn(*args))
    generator = torch.Generator().manual_seed(1)
    v = torch.randn(out.shape, generator=generator, dtype=out.dtype)
    inputs = _differentiable(args)
    first = torch.autograd.grad((out * v).sum(), inputs, create_graph=second_order,
                                allow_unused=True)
    first = [torch.zeros_like(x) if g is None else g for g, x in zip(first, inputs)]
    if not second_order:
        return [g.detach() for g in first], []
    w = [torch.randn(g.shape, generator=generator, dtype=g.dtype) for g in first]
    total = sum((g * wi).sum() for g, wi in zip(first, w))
    second = (torch.autograd.grad(total, inputs, allow_unused=True)
              if total.requires_grad else [None] * len(inputs))
    second = [torch.zeros_like(x) if g is None else g for g, x in zip(second, inputs)]
    return [g.detach() for g in first], second


@pytest.mark.parametrize("cls, index", CASES)
def test_forward_gradient_and_second_order_match_plain_pytorch(cls, index):
    ex = examples_of(cls)[index]
    forward_ref, grad_ref = REFERENCES[cls.__name__]
    torch.manual_seed(0)
    out = cls.apply(*ex.make_args())
    torch.manual_seed(0)
    expected = forward_ref(*ex.make_args())
    if isinstance(expected, tuple):  # (values, indices)
        torch.testing.assert_close(out[1], expected[1])
    torch.testing.assert_close(_first(out), _first(expected))

    tolerance = APPROXIMATE.get(cls.__name__)
    got_first, got_second = _grads(cls.apply, ex.make_args(), seed=0,
                                   second_order=tolerance is None)
    ref_first, ref_second = _grads(grad_ref or forward_ref, ex.make_args(), seed=0,
                                   second_order=tolerance is None)
    for got, ref in zip(got_first + got_second, ref_first + ref_second):
        torch.testing.assert_close(got, ref, **(tolerance or {}))
        assert got.dtype == ref.dtype


@pytest.mark.parametrize("cls, index", CASES)
def test_example_passes_gradsmith_check(cls, index):
    from gradsmith.checker import check

    ex = examples_of(cls)[index]
    report = check(cls, *ex.make_args(), surrogate=ex.surrogate, **ex.options)
    assert report.passed, str(report)
    # Templates that teach are clean: no warning either (`gradsmith check`'s default run).
    assert report.codes("warning") == set(), str(report)



def test_scaled_sigmoid_at_scale_zero_has_a_finite_zero_gradient():
    # Not a registered row (forward is constant at scale 0: a check there compares zeros with
    # zeros); the edge case the docstring promises: no y / scale division, so 0, not NaN.
    from gradsmith.examples.patterns import ScaledSigmoid

    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    xr = x.clone().requires_grad_()
    (got,) = torch.autograd.grad(ScaledSigmoid.apply(xr, 0.0).sum(), xr)
    xr = x.clone().requires_grad_()
    (want,) = torch.autograd.grad((0.0 * torch.sigmoid(xr)).sum(), xr)
    torch.testing.assert_close(got, want)
    assert torch.isfinite(got).all()

@pytest.mark.parametrize("call, match", [
    (lambda: gradsmith.examples.activations.ClippedReLU.apply(torch.ones(2), -1.0),
     r"ClippedReLU: clip_val must be > 0, got -1.0"),
    (lambda: gradsmith.examples.activations.SoftThreshold.apply(torch.ones(2), -0.5),
     r"SoftThreshold: threshold must be >= 0, got -0.5"),
    (lambda: gradsmith.examples.gradient_control.GumbelSoftmax.apply(torch.ones(2), 0.0),
     r"GumbelSoftmax: tau must be > 0, got 0.0"),
    (lambda: gradsmith.examples.patterns.SmoothRound.apply(torch.ones(2), 0.0),
     r"SmoothRound: alpha must be > 0, got 0.0"),
    (lambda: gradsmith.examples.gradient_control.GradientScale.apply(torch.ones(2),
                                                                     torch.tensor(2.0)),
     r"GradientScale: alpha must be a Python number, got Tensor; pass float\(alpha\)"),
])
def test_bad_arguments_raise_gradsmith_error(call, match):
    with pytest.raises(GradsmithError, match=match):
        call()


def test_external_gradient_refuses_second_order_loudly():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    v = torch.ones(3, dtype=torch.float64, requires_grad=True)  # a differentiable grad_output
    (g,) = torch.autograd.grad(gradsmith.examples.patterns.ExternalTanh.apply(x), x, v,
                               create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_examples_are_lint_clean():
    from pathlib import Path

    import gradsmith

    findings = gradsmith.lint(Path(gradsmith.examples.__file__).parent)
    assert findings == [], "\n".join(map(str, findings))
