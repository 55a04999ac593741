"""A Function whose forward calls a ``torch.library`` custom op states its arguments' kinds in
the op's schema; synthesis passed None (then a tensor) for a ``str`` and every layout failed
with "Expected a value of type 'str' for argument 'name'" (corpus 12d held-out: lingua's
``_LogStats``, a logging identity, judged correct). The error names the argument and its
kind: forward's parameter bound to it gets a value of that kind, said in the Inputs column.
Reduced case written here: an op that records, and a Function doubling its input; the
reference is autograd of ``2 * x``; a planted wrong backward fails.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.discovery.synthesize import synthesize


@torch.library.custom_op("gradsmith_tests::record", mutates_args=())
def _record(x: torch.Tensor, name: str, times: int) -> None:
    pass


class Doubled(Function):
    @staticmethod
    def forward(ctx, x, name, times):
        torch.ops.gradsmith_tests.record(x, name, times)
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g, None, None


class Tripled(Doubled):
    @staticmethod
    def backward(ctx, g):
        return 3 * g, None, None


def test_the_schema_kinds_are_synthesised_and_said():
    found = synthesize(Doubled)
    x, name, times = found.args
    assert isinstance(name, str) and type(times) is int, found.args
    assert "schema types name as str" in found.description, found.description
    assert "schema types times as int" in found.description, found.description
    y = x.detach().clone().requires_grad_(True)
    (got,) = torch.autograd.grad(Doubled.apply(y, name, times).sum(), y)
    (want,) = torch.autograd.grad((2 * y).sum(), y)
    torch.testing.assert_close(got, want)
    assert gradsmith.check(Doubled, *found.args, compat=False).passed


def test_a_planted_wrong_backward_fails():
    found = synthesize(Tripled)
    report = gradsmith.check(Tripled, *found.args, compat=False)
    assert "gradient-mismatch" in report.codes("error"), report.codes("error")


def test_only_a_registered_ops_schema_is_read():
    from gradsmith.discovery.repair_named import _SCHEMA

    op = "ns::op() Expected a value of type 'str' for argument 'name' but instead found type"
    script = "fn() Expected a value of type 'bool' for argument 'mode' but instead found type"
    assert _SCHEMA.search(op)[2] == "name"
    assert _SCHEMA.search(script) is None  # a TorchScript function's: see repair_named
