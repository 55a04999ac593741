"""Spike logic gates (0/1 inputs, a truth table in the docstring) are checked at 0/1 inputs
against the multilinear gradient f(x_j = 1) - f(x_j = 0): an exact gate written with
``relu``, ``== 0`` or ``% 2`` passes, a swapped or negated gradient fails, and a surrogate that
follows its table (not the multilinear gradient) is an ``undeclared-estimator``."""

from __future__ import annotations

import torch
from torch.autograd import Function

import gradsmith
from gradsmith.checker.binary_domain import truth_table

TABLE_XOR = """Exclusive or of two spike tensors.

    x y z dx dy
    0 0 0  1  1
    0 1 1 -1  1
    1 0 1  1 -1
    1 1 0 -1 -1
    """


def _gate(forward, backward, doc):
    class Gate(Function):
        @staticmethod
        def forward(x, y):
            return forward(x, y)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx, gy = backward(x, y)
            return gx * g, gy * g

    Gate.__doc__ = doc
    return Gate


def _xor_exact(x, y):
    return 1 - 2 * y, 1 - 2 * x  # autograd of x + y - 2xy, independently written


def _report(cls):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    y = torch.randn(3, 4, dtype=torch.float64, generator=gen)
    return gradsmith.check(cls, x, y, checks=["gradients"])


def test_exact_gates_written_off_the_polynomial_pass():
    iand_doc = TABLE_XOR.replace("0 1 1 -1  1\n    1 0 1  1 -1\n    1 1 0 -1 -1",
                                 "0 1 1 -1  1\n    1 0 0  0  0\n    1 1 0 -1  0")
    iand_doc = iand_doc.replace("0 0 0  1  1", "0 0 0  0  1")
    cases = [
        _gate(lambda x, y: (x + y) % 2, _xor_exact, TABLE_XOR),
        _gate(lambda x, y: torch.relu(y - x), lambda x, y: (-y, 1 - x), iand_doc),
    ]
    for cls in cases:
        report = _report(cls)
        assert report.passed, report.errors
        assert any(f.code == "binary-domain" for f in report.findings)


def test_multilinear_reference_agrees_with_autograd_of_the_polynomial():
    x = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64, requires_grad=True)
    (x + y - 2 * x * y).sum().backward()
    want = torch.stack([x.grad, y.grad])
    with torch.no_grad():
        got = torch.stack([(1 + y) % 2 - (0 + y) % 2, (x + 1) % 2 - (x + 0) % 2])
    assert torch.equal(got, want)


def test_planted_wrong_gates_still_fail():
    swapped = _gate(lambda x, y: (x + y) % 2, lambda x, y: (1 - 2 * x, 1 - 2 * y), TABLE_XOR)
    negated = _gate(lambda x, y: (x + y) % 2, lambda x, y: (2 * y - 1, 1 - 2 * x), TABLE_XOR)
    for cls in (swapped, negated):
        report = _report(cls)
        assert not report.passed
        assert any(f.code == "gradient-mismatch" for f in report.errors), report.errors


def test_a_surrogate_following_its_own_table_is_an_estimator():
    doc = TABLE_XOR.replace("1 1 0 -1 -1", "1 1 0  0  0")  # surrogate: no gradient at (1, 1)
    cls = _gate(lambda x, y: (x + y) % 2,
                lambda x, y: ((1 - 2 * y) * (1 - x * y), (1 - 2 * x) * (1 - x * y)), doc)
    report = _report(cls)
    assert [f.code for f in report.errors] == ["undeclared-estimator"]
    assert report.errors[0].details.get("binary_domain")  # found at 0/1 inputs


def test_a_table_not_describing_forward_is_not_used():
    cls = _gate(lambda x, y: x * y, lambda x, y: (y, x), TABLE_XOR)  # AND under an XOR table
    report = _report(cls)
    assert report.passed
    assert not any(f.code == "binary-domain" for f in report.findings)


def test_truth_table_needs_every_combination():
    assert truth_table("x y z\n0 0 0\n1 1 1", ["x", "y"]) is None
    assert truth_table(TABLE_XOR, ["x", "y"])["grads"] == {"x": 3, "y": 4}


SURROGATE_TABLE = TABLE_XOR.replace("1 1 0 -1 -1", "1 1 0  0  0")  # no gradient at (1, 1)


def _surrogate_xor():
    # the table's surrogate: exact but at (1, 1), where it returns nothing
    return _gate(lambda x, y: (x + y) % 2,
                 lambda x, y: ((1 - 2 * y) * (1 - x * y), (1 - 2 * x) * (1 - x * y)),
                 SURROGATE_TABLE)


def _pasted(cls, line):
    def capture(factory, **kwargs):
        return factory, kwargs

    factory, kwargs = eval(line.lstrip("@").replace("gradsmith.example(", "capture(", 1),
                           {"torch": torch, "capture": capture})
    return gradsmith.check(cls, *factory(), compat=False, **kwargs)


def test_a_surrogates_printed_declaration_passes_as_pasted():
    cls = _surrogate_xor()
    found = _report(cls).errors[0]
    assert found.details["verified"]
    report = _pasted(cls, found.details["declaration"])
    assert report.passed, report.errors


def test_a_planted_wrong_surrogate_fails_its_declaration():
    line = _report(_surrogate_xor()).errors[0].details["declaration"]
    negated = _gate(lambda x, y: (x + y) % 2,
                    lambda x, y: (-(1 - 2 * y) * (1 - x * y), (1 - 2 * x) * (1 - x * y)),
                    SURROGATE_TABLE)
    report = _pasted(negated, line)
    assert "intended-mismatch" in report.codes("error")


def test_a_markdown_table_of_a_one_input_gate():
    doc = "NOT of a spike tensor.\n\n| x | z | dx |\n|---|---|----|\n| 0 | 1 | -1 |\n| 1 | 0 | -1 |\n"

    def make(sign):
        class Not(Function):
            @staticmethod
            def forward(ctx, x):
                return (x == 0).to(x)

            @staticmethod
            def backward(ctx, g):
                return sign * g  # d(1 - x)/dx = -1 (sign -1); +1 is the planted error

        Not.__doc__ = doc
        return Not

    x = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert gradsmith.check(make(-1), x, checks=["gradients"]).passed
    wrong = gradsmith.check(make(1), x, checks=["gradients"])
    assert "gradient-mismatch" in wrong.codes("error")


def test_a_large_input_is_checked_on_drawn_elements():
    gen = torch.Generator().manual_seed(2)
    x, y = (torch.randn(40, 40, dtype=torch.float64, generator=gen) for _ in range(2))
    right = _gate(lambda x, y: (x + y) % 2, _xor_exact, TABLE_XOR)
    wrong = _gate(lambda x, y: (x + y) % 2, lambda x, y: (1 - 2 * y, 2 * x - 1), TABLE_XOR)
    assert gradsmith.check(right, x, y, checks=["gradients"]).passed
    assert "gradient-mismatch" in gradsmith.check(wrong, x, y, checks=["gradients"]).codes(
        "error")
