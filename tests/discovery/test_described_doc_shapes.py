"""Shapes a docstring states after a few words (``x: Input tensor [batch, in_features]``), as
adapter chains document them: a LoRA linear ``x W^T + s (x A^T) B^T`` is stated with four
distinct sizes that compose, so a backward with the wrong transposes is exercised on the shapes
it is written for. Intervals (``[0, 1]``) and prose in parentheses are not shapes."""

import torch

from gradsmith.discovery.stated import read_statements


class LoRALinear(torch.autograd.Function):
    """Linear layer with a low-rank adapter."""

    @staticmethod
    def forward(ctx, x, weight, A, B, scaling):
        """
        Args:
            x: Input tensor [batch, in_features]
            weight: Frozen base weight [out_features, in_features]
            A: Down projection [rank, in_features]
            B: Up projection [out_features, rank]
            scaling: adapter scale (alpha / rank, a float)
        """
        ctx.save_for_backward(x, weight, A, B)
        ctx.scaling = scaling
        return x @ weight.T + (x @ A.T @ B.T) * scaling

    @staticmethod
    def backward(ctx, g):
        x, weight, A, B = ctx.saved_tensors
        s = ctx.scaling
        xa = x @ A.T
        grad_x = g @ weight + (g @ B @ A) * s
        return grad_x, g.T @ x, (g @ B).T @ x * s, g.T @ xa * s, None


class LoRALinearWrongTranspose(LoRALinear):
    """``g @ B.T @ A.T``: the shapes compose only when rank, in and out coincide."""

    @staticmethod
    def backward(ctx, g):
        x, weight, A, B = ctx.saved_tensors
        s = ctx.scaling
        grad_x = g @ weight + (g @ B.T @ A.T) * s
        return grad_x, g.T @ x, (g @ B).T @ x * s, g.T @ (x @ A.T) * s, None


def test_described_docstring_lines_state_shapes_but_intervals_and_prose_do_not():
    said = read_statements(LoRALinear, ["x", "weight", "A", "B", "scaling"])
    assert said.shapes == {"x": ["batch", "in_features"], "weight": ["out_features", "in_features"],
                           "A": ["rank", "in_features"], "B": ["out_features", "rank"]}

    class Interval(LoRALinear):
        @staticmethod
        def forward(ctx, p, dim):
            """p: probability [0, 1]
            dim: the dimension (0 or 1)"""
            return p

    assert read_statements(Interval, ["p", "dim"]).shapes == {}
