"""PyTorch's own autograd errors, explained: each planted Function raises the real message in
plain PyTorch (the reference), and gradsmith's finding names the cause, the user's line and
the fix; each correct counterpart passes."""

import re

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

import gradsmith


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64,
                       requires_grad=True)


class OneGradForTwo(Function):
    @staticmethod
    def forward(ctx, x, w):
        return x * w

    @staticmethod
    def backward(ctx, g):
        return g


class SummedTooFar(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum()


class GradForInt(Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * 2, 0


class RecomputeWithoutEnableGrad(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_()
        y = x.sin()
        return torch.autograd.grad(y, x, g)[0]


class RecomputeWithEnableGrad(Function):
    """The checkpointing pattern done right (detached recomputation: once differentiable)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            y = x.sin()
        return torch.autograd.grad(y, x, g)[0]


class SavesInt(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x, k)
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * 3, None


class KeepsIntOnCtx(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class MatmulNoTranspose(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, x @ g


class SumNoUnsqueeze(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sum(1)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.ones_like(x)


class GraphKeptOnCtx(Function):
    """The graph built in forward is freed by the first backward through it, so only a
    second backward on the same graph (retain_graph=True) meets the error. gradsmith gives
    every backward a fresh graph (a backward may write into what it saved), so it sees the
    same bug as the second derivative that backward's graph-less result gets wrong."""

    @staticmethod
    def forward(ctx, x):
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            y = leaf.sin()
        ctx.save_for_backward(leaf)
        ctx.y = y
        return y.detach()

    @staticmethod
    def backward(ctx, g):
        (leaf,) = ctx.saved_tensors
        return torch.autograd.grad(ctx.y, leaf, g)[0]


class GraphKeptOnCtxGradPerInput(Function):
    """The same pattern with one torch.autograd.grad per input: the first call frees the
    graph the second needs, on every backward."""

    @staticmethod
    def forward(ctx, x, w):
        with torch.enable_grad():
            lx, lw = x.detach().requires_grad_(), w.detach().requires_grad_()
            y = (lx * lw).sin()
        ctx.save_for_backward(lx, lw)
        ctx.y = y
        return y.detach()

    @staticmethod
    def backward(ctx, g):
        lx, lw = ctx.saved_tensors
        return torch.autograd.grad(ctx.y, lx, g)[0], torch.autograd.grad(ctx.y, lw, g)[0]


def exp_then_inplace(x):
    y = x.exp()
    y += 1
    return y


def exp_then_add(x):
    y = x.exp()
    y = y + 1
    return y


# (target, args, expected torch message, finding code, details["cause"], text of the fix)
CASES = [
    (lambda x, w: OneGradForTwo.apply(x, w), lambda: (_r(3), _r(3, seed=1)),
     r"returned an incorrect number of gradients \(expected 2, got 1\)", "wrong-grad-count",
     "incorrect-number-of-gradients", "return exactly 2 values"),
    (lambda x, w: SummedTooFar.apply(x, w), lambda: (_r(3, 4), _r(4, seed=1)),
     r"invalid gradient at index 1 - got \[\] but expected shape compatible with \[4\]",
     "grad-shape-mismatch", "invalid-gradient-shape", "sum_to_size"),
    (lambda x: GradForInt.apply(x, 3), lambda: (_r(3),),
     r"gradient different than None at position 2", "non-tensor-grad",
     "gradient-for-non-tensor", "return None at position 2"),
    (RecomputeWithoutEnableGrad, lambda: (_r(4),),
     r"element 0 of tensors does not require grad and does not have a grad_fn",
     "backward-error", "no-graph-in-backward", "with torch.enable_grad():"),
    (SavesInt, lambda: (_r(4), 3), r"save_for_backward can only save variables",
     "forward-error", "save-for-backward-non-tensor", "ctx.k = k"),
    (MatmulNoTranspose, lambda: (_r(3, 4), _r(4, 5, seed=1)),
     r"mat1 and mat2 shapes cannot be multiplied", "backward-error", "matmul-shapes", "w.T"),
    (SumNoUnsqueeze, lambda: (_r(3, 4),), r"must match the size of tensor b",
     "backward-error", "size-mismatch", "unsqueeze"),
    (GraphKeptOnCtxGradPerInput, lambda: (_r(4), _r(4, seed=1)),
     r"Trying to backward through the graph a second time", "backward-error", "graph-freed",
     "recompute that graph inside backward"),
    (exp_then_inplace, lambda: (_r(4),), r"modified by an inplace operation", "backward-error",
     "modified-by-inplace", "out-of-place"),
]


def _plain_pytorch(fn, args):
    call = fn.apply if isinstance(fn, type) else fn
    out = call(*args)
    torch.autograd.grad(out.sum(), [a for a in args if isinstance(a, torch.Tensor)],
                        retain_graph=True)
    torch.autograd.grad(out.sum(), [a for a in args if isinstance(a, torch.Tensor)])


@pytest.mark.parametrize("fn, args, torch_message, code, cause, fix", CASES,
                         ids=[c[4] for c in CASES])
def test_known_autograd_error_is_explained(fn, args, torch_message, code, cause, fix):
    with pytest.raises((RuntimeError, TypeError), match=torch_message):
        _plain_pytorch(fn, args())
    report = gradsmith.check(fn, *args())
    assert not report.passed
    found = [f for f in report.errors if f.details.get("cause") == cause]
    assert found, str(report)
    f = found[0]
    assert f.code == code and fix in f.hint, str(f)
    assert re.search(torch_message, f.message) and "Cause:" in f.message


def test_a_graph_freed_only_on_a_second_backward_is_still_reported():
    # Plain PyTorch: fine once, the error on the second backward through one graph.
    x = _r(4)
    out = GraphKeptOnCtx.apply(x)
    torch.autograd.grad(out.sum(), x, retain_graph=True)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(out.sum(), x)
    report = gradsmith.check(GraphKeptOnCtx, _r(4))
    # backward's result has no graph: its second derivative is 0 for x and grad_out, which
    # harms only who differentiates twice or backpropagates twice (a warning, issue 18)
    (f,) = [f for f in report.findings if f.code == "double-backward-unsupported"]
    assert f.severity == "warning" and f.details["inputs"] == ["x", "grad_out"], str(report)

def test_the_users_line_is_named():
    report = gradsmith.check(MatmulNoTranspose, _r(3, 4), _r(4, 5, seed=1))
    (f,) = [f for f in report.errors if f.details.get("cause") == "matmul-shapes"]
    assert "test_explained_errors.py:" in f.message and "`return g @ w, x @ g`" in f.message
    assert f.details["where"]["function"] == "backward"


def test_autograd_validation_errors_point_at_backward():
    # Autograd's count check runs after backward returned: no user frame in the traceback,
    # so the finding points at the Function's backward definition.
    report = gradsmith.check(lambda x, w: OneGradForTwo.apply(x, w), _r(3), _r(3, seed=1))
    (f,) = report.errors
    assert f.details["where"]["code"].startswith("def backward")


@pytest.mark.parametrize("fn, args", [
    (RecomputeWithEnableGrad, lambda: (_r(4),)),
    (KeepsIntOnCtx, lambda: (_r(4), 3)),
    (exp_then_add, lambda: (_r(4),)),
])
def test_correct_counterparts_pass(fn, args):
    call = fn.apply if isinstance(fn, type) else fn
    assert torch.autograd.gradcheck(call, args())
    report = gradsmith.check(fn, *args())
    assert report.passed, str(report)
