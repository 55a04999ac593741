"""Fewer skips: inputs built from what the forward's body and signature say, and a skip's
decorator that lists every argument of the real forward. Each Function below was skipped before
(all generic layouts fail on it); the test runs its forward on the synthesised inputs and checks
the property the body needs, independently of the synthesiser."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function

from gradsmith.discovery import NoInputs, Synthesized, synthesize
from gradsmith.discovery.hints import forward_hints


class ViewsRows(Function):
    @staticmethod
    def forward(ctx, x):
        rows = x.view(-1, 8)
        return rows.sum(1)

    @staticmethod
    def backward(ctx, g):
        return g.unsqueeze(1).expand(-1, 8).reshape(-1)


class NeedsRank4(Function):
    @staticmethod
    def forward(ctx, q):
        return q * q.shape[3]

    @staticmethod
    def backward(ctx, g):
        return g * 5


class LossWithTarget(Function):
    """entmax-style loss: a float score tensor and an int64 class index per row."""

    @staticmethod
    def forward(ctx, X, target, alpha=1.5):
        picked = X.gather(1, target.unsqueeze(1))
        return (X.logsumexp(1) - picked.squeeze(1)) * alpha

    @staticmethod
    def backward(ctx, g):
        return None, None, None


class ModeString(Function):
    @staticmethod
    def forward(ctx, x, mode):
        if mode == "symmetric":
            return x.clamp(-1, 1)
        raise ValueError(mode)

    @staticmethod
    def backward(ctx, g):
        return g, None


class TensorAlpha(Function):
    """PACT-style: alpha is a tensor although its name is a usual float hyperparameter."""

    @staticmethod
    def forward(ctx, x, alpha, k):
        ctx.save_for_backward(x, alpha)
        return torch.clamp(x, 0, alpha.item()) * (2 ** k - 1)

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class Coupling(Function):
    """memcnn-style: modules and their parameters passed to apply."""

    @staticmethod
    def forward(ctx, x, Fm, Gm, *weights):
        x1, x2 = torch.chunk(x, 2, dim=1)
        y1 = x1 + Fm.forward(x2)
        y2 = x2 + Gm.forward(y1)
        return torch.cat([y1, y2], dim=1)

    @staticmethod
    def backward(ctx, g):
        return (g, None, None) + (None,) * 2


class Annotated(Function):
    @staticmethod
    def forward(ctx, x: Tensor, bias: Tensor | None = None, steps: int = 3):
        y = x * steps
        return y if bias is None else y + bias

    @staticmethod
    def backward(ctx, g):
        return g * 3, g, None


def _runs(fn, args):
    return fn.apply(*args) if isinstance(fn, type) else fn(*args)


def test_view_with_a_constant_width_gets_that_last_dimension():
    found = synthesize(ViewsRows)
    assert isinstance(found, Synthesized), found
    assert found.args[0].shape[-1] == 8
    assert _runs(ViewsRows, found.args).shape == (found.args[0].numel() // 8,)


def test_shape_index_sets_the_rank():
    found = synthesize(NeedsRank4)
    assert isinstance(found, Synthesized) and found.args[0].dim() >= 4


def test_gather_argument_becomes_an_index_tensor_in_range():
    found = synthesize(LossWithTarget)
    assert isinstance(found, Synthesized), found
    X, target = found.args[:2]
    assert target.dtype == torch.int64 and target.shape == X.shape[:1]
    assert int(target.max()) < X.shape[1] and int(target.min()) >= 0
    assert "target: int64" in found.description


def test_string_compared_in_the_body_is_used():
    found = synthesize(ModeString)
    assert isinstance(found, Synthesized) and found.args[1] == "symmetric"


def test_a_hyperparameter_name_used_as_a_tensor_gets_a_scalar_tensor():
    found = synthesize(TensorAlpha)
    assert isinstance(found, Synthesized), found
    alpha = found.args[1]
    assert isinstance(alpha, torch.Tensor) and alpha.dim() == 0 and float(alpha.detach()) > 0


def test_module_arguments_get_modules_and_varargs_their_parameters():
    found = synthesize(Coupling)
    assert isinstance(found, Synthesized), found
    x, fm, gm, *weights = found.args
    assert isinstance(fm, torch.nn.Module) and isinstance(gm, torch.nn.Module)
    assert [w is p for w, p in zip(weights, [*fm.parameters(), *gm.parameters()])] == [True] * 2
    expected = torch.cat([x.chunk(2, 1)[0] + fm(x.chunk(2, 1)[1]), x.chunk(2, 1)[1]], 1)
    assert torch.allclose(Coupling.apply(*found.args)[:, :x.shape[1] // 2],
                          expected[:, :x.shape[1] // 2])


def test_annotations_mark_optional_tensors_and_ints():
    hints = forward_hints(Annotated.forward, ["x", "bias", "steps"])
    assert (hints["x"].kind, hints["bias"].kind, hints["bias"].optional) == ("tensor", "tensor",
                                                                             True)
    assert hints["steps"].kind == "int"
    found = synthesize(Annotated)
    assert found.args[1] is None
    assert any(v.change.startswith("bias given") for v in found.variants)


def test_skip_decorator_lists_every_argument_of_the_forward():
    MODES = ("a", "b")

    class Unsynthesisable(Function):
        @staticmethod
        def forward(ctx, q, k, v, mode, bucket_size, scale=0.5):
            if mode not in MODES:
                raise ValueError(mode)
            return q @ k.transpose(-1, -2) @ v * scale

        @staticmethod
        def backward(ctx, g):
            return None

    found = synthesize(Unsynthesisable)
    assert isinstance(found, NoInputs)
    assert "# (q, k, v, mode, bucket_size, scale)" in found.reason
    line = found.reason.split("`")[1]
    # the line is valid Python and its lambda returns one entry per forward argument
    body = line[len("@gradsmith.example("):line.index("))  #") + 1]
    made = eval(body.replace("...", "None"), {"torch": torch})()  # noqa: S307 - our own text
    assert len(made) == 6
    assert made[5] == 0.5 and isinstance(made[0], torch.Tensor)


class _GenericLoss(Function):
    @staticmethod
    def forward(ctx, X, target, scale):
        picked = torch.zeros_like(X).scatter_add_(1, target.unsqueeze(1), torch.ones_like(X))
        return (X * picked).sum(1) * scale

    @staticmethod
    def backward(ctx, g):
        return None, None, None


class SubclassLoss(_GenericLoss):
    """entmax-style: the subclass forward only forwards to the parent's."""

    @classmethod
    def forward(cls, ctx, X, target, k=None):
        return super().forward(ctx, X, target, 2.0)


class Float32Only(Function):
    """A forward that crashes in float64 (a float32 buffer filled with float64's max)."""

    @staticmethod
    def forward(ctx, q, mask, causal):
        fill = torch.full(q.shape, -torch.finfo(q.dtype).max)
        out = torch.maximum(q, fill)
        if exists(mask):
            out = out.masked_fill(~mask, 0.0)
        return out * (2 if causal else 1)

    @staticmethod
    def backward(ctx, g):
        return g, None, None


def exists(value):
    return value is not None


def test_hints_follow_super_forward_to_the_parent_body():
    found = synthesize(SubclassLoss)
    assert isinstance(found, Synthesized), found
    assert found.args[1].dtype == torch.int64


def test_float32_is_tried_when_every_float64_layout_crashes_and_masks_start_absent():
    found = synthesize(Float32Only)
    assert isinstance(found, Synthesized), found
    assert found.args[0].dtype == torch.float32 and found.args[1] is None
    assert "q: float32" in found.description


def test_an_inverse_function_argument_is_never_invented():
    class Invertible(Function):
        @staticmethod
        def forward(ctx, fn, fn_inverse, x):
            return fn(x)

        @staticmethod
        def backward(ctx, g):
            return None, None, g

    found = synthesize(Invertible)
    assert isinstance(found, NoInputs) and "'fn_inverse' must be the inverse" in found.reason
