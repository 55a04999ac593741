"""A linear-operator stand-in's shape attributes agree with the input it is applied to, and
an error its guessed shapes make is not the Function's (corpus 12a held-out: a projection
operator Function FAILed grad-shape-mismatch: input (2, 3, 8) applied whole, with
``num_extra_dims=0``, and the stand-in's ``domain_shape`` (8,), the per-sample guess).

Forward applying the operator to the whole input (``operator(input, out=output)``) says its
domain is the input's shape: the stand-in's shapes are that, and the Function (backward the
adjoint, written with ``out=``) passes. Where nothing says so and a shape guess makes backward
raise, the row is INCOMPLETE with ``unconfirmed-guess`` naming the shape that passed. Planted
wrong backwards (the adjoint of a flipped gradient) FAIL in both. Reduced cases written here;
the reference, for a linear map ``x @ M.T``, is autograd's ``g @ M``.
"""

import json

import torch

WHOLE = """
import itertools


class ApplyOperator(Function):
    @staticmethod
    def forward(ctx, input, operator, num_extra_dims=0):
        extra = input.size()[:num_extra_dims]
        ctx.operator = operator
        ctx.extra = extra
        output = input.new_empty(extra + operator.range_shape)
        if len(extra) == 0:
            operator(input, out=output)
        else:
            for idx in itertools.product(*[range(n) for n in extra]):
                operator(input[idx], out=output[idx])
        return output

    @staticmethod
    def backward(ctx, grad_output):
        operator = ctx.operator
        extra = ctx.extra
        grad_input = grad_output.new_empty(extra + operator.domain_shape)
        if len(extra) == 0:
            operator.T({g}, out=grad_input)
        else:
            for idx in itertools.product(*[range(n) for n in extra]):
                operator.T({g}[idx], out=grad_input[idx])
        return grad_input, None, None
"""

GUESSED = """
class Adjointed(Function):
    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        return op(x[...])

    @staticmethod
    def backward(ctx, g):
        op = ctx.op
        grad = g.new_empty(op.domain_shape)
        op.T({g}, out=grad)
        return grad, None
"""


def _row(gradsmith_cli, write, name, text):
    path = write(f"{name}.py", text)
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--no-compat", "--format", "json")
    row, = json.loads(out)["results"]
    return code, row


def test_an_operator_applied_whole_has_the_input_shape_and_passes(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "whole", WHOLE.format(g="grad_output"))
    assert (code, row["verdict"]) == (0, "pass"), row["text"]
    assert "domain_shape, range_shape = (3, 4)" in row["inputs"]
    # by hand: the adjoint of x @ M.T is g @ M, autograd's gradient
    m = torch.randn(4, 4, dtype=torch.float64)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64)
    (x @ m.T).backward(g)
    torch.testing.assert_close(g @ m, x.grad)


def test_a_wrong_adjoint_applied_whole_fails(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "whole", WHOLE.format(g="grad_output.flip(-1)"))
    assert (code, row["verdict"], row["error"]) == (1, "fail", None), row["text"]
    assert "gradient-mismatch" in {f["code"] for f in row["report"]["findings"]
                                   if f["severity"] == "error"}


def test_an_error_of_a_guessed_shape_is_incomplete(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "guessed", GUESSED.format(g="g"))
    assert code != 0 and row["error"] == "incomplete", row["text"]
    findings = row["report"]["findings"]
    assert not [f for f in findings if f["severity"] == "error"], row["text"]
    said, = [f for f in findings if f["code"] == "unconfirmed-guess"]
    assert said["input"] == "op" and "domain_shape = (3, 4)" in said["message"]


def test_a_wrong_adjoint_with_a_guessed_shape_still_fails(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "guessed", GUESSED.format(g="g.flip(-1)"))
    assert (code, row["verdict"], row["error"]) == (1, "fail", None), row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert errors and all(f["details"].get("guessed") == ["op"] for f in errors)
    assert not [f for f in row["report"]["findings"] if f["code"] == "unconfirmed-guess"]
