"""GS301: an expensive gradient computed for an input that may not need one.

Reported once per backward, and only for work that provably flows into exactly one returned
gradient: a matrix product or convolution (resolved to torch, or ``@``) whose result reaches
one slot of the returned tuple only. Unresolved calls (einops, collectives, fused kernels that
return several gradients at once) are never counted: skipping them would skip other gradients.
"""

from __future__ import annotations

import ast

from gradsmith.linter import _tensors as T
from gradsmith.linter._evidence import evidence
from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter._symbols import dotted, statements
from gradsmith.linter.rules._common import nodes, own, short

_H = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n"
GS301 = Rule(
    "GS301", "needs-input-grad", "info",
    "backward computes an expensive gradient without checking ctx.needs_input_grad",
    "A matrix product or convolution that feeds only one input's gradient runs even when that "
    "input needs none (frozen weights, data), and its result is thrown away.",
    "compute it under `if ctx.needs_input_grad[i]:` and return None otherwise.",
    bad=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x @ w\n\n"
    "    @staticmethod\n    def backward(ctx, g):  # GS301\n        x, w = ctx.saved_tensors\n"
    "        return g @ w.t(), x.t() @ g\n",
    good=_H + "    def forward(ctx, x, w):\n        ctx.save_for_backward(x, w)\n        return x @ w\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        x, w = ctx.saved_tensors\n"
    "        gx = g @ w.t() if ctx.needs_input_grad[0] else None\n"
    "        gw = x.t() @ g if ctx.needs_input_grad[1] else None\n        return gx, gw\n",
    brief="gradient computed without needs_input_grad",
)
#: Tensor methods that are matrix products whatever the receiver.
_METHODS = frozenset({"mm", "bmm", "matmul", "addmm", "baddbmm", "addbmm"})


def _expensive(node: ast.AST, resolve) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    if not isinstance(node, ast.Call):
        return False
    parts = dotted(node.func)
    if not parts:
        return False
    qual = resolve(parts)
    if qual:
        return parts[-1] in T.EXPENSIVE
    return isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS and len(parts) == 2


class _Deps:
    """Which expensive nodes each local name (may) depend on; union over all assignments."""

    def __init__(self, resolve) -> None:
        self.resolve = resolve
        self.env: dict[str, set[int]] = {}
        self.node_of: dict[int, ast.AST] = {}

    def of(self, expr: ast.AST | None) -> set[int]:
        out: set[int] = set()
        if expr is None:
            return out
        for node in walk_shallow(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                out |= self.env.get(node.id, set())
            elif _expensive(node, self.resolve):
                out.add(id(node))
                self.node_of[id(node)] = node
        return out

    def bind(self, target: ast.AST, deps: set[int]) -> None:
        for node in walk_shallow(target):
            if isinstance(node, ast.Name):
                self.env.setdefault(node.id, set()).update(deps)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            deps = self.of(stmt.value)
            for target in stmt.targets:
                self.bind(target, deps)
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
            self.bind(stmt.target, self.of(stmt.value))
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.bind(stmt.target, self.of(stmt.iter))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func  # gw.add_(x.t() @ g): the receiver accumulates
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and T.is_inplace_name(func.attr):
                self.bind(func.value, self.of(stmt.value))


@checker(GS301)
def check_needs_input_grad(facts: Facts, report) -> None:
    inputs = facts.inputs
    if inputs is None or (len(inputs[0]) < 2 and not inputs[2]):
        return
    for method in own(facts, "backward"):
        ctx = facts.ctx_of(method)
        body = list(nodes(method))
        if any(isinstance(n, ast.Attribute) and n.attr == "needs_input_grad" for n in body):
            continue
        if any(isinstance(n, ast.Call) and any(isinstance(a, ast.Name) and a.id == ctx
                                               for a in n.args) for n in body):
            continue  # a helper receives ctx and may check needs_input_grad itself
        found = _exclusive_work(facts, method)
        if found is not None:
            node, slot = found
            report("GS301", method.source, method.node,
                   f"`{slot}`'s gradient alone needs `{short(method.source.segment(node), 24)}`")


def _exclusive_work(facts: Facts, method) -> tuple[ast.AST, str] | None:
    """An expensive node flowing into exactly one returned gradient, and that input's name."""
    params, _, vararg = facts.inputs
    fwd = facts.method("forward")
    ev = evidence(fwd, params, facts.ctx_of(fwd), facts.resolver(fwd)) if fwd else {}
    deps = _Deps(facts.resolver(method))
    returns = []
    for stmt in statements(method.node.body):
        deps.statement(stmt)
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple):
            returns.append(stmt.value)
    for value in returns:
        elts = value.elts
        if any(isinstance(e, ast.Starred) for e in elts):
            continue
        slots = [
            (i, deps.of(e)) for i, e in enumerate(elts)
            if not (isinstance(e, ast.Constant) and e.value is None)
            and (i < len(params) or vararg)
        ]
        if len(slots) < 2:
            continue  # at most one gradient: backward only runs when it is needed
        for i, own_deps in sorted(slots, key=lambda s: s[0] == 0):  # weights first
            others = set().union(*(d for j, d in slots if j != i))
            exclusive = own_deps - others
            name = params[i] if i < len(params) else f"input {i}"
            if exclusive and ev.get(name) is not False:
                node = min((deps.node_of[k] for k in exclusive),
                           key=lambda n: (n.lineno, n.col_offset))
                return node, name
    return None
