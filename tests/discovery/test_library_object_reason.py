"""A skip whose forward takes an object of another library names it in its reason (corpus 11a
dev: a floor-plan loss takes ``boundary_polygon: geometry.Polygon``, a Shapely object; the
reason only quoted Shapely's error on the first synthesised layout). Reduced cases written here;
the reference is the Function run on the object it asks for.
"""

from __future__ import annotations

from fractions import Fraction

import torch
from torch.autograd import Function

from gradsmith.discovery.library_objects import library_objects
from gradsmith.discovery.suggestion import no_inputs_reason


class ScaledByRatio(Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, ratio: Fraction, steps: int = 2):
        ctx.k = ratio.numerator / ratio.denominator
        return ctx.k * x

    @staticmethod
    def backward(ctx, g):
        return ctx.k * g, None, None


def test_the_reason_names_the_object_and_its_class():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(ScaledByRatio.apply(x, Fraction(3, 2)).sum(), x)
    torch.testing.assert_close(got, torch.full_like(x, 1.5))  # runs on the object it asks for
    assert library_objects(ScaledByRatio) == [("ratio", "fractions.Fraction")]
    reason = no_inputs_reason(ScaledByRatio, "21 input layouts failed (first: ...)", [], {})
    assert "`ratio` is annotated `fractions.Fraction`" in reason, reason
    assert reason.index("fractions.Fraction") < reason.index("Fix:")


def test_tensors_numbers_and_typing_are_not_named():
    class Plain(Function):
        @staticmethod
        def forward(ctx, x: torch.Tensor, n: int, scale: float | None = None):
            return x * n

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    assert library_objects(Plain) == []
