"""saved_bytes counts tensors kept on ctx (also in containers) once per storage; peak_bytes."""

from __future__ import annotations

import torch

from gradsmith.bench import ctx_tensors, peak_bytes, saved_bytes

N = 1000  # float32: 4,000 bytes per tensor of N elements


class StashOnCtx(torch.autograd.Function):
    """The tutorials' anti-pattern: the activation stashed on ctx instead of saved."""

    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.y = y
        return y * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * ctx.y * (1 - ctx.y)


class Containers(torch.autograd.Function):
    """Tensors hidden in a tuple, a list inside a dict, plus a shape (not a tensor)."""

    @staticmethod
    def forward(ctx, x):
        a, b, c = x * 2, x * 3, (x > 0)
        ctx.pair = (a, [b])
        ctx.by_name = {"mask": c, "again": a}  # `a` a second time: counted once
        ctx.shape = x.shape
        return x * 4

    @staticmethod
    def backward(ctx, g):
        return g * 4


class SavedAndStashed(torch.autograd.Function):
    """One tensor both saved and on ctx, and a view of it on ctx: one storage."""

    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        ctx.y, ctx.head = y, y[: N // 2]
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class MaskOnly(torch.autograd.Function):
    """The mask-saving ReLU done right: 1 byte per element through save_for_backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x > 0)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (m,) = ctx.saved_tensors
        return g * m


def _x():
    return torch.randn(N, requires_grad=True)


def test_stashed_activation_is_counted():
    # y (4,000 bytes) on ctx; the Function saves nothing else
    assert saved_bytes(StashOnCtx.apply, (_x(),)) == N * 4


def test_stashing_on_ctx_does_not_measure_as_a_win_over_autograd():
    ours = saved_bytes(StashOnCtx.apply, (_x(),))
    plain = saved_bytes(lambda x: torch.sigmoid(x) * 1.0, (_x(),))  # sigmoid saves its output
    assert ours >= plain == N * 4


def test_tensors_inside_containers_are_counted_once_each():
    # a, b float32 (4,000 each) + c bool (1,000); the second reference to `a` adds nothing
    assert saved_bytes(Containers.apply, (_x(),)) == 2 * N * 4 + N


def test_saved_and_stashed_storage_counts_once():
    assert saved_bytes(SavedAndStashed.apply, (_x(),)) == N * 4


def test_mask_saving_relu_counts_one_byte_per_element():
    assert saved_bytes(MaskOnly.apply, (_x(),)) == N


def test_ctx_tensors_are_found_through_the_graph():
    x = _x()
    out = torch.relu(Containers.apply(x * 1.0)) + 1  # nodes before and after the Function
    shapes = sorted(tuple(t.shape) for t in ctx_tensors(out))
    assert shapes == [(N,)] * 4  # a, b, c and `a` again; saved_bytes dedups by storage
    assert ctx_tensors(torch.ones(3)) == []


def test_excluded_storage_on_ctx_is_not_counted():
    class KeepsInput(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = _x()
    assert saved_bytes(KeepsInput.apply, (x,)) == N * 4
    assert saved_bytes(KeepsInput.apply, (x,), exclude=[x]) == 0


def test_peak_bytes_matches_hand_count():
    # ones (4,000 bytes) stays alive while the product (4,000 bytes) is allocated; the scalar
    # 2 becomes a 0-d tensor of a few bytes
    assert 2 * N * 4 <= peak_bytes(lambda: torch.ones(N) * 2) <= 2 * N * 4 + 64
    x = torch.ones(N)
    assert N * 4 <= peak_bytes(lambda: x * 2) <= N * 4 + 64


def test_peak_bytes_of_a_training_step():
    x = _x()
    # forward: x * 2 (4,000); backward: the gradient of x (4,000), while x * 2 is freed or not
    peak = peak_bytes(lambda: (x * 2).sum().backward())
    assert N * 4 <= peak <= 2 * N * 4 + 64
    assert x.grad is not None
