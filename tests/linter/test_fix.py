"""Safe fixes: exact rewrites, still-correct behaviour, convergence, invalid edits dropped."""

from __future__ import annotations

import textwrap

import pytest
import torch

from gradsmith.linter import fix, lint
from gradsmith.linter._finding import Edit
from gradsmith.linter._fix import apply_edits

HEAD = "import torch\n\n\nclass Fn(torch.autograd.Function):\n"
CASES = {
    "GS102": (
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        grad_output *= 1 + 1\n        return grad_output\n",
        "        grad_output = grad_output * (1 + 1)\n",
    ),
    "GS113": (
        "    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n        return grad_output * 2\n",
        "    @staticmethod\n    def forward(ctx, x):\n",
    ),
    "GS201": (
        "    @staticmethod\n    def forward(ctx, x):\n        return x.data * 2\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n        return grad_output * 2\n",
        "        return x.detach() * 2\n",
    ),
    "GS202": (
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
        "        return x * 2\n\n    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        (x,) = ctx.saved_variables\n        return grad_output * 2 + 0 * x\n",
        "        (x,) = ctx.saved_tensors\n",
    ),
}
CALLER = "\n\ndef double(x):\n    return {call}\n"


@pytest.mark.parametrize("code", sorted(CASES))
def test_fix_rewrites_and_keeps_gradients(code):
    body, expected_line = CASES[code]
    src = HEAD + body + CALLER.format(call="Fn.apply(x)")
    assert code in {f.code for f in lint(source=src)}
    fixed = fix(source=src).texts["<string>"]
    assert expected_line in fixed
    assert code not in {f.code for f in lint(source=fixed)}
    # The fixed Function computes the same value and gradient as plain PyTorch (2 * x).
    namespace: dict = {}
    exec(compile(fixed, "<fixed>", "exec"), namespace)
    x = torch.linspace(-1, 1, 5, dtype=torch.float64, requires_grad=True)
    y = namespace["double"](x)
    (gx,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(y, 2 * x)
    torch.testing.assert_close(gx, torch.full_like(x, 2.0))


@pytest.mark.parametrize(("call", "expected"), [
    ("Fn()(x)", "Fn.apply(x)"),
    ("Fn.forward(x)", "Fn.apply(x)"),
])
def test_direct_calls_are_rewritten_to_apply(call, expected):
    body = CASES["GS201"][0].replace("x.data", "x")
    src = HEAD + body + CALLER.format(call=call)
    fixed = fix(source=src).texts["<string>"]
    assert f"return {expected}\n" in fixed
    assert lint(source=fixed) == []


def test_unsafe_cases_get_no_fix():
    src = HEAD + textwrap.indent(textwrap.dedent("""\
        @staticmethod
        def forward(ctx, x, w):
            w.data.add_(1)
            x.data[0] = 0
            torch.nn.init.zeros_(w.data)
            y = x.data
            y.mul_(2)
            return x * w

        @staticmethod
        def backward(ctx, g):
            return g, g
    """), "    ") + "\n\ny = Fn(torch.ones(1), w=torch.ones(1))\n"
    findings = lint(source=src)
    assert [f.code for f in findings if f.code == "GS201"] == ["GS201"] * 4
    assert not any(f.fixable for f in findings if f.code in ("GS201", "GS111"))
    assert "<string>" not in fix(source=src).texts


def test_fixes_converge_and_are_idempotent():
    src = HEAD + (
        "    def forward(ctx, x):\n        return x.data * 2\n\n"
        "    def backward(ctx, g):\n        g *= 2\n        (x,) = ctx.saved_variables\n"
        "        return g\n"
    ) + CALLER.format(call="Fn()(x)")
    result = fix(source=src)
    fixed = result.texts["<string>"]
    assert result.applied == 6
    assert not [f for f in lint(source=fixed) if f.fixable]
    assert fix(source=fixed).texts == {}
    assert result.diffs["<string>"].startswith("--- a/<string>\n+++ b/<string>\n")


def test_instance_calls_are_reported_but_never_rewritten():
    """`Fn(x)` is wrong but `Fn.apply(x)` would change what runs; `Fn()` alone is a namespace
    (rewriting it to `Fn.apply()` would call forward with no arguments at import time)."""
    body = CASES["GS201"][0].replace("x.data", "x")
    src = HEAD + body + "\n\nns = Fn()\ny = Fn(torch.ones(1))\n"
    findings = lint(source=src)
    assert [(f.line, f.code, f.fixable) for f in findings] == [(15, "GS111", False)]
    assert fix(source=src).texts == {}


def test_legacy_call_with_constructor_arguments_gets_no_fix():
    body = CASES["GS201"][0].replace("x.data", "x")
    init = "    def __init__(self, k):\n        self.k = k\n\n"
    src = HEAD + init + body + CALLER.format(call="Fn(2)(x)")
    assert [(f.code, f.fixable) for f in lint(source=src)] == [("GS111", False)]


def test_edit_producing_invalid_python_is_dropped():
    text = "x = 1\ny = 2\n"
    good = Edit((1, 4), (1, 5), "3")
    bad = Edit((2, 0), (2, 1), "def")
    assert apply_edits(text, [good, bad]) == ("x = 3\ny = 2\n", 1)
    overlapping = Edit((1, 0), (1, 5), "z = 0")
    assert apply_edits(text, [good, overlapping])[1] == 1


def test_fix_writes_only_when_asked(tmp_path):
    path = tmp_path / "m.py"
    src = HEAD + CASES["GS202"][0]
    path.write_text(src)
    fix(path, config=False)
    assert path.read_text() == src
    fix(path, config=False, write=True)
    assert "ctx.saved_tensors" in path.read_text()
