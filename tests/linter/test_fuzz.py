"""Generated programs never crash the linter (no exception, no GS003 internal error)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradsmith.linter import lint

NAMES = ["x", "g", "ctx", "y", "w", "out", "grads", "args", "inputs", "output", "None"]
ATOMS = st.sampled_from(NAMES + ["1", "2.0", "'s'", "(x, w)", "[g]", "ctx.saved_tensors",
                                 "ctx.needs_input_grad", "ctx.k", "x.shape", "()"])


def _expr(children):
    return st.one_of(
        st.builds(lambda a, b: f"{a}.{b}", children, st.sampled_from(
            ["data", "T", "detach()", "clone()", "view(-1)", "mul_(2)", "add_(1)", "t()",
             "numpy()", "item()", "saved_variables", "sum()", "zero_()", "shape"])),
        st.builds(lambda a, op, b: f"({a} {op} {b})", children,
                  st.sampled_from(["+", "*", "@", "<", "if x else", "and"]), children),
        st.builds(lambda a, b: f"{a}[{b}]", children, st.sampled_from(["0", "-1", ":", "x > 0"])),
        st.builds(lambda f, a: f"{f}({a})", st.sampled_from(
            ["torch.relu", "torch.relu_", "torch.zeros", "torch.Tensor", "Fn", "Fn.apply",
             "Fn.forward", "tuple", "len", "F.relu", "torch.no_grad"]), children),
        st.builds(lambda a: f"(*{a},)", children),
    )


EXPR = st.recursive(ATOMS, _expr, max_leaves=6)
STMT = st.one_of(
    st.builds(lambda t, e: f"{t} = {e}", st.sampled_from(NAMES[:9] + ["ctx.a", "x[0]", "a, b"]),
              EXPR),
    st.builds(lambda t, op, e: f"{t} {op}= {e}", st.sampled_from(["x", "g", "y", "x[0]"]),
              st.sampled_from(["+", "*", "-"]), EXPR),
    st.builds(lambda e: f"return {e}", EXPR),
    st.just("return"),
    st.builds(lambda e: f"ctx.save_for_backward({e})", EXPR),
    st.builds(lambda e: f"ctx.mark_dirty({e})", EXPR),
    st.builds(lambda e: e, EXPR),
    st.just("pass"),
)


def _block(stmts, depth):
    lines = []
    for i, s in enumerate(stmts):
        if i % 3 == 2 and depth < 2:
            lines.append(f"if {NAMES[i % 4]}:")
            lines += ["    " + line for line in _block(stmts[i:i + 2], depth + 1)]
        elif i % 5 == 4:
            lines.append("with torch.no_grad():")
            lines.append("    " + s)
        else:
            lines.append(s)
    return lines or ["pass"]


@st.composite
def programs(draw):
    base = draw(st.sampled_from(["torch.autograd.Function", "Function", "ag.Function", "Base"]))
    style = draw(st.booleans())
    out = ["import torch", "import torch.autograd as ag", "from torch.autograd import Function",
           "import torch.nn.functional as F", "", "class Base(Function):", "    pass", "",
           f"class Fn({base}):"]
    methods = [("forward", "x, w" if style else "ctx, x, w"), ("backward", "ctx, g")]
    if style:
        methods.append(("setup_context", "ctx, inputs, output"))
    for name, params in methods:
        if draw(st.booleans()):
            out.append("    @staticmethod")
        out.append(f"    def {name}({params}{draw(st.sampled_from(['', ', *args', '=1']))}):")
        body = _block(draw(st.lists(STMT, max_size=7)), 0)
        out += ["        " + line for line in body]
    out += ["", f"y = {draw(EXPR)}"]
    return "\n".join(out) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_functions_never_crash(src):
    findings = lint(source=src)
    assert not [f for f in findings if f.code == "GS003"], src


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    for f in lint(source=text + "\n"):
        assert f.code in ("GS001", "GS002") or f.code.startswith("GS")
