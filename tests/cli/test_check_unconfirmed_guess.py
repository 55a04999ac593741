"""A FAIL on guessed inputs must hold on another guess (issue 18, round 12 task g).

Zero-configuration inputs give a callable argument a nonlinear stand-in (``tanh``): a Function
whose backward is right for the linear operators it is written for (the adjoint, taken as the
vjp at zero) then "disagrees" with finite differences, an error of the guess, not the
Function's. The check now re-checks such a row on another candidate synthesis knows for the
guessed argument (a seeded linear map): the correct Function passes there, so the row is
INCOMPLETE (exit non-zero, never PASS) with an ``unconfirmed-guess`` warning naming the
argument, the guess that failed and the candidate that passed; a backward that is wrong by a
factor of 2 fails on every candidate and keeps its FAIL, saying which argument was a guess.
The same holds for a data tensor the code reads as a mask (``keep != 0``), tried with 0/1
values; weights it only multiplies get no 0/1 candidate, so a wrong power of them still FAILs.
"""

import json

import torch

ADJOINT = """
class Adjoint(Function):
    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        ctx.shape = x.shape
        return op(x)

    @staticmethod
    def backward(ctx, g):
        _, pull = torch.func.vjp(ctx.op, torch.zeros(ctx.shape, dtype=g.dtype))
        return {factor}pull(g)[0], None
"""


def _row(gradsmith_cli, write, factor):
    path = write("adjoint.py", ADJOINT.format(factor=factor))
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--no-compat", "--format", "json")
    row, = json.loads(out)["results"]
    return code, row


def test_a_correct_adjoint_of_a_guessed_callable_is_incomplete_not_a_fail(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "")
    assert code != 0 and row["verdict"] != "pass" and row["error"] == "incomplete", row["text"]
    findings = row["report"]["findings"]
    assert not [f for f in findings if f["severity"] == "error"], row["text"]
    said, = [f for f in findings if f["code"] == "unconfirmed-guess"]
    assert said["input"] == "op" and said["details"]["incomplete"]
    assert "linear map" in said["message"] and "tanh" in said["message"]
    assert "@gradsmith.example" in said["hint"]
    # by hand: for a linear map op(x) = x @ M.T the adjoint is g @ M, which vjp at zero gives
    m = torch.randn(4, 4, dtype=torch.float64)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64)
    (x @ m.T).backward(g)
    _, pull = torch.func.vjp(lambda t: t @ m.T, torch.zeros(3, 4, dtype=torch.float64))
    torch.testing.assert_close(pull(g)[0], x.grad)


def test_a_wrong_adjoint_still_fails_and_says_the_callable_was_a_guess(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "2 * ")
    assert (code, row["verdict"]) == (1, "fail"), row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert {f["code"] for f in errors} == {"gradient-mismatch"}
    assert all(f["details"].get("guessed") == ["op"] for f in errors)
    assert "op was a guess" in errors[0]["message"] and "linear map" in errors[0]["message"]
    assert not [f for f in row["report"]["findings"] if f["code"] == "unconfirmed-guess"]


def test_a_wrong_gradient_with_nothing_guessed_is_a_plain_fail(gradsmith_cli, write):
    path = write("double.py", """
    class Double(Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 3 * g
    """)
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--no-compat", "--format", "json")
    row, = json.loads(out)["results"]
    assert (code, row["verdict"]) == (1, "fail")
    mismatch = [f for f in row["report"]["findings"] if f["code"] == "gradient-mismatch"]
    assert mismatch and mismatch[0]["severity"] == "error"
    assert "guessed" not in mismatch[0]["details"]


KEEP = """
class Keep(Function):
    @staticmethod
    def forward(ctx, x, keep):
        ctx.save_for_backward(keep)
        return x * keep

    @staticmethod
    def backward(ctx, g):
        keep, = ctx.saved_tensors
        return {grad}, None
"""


def _keep(gradsmith_cli, write, grad):
    path = write("keep.py", KEEP.format(grad=grad))
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--no-compat", "--format", "json")
    row, = json.loads(out)["results"]
    return code, row


def test_a_mask_backward_on_a_guessed_gaussian_mask_is_incomplete(gradsmith_cli, write):
    # written for a 0/1 keep pattern (g where keep is set): synthesis guessed Gaussian values
    code, row = _keep(gradsmith_cli, write, "g * (keep != 0)")
    assert code != 0 and row["error"] == "incomplete", row["text"]
    said, = [f for f in row["report"]["findings"] if f["code"] == "unconfirmed-guess"]
    assert said["input"] == "keep" and "of 0/1" in said["message"]
    # by hand: on a 0/1 keep, g * (keep != 0) is autograd's gradient of x * keep
    keep = (torch.arange(12) % 2).reshape(3, 4).double()
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, dtype=torch.float64)
    (x * keep).backward(g)
    torch.testing.assert_close(g * (keep != 0), x.grad)


def test_a_backward_that_inverts_the_mask_still_fails(gradsmith_cli, write):
    code, row = _keep(gradsmith_cli, write, "g * (keep == 0)")
    assert (code, row["verdict"], row["error"]) == (1, "fail", None), row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert {f["code"] for f in errors} == {"gradient-mismatch"}
    assert errors[0]["details"]["guessed"] == ["keep"] and "of 0/1" in errors[0]["message"]


def test_weights_only_multiplied_are_no_mask_so_a_wrong_power_still_fails(gradsmith_cli, write):
    # x * w with backward g * w * w: right on 0/1 weights only, and nothing reads w as a mask
    path = write("weighted.py", """
    class Weighted(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            w, = ctx.saved_tensors
            return g * w * w, None
    """)
    code, out, _ = gradsmith_cli(path, "--no-isolate", "--no-compat", "--format", "json")
    row, = json.loads(out)["results"]
    assert (code, row["verdict"], row["error"]) == (1, "fail", None), row["text"]
    assert "gradient-mismatch" in {f["code"] for f in row["report"]["findings"]
                                   if f["severity"] == "error"}
    assert not [f for f in row["report"]["findings"] if f["code"] == "unconfirmed-guess"]
