"""The example registry: what ``gradsmith check`` and the pytest plugin read back."""

import pytest
import torch

import gradsmith
from gradsmith import GradsmithError


def test_factory_gives_fresh_tensors_each_call():
    @gradsmith.example(lambda: (torch.ones(3),))
    def f(x):
        return x

    (ex,) = gradsmith.examples_of(f)
    a, = ex.make_args()
    a.add_(1)  # a check that mutates its inputs must not affect the next one
    b, = ex.make_args()
    torch.testing.assert_close(b, torch.ones(3))


def test_literal_args_are_copied_not_shared():
    x = torch.zeros(2, requires_grad=True)

    @gradsmith.example(x, 3.0)
    def f(t, s):
        return t * s

    args = gradsmith.examples_of(f)[0].make_args()
    assert args[0] is not x and args[0].requires_grad and args[1] == 3.0
    with torch.no_grad():
        args[0].add_(5)
    torch.testing.assert_close(x.detach(), torch.zeros(2))


def test_stacked_examples_keep_source_order_and_options():
    g = lambda x: x  # noqa: E731

    @gradsmith.example(lambda: (torch.ones(1),), name="first", atol=1e-3)
    @gradsmith.example(lambda: torch.ones(2), name="second", surrogate=g)
    def f(x):
        return x

    first, second = gradsmith.examples_of(f)
    assert (first.name, second.name) == ("first", "second")
    assert first.options == {"atol": 1e-3} and second.surrogate is g
    assert second.make_args()[0].shape == (2,)  # a bare return value becomes a 1-tuple


def test_function_class_apply_and_no_inheritance():
    @gradsmith.example(lambda: (torch.ones(2),))
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return 2 * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    class Child(Double):
        pass

    assert len(gradsmith.examples_of(Double)) == 1
    assert len(gradsmith.examples_of(Double.apply)) == 1
    assert gradsmith.examples_of(Child) == []


def test_class_attribute_convention():
    class Square(torch.autograd.Function):
        @staticmethod
        def gradsmith_examples():
            return [(torch.full((2,), 3.0),), torch.ones(1)]

    exs = gradsmith.examples_of(Square)
    assert [e.name for e in exs] == ["attr[0]", "attr[1]"]
    torch.testing.assert_close(exs[0].make_args()[0], torch.full((2,), 3.0))


def test_no_arguments_is_a_clear_error():
    with pytest.raises(GradsmithError, match="example: got no arguments"):
        gradsmith.example()
