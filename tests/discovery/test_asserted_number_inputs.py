"""An argument forward asserts to be a Python number (issue 18, corpus 10a held-out, spent: a
scaled Bessel function's order, ``assert isinstance(v, Number), 'v must be a scalar'``).

The hints read ``isinstance(v, Number)`` as "a Python number" already, but the project's
forward had a line commented out at column 0, so its source did not dedent, did not parse, and
no reader of the code saw anything: v got a tensor on every layout and the row was a skip. Now
such a source parses with its comment lines blanked; v is a number and the formula's domain
follows from forward's output as for any other argument (a fractional power of a negative
value is nan: positive values). Gradients compared with autograd of the same expression; a
wrong exponent still fails.
"""

from __future__ import annotations

import torch
from source_cases import check_rows, error_codes, load_source

from gradsmith.discovery import Synthesized, synthesize
from gradsmith.discovery.hints import forward_hints
from gradsmith.discovery.source import parse

SOURCE = '''
from numbers import Number

import numpy as np
import torch


class Power(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v, z):
        assert isinstance(v, Number), 'v must be a scalar'
        ctx.save_for_backward(z)
        ctx.v = v
        out = np.power(z.detach().numpy(), v)  # opaque to autograd, as a scipy call is
#       if v < 0:
#           raise RuntimeError('v must be >= 0')
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        v = ctx.v
        return None, {grad}
'''
RIGHT = "g * v * z ** (v - 1)"
WRONG = "g * v * z ** v"  # the exponent not lowered


def test_the_asserted_argument_is_a_number_and_the_domain_follows(tmp_path):
    path = tmp_path / "asserted_number_ops.py"
    path.write_text(SOURCE.format(grad=RIGHT))
    module = load_source(path, "asserted_number_ops")
    found = synthesize(module.Power)
    assert isinstance(found, Synthesized), found
    v, z = found.args
    assert type(v) is float and v not in (0.0, 1.0)
    assert bool((z > 0).all()), "np.power(z, 1.5) is nan below 0: the domain is z > 0"
    g = torch.randn(z.shape, dtype=torch.float64)
    (got,) = torch.autograd.grad(module.Power.apply(v, z), z, g)
    y = z.detach().clone().requires_grad_()
    (reference,) = torch.autograd.grad(y ** v, y, g)  # autograd of the same expression
    torch.testing.assert_close(got, reference)


def test_a_right_backward_passes_where_it_was_skipped(tmp_path):
    row = check_rows(tmp_path / "number_right.py", SOURCE.format(grad=RIGHT))["Power"]
    assert row["verdict"] == "pass", row.get("reason") or row.get("text")


def test_a_wrong_backward_still_fails(tmp_path):
    row = check_rows(tmp_path / "number_wrong.py", SOURCE.format(grad=WRONG))["Power"]
    assert row["verdict"] == "fail"
    assert "gradient-mismatch" in error_codes(row)


def test_a_method_with_a_column_0_comment_parses(tmp_path):
    path = tmp_path / "commented_ops.py"
    path.write_text(SOURCE.format(grad=RIGHT))
    module = load_source(path, "commented_ops")
    assert parse(module.Power.forward) is not None
    assert forward_hints(module.Power.forward, ["v", "z"])["v"].kind == "float"
