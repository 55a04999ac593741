"""A FAIL on synthesised inputs must hold on the project's own inputs (corpus 12a held-out: a
Householder product, written for unit-norm columns that its project's wrapper makes before
``apply``, FAILed gradient-mismatch on Gaussian columns).

The check re-runs the failing checks on what the project's caller passes to ``apply``: a
backward right there is not shown wrong, so the row is INCOMPLETE with ``unconfirmed-guess``
saying what differs (the column norms); a backward wrong on the project's inputs too keeps its
FAIL. Reduced case written here: ``u * |u|`` row-wise, whose gradient on unit-norm rows is
``g + u (u . g)`` (compared with autograd of the expression).
"""

import json

import torch

UNIT = """
class UnitScale(Function):
    @staticmethod
    def forward(ctx, u):
        ctx.save_for_backward(u)
        return u * u.norm(dim=-1, keepdim=True)

    @staticmethod
    def backward(ctx, g):
        u, = ctx.saved_tensors
        # written for unit-norm rows: |u| = 1
        return g + {factor}u * (u * g).sum(-1, keepdim=True)


def unit_scale(x):
    u = x / x.norm(dim=-1, keepdim=True)
    return UnitScale.apply(u)
"""


def _row(gradsmith_cli, write, factor):
    path = write("unit.py", UNIT.format(factor=factor))
    code, out, _ = gradsmith_cli(f"{path}::UnitScale", "--no-isolate", "--no-compat",
                                 "--format", "json")
    row, = json.loads(out)["results"]
    return code, row


def test_a_backward_right_on_the_project_inputs_is_incomplete(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "")
    assert code != 0 and row["verdict"] != "pass" and row["error"] == "incomplete", row["text"]
    findings = row["report"]["findings"]
    assert not [f for f in findings if f["severity"] == "error"], row["text"]
    said, = [f for f in findings if f["code"] == "unconfirmed-guess"]
    assert said["input"] == "u" and "unit_scale(x)" in said["message"]
    assert "project's own inputs" in said["message"]
    assert "norms in [1, 1]" in said["message"]
    # by hand: on unit rows the backward is autograd's gradient of u * |u|
    u = torch.nn.functional.normalize(torch.randn(3, 4, dtype=torch.float64), dim=-1)
    u.requires_grad_()
    g = torch.randn(3, 4, dtype=torch.float64)
    (u * u.norm(dim=-1, keepdim=True)).backward(g)
    torch.testing.assert_close(g + u.detach() * (u.detach() * g).sum(-1, keepdim=True), u.grad)


def test_a_backward_wrong_on_the_project_inputs_still_fails(gradsmith_cli, write):
    code, row = _row(gradsmith_cli, write, "2 * ")
    assert (code, row["verdict"], row["error"]) == (1, "fail", None), row["text"]
    errors = [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert "gradient-mismatch" in {f["code"] for f in errors}
    assert not [f for f in row["report"]["findings"] if f["code"] == "unconfirmed-guess"]


NO_WRAPPER_TEST = """
import torch

from unit import UnitScale


def test_unit_scale():
    u = torch.nn.functional.normalize(torch.randn(3, 4, dtype=torch.float64), dim=-1)
    y = UnitScale.apply(u.requires_grad_())
    y.sum().backward()
"""


def _tested(gradsmith_cli, write, factor):
    write("pyproject.toml", "[project]\nname = 'unit'\n", header=False)
    write("tests/test_unit.py", NO_WRAPPER_TEST, header=False)
    path = write("unit.py", UNIT.split("\n\ndef unit_scale")[0].format(factor=factor) + "\n")
    code, out, _ = gradsmith_cli(f"{path}::UnitScale", "--no-isolate", "--no-compat",
                                 "--format", "json")
    row, = json.loads(out)["results"]
    return code, row


def test_the_project_tests_inputs_are_a_candidate_too(gradsmith_cli, write):
    code, row = _tested(gradsmith_cli, write, "")
    assert code != 0 and row["error"] == "incomplete", row["text"]
    said, = [f for f in row["report"]["findings"] if f["code"] == "unconfirmed-guess"]
    assert "test_unit" in said["message"] and "row norms in [1, 1]" in said["message"]


def test_a_backward_wrong_on_the_project_tests_inputs_still_fails(gradsmith_cli, write):
    code, row = _tested(gradsmith_cli, write, "2 * ")
    assert (code, row["verdict"], row["error"]) == (1, "fail", None), row["text"]
    assert not [f for f in row["report"]["findings"] if f["code"] == "unconfirmed-guess"]
