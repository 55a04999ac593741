"""Multi-output identity forwards whose backward reroutes or modifies gradients: each output
is matched to the input it passes through, the Function is named an estimator, and the
declaration line for the whole Function is verified and, applied exactly as printed, passes."""

import pytest
import torch
from corpus import reroutes

import gradsmith


def _capture(factory, **kwargs):
    return factory, kwargs


def _apply(line):
    """The printed ``@gradsmith.example(...)`` line, evaluated as a user would paste it."""
    return eval(line.lstrip("@").replace("gradsmith.example(", "_capture(", 1),  # noqa: S307
                {"torch": torch, "_capture": _capture})


def _jacobian(fn, args, diff):
    """Independent reference: central differences of forward, d out[k] / d args[i]."""
    h = 1e-6
    jac = {}
    for i in diff:
        x = args[i]
        for j in range(x.numel()):
            d = torch.zeros(x.numel(), dtype=x.dtype)
            d[j] = h
            plus, minus = list(args), list(args)
            plus[i], minus[i] = x + d.reshape(x.shape), x - d.reshape(x.shape)
            for k, (p, m) in enumerate(zip(fn.apply(*plus), fn.apply(*minus))):
                jac.setdefault((k, i), []).append(((p - m) / (2 * h)).reshape(-1))
    return {key: torch.stack(cols, 1) for key, cols in jac.items()}


def _backward(fn, args, diff, gouts):
    leaves = list(args)
    for i in diff:
        leaves[i] = args[i].clone().requires_grad_(True)
    outs = fn.apply(*leaves)
    grads = torch.autograd.grad(outs, [leaves[i] for i in diff], gouts, allow_unused=True)
    return [torch.zeros_like(args[i]) if g is None else g for i, g in zip(diff, grads)]


REROUTED = [
    # (Function, inputs, differentiable positions, {output: input it passes through},
    #  kinds, the suggested declaration)
    (reroutes.SwapGrads, lambda: (reroutes._r(2, 3), reroutes._r(2, 3, seed=1)), [0, 1],
     {0: 0, 1: 1}, {"a": "modified", "b": "modified"},
     "intended=lambda a, b, grad_a, grad_b: (grad_b, grad_a))"),
    (reroutes.TimeIntoState, lambda: (reroutes._r((), seed=2), reroutes._r(4, seed=1)), [0, 1],
     {0: 0, 1: 1}, {"t": "no-gradient", "y": "modified"},
     "intended=lambda t, y, grad_t, grad_y: (None, grad_y + grad_t))"),
    (reroutes.ReverseBoth, lambda: (reroutes._r(4), reroutes._r(2, 2, seed=1), 0.5), [0, 1],
     {0: 0, 1: 1}, {"x": "scaled", "y": "scaled"},
     "intended=lambda x, y, alpha, grad_x, grad_y: (-alpha * grad_x, -alpha * grad_y, None))"),
    (reroutes.ClipOneOfTwo, lambda: (reroutes._r(5) * 2, reroutes._r(3, seed=1), 0.5), [0, 1],
     {0: 1, 1: 0}, {"a": "modified"},
     "intended=lambda a, b, bound, grad_b, grad_a: (grad_a.clamp(-bound, bound), grad_b, "
     "None))"),
]


@pytest.mark.parametrize("fn, args, diff, through, kinds, declaration", REROUTED,
                         ids=[r[0].__name__ for r in REROUTED])
def test_rerouting_estimator_is_matched_per_output_and_declared_for_the_whole_function(
        fn, args, diff, through, kinds, declaration):
    jac = _jacobian(fn, args(), diff)
    # The reference says what gradsmith must find: out[k] is a copy of input through[k] ...
    for (k, i), block in jac.items():
        expect = torch.eye(block.shape[0], dtype=block.dtype) if through[k] == i else 0 * block
        torch.testing.assert_close(block, expect.expand_as(block))
    gouts = [torch.randn(o.shape, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(7 + k))
             for k, o in enumerate(fn.apply(*args()))]
    true = [sum(jac[(k, i)].T @ g.reshape(-1) for k, g in enumerate(gouts)).reshape(args()[i].shape)
            for i in diff]
    got = _backward(fn, args(), diff, gouts)
    # ... and backward is not that identity's gradient.
    assert any(not torch.allclose(a, b) for a, b in zip(got, true))

    report = gradsmith.check(fn, *args(), compat=False)
    assert report.codes("error") == {"undeclared-estimator"}, str(report)
    (f,) = report.errors
    assert f.details["estimator"] == kinds
    assert f.details["verified"] and f.details["declaration"].endswith(declaration)
    # The declaration, evaluated independently, returns what backward returns ...
    factory, kwargs = _apply(f.details["declaration"])
    intended = kwargs["intended"]
    want = intended(*args(), *gouts)
    for i, g in zip(diff, got):
        torch.testing.assert_close(g, torch.zeros_like(g) if want[i] is None
                                   else want[i].expand_as(g))
    # ... and the line, applied exactly as printed, makes the check pass.
    assert gradsmith.check(fn, *factory(), compat=False, **kwargs).passed


def test_rerouting_finding_names_the_output_each_input_passes_through():
    (f,) = gradsmith.check(reroutes.ClipOneOfTwo, reroutes._r(5) * 2, reroutes._r(3, seed=1),
                           0.5, compat=False).errors
    assert "a: forward passes it through unchanged as out[1]" in f.message
    assert "returns each output's gradient, unchanged, to the input it passes through" in f.hint
    (f,) = gradsmith.check(reroutes.TimeIntoState, reroutes._r((), seed=2), reroutes._r(4),
                           compat=False).errors
    assert "t: backward returns no gradient although forward passes it through as out[0]" \
        in f.message


def test_unmatched_backward_gets_a_template_over_the_real_signature():
    args = (reroutes.slope, reroutes._r((), seed=2), reroutes._r(4))
    report = gradsmith.check(reroutes.ImplicitLike, *args, compat=False)
    (f,) = report.errors
    assert f.code == "undeclared-estimator" and not f.details["verified"]
    assert f.details["declaration"].endswith(
        "intended=lambda f, t, y, grad_t, grad_y: ...)")
    assert "one incoming gradient per output" in f.hint
    # What the template asks for, once completed, passes.
    assert gradsmith.check(reroutes.ImplicitLike, *args, compat=False, intended=lambda f, t, y,
                           gt, gy: (None, None, gy - f(t, y) * (gt + (gy * f(t, y)).sum()))
                           ).passed


@pytest.mark.parametrize("fn, args", [
    (reroutes.PairIdentity, lambda: (reroutes._r(4), reroutes._r(3, seed=1))),
    (reroutes.CrossedIdentity, lambda: (reroutes._r(4), reroutes._r(3, seed=1))),
])
def test_pass_throughs_done_right_pass(fn, args):
    jac = _jacobian(fn, args(), [0, 1])
    gouts = [torch.ones(o.shape, dtype=torch.float64) for o in fn.apply(*args())]
    true = [sum(jac[(k, i)].T @ g.reshape(-1) for k, g in enumerate(gouts)) for i in (0, 1)]
    for g, t in zip(_backward(fn, args(), [0, 1], gouts), true):
        torch.testing.assert_close(g.reshape(-1), t)
    assert gradsmith.check(fn, *args(), compat=False).passed


def test_a_wrong_gradient_through_a_non_identity_output_stays_a_mismatch():
    report = gradsmith.check(reroutes.CopyAndDoubleForgets, reroutes._r(4), compat=False)
    assert report.codes("error") == {"gradient-mismatch"}, str(report)
