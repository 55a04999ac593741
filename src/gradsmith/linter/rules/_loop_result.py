"""GS238: forward/backward builds a collection in a loop, never uses it, and returns the
loop's last value instead."""

from __future__ import annotations

import ast

from gradsmith.linter._facts import Facts
from gradsmith.linter._flow import walk_shallow
from gradsmith.linter._registry import Rule, checker
from gradsmith.linter.rules._common import own

_H = "import torch\n\n\nclass PerType(torch.autograd.Function):\n    @staticmethod\n" \
     "    def forward(ctx, feats):\n        outs = {}\n        for key, x in feats.items():\n" \
     "            out = x * 2\n            outs[key] = out\n"
GS238 = Rule(
    "GS238", "loop-result-dropped", "warning",
    "a collection filled in a loop is never used, and the return gives the loop's last value",
    "`outs[key] = out` in the loop, then `return f(out)` after it: the returned value is "
    "whatever the last iteration left in `out`, and every other item is dropped (right only "
    "when the loop runs exactly once). For backward, the gradients of every other item are "
    "lost; for forward, the output is the wrong tensor.",
    "return the collection (`return f(outs)`), or drop it if the last value is really meant.",
    bad=_H + "        return out  # GS238\n\n    @staticmethod\n    def backward(ctx, g):\n"
    "        return {k: v * 2 for k, v in g.items()}\n",
    good=_H + "        return outs\n\n    @staticmethod\n    def backward(ctx, g):\n"
    "        return {k: v * 2 for k, v in g.items()}\n",
    brief="loop result dropped: the return gives the last iteration's value",
)
_EMPTY = ("dict", "list", "OrderedDict")


@checker(GS238)
def check_loop_result_dropped(facts: Facts, report) -> None:
    for method in own(facts, "forward", "backward"):
        body = method.node.body
        for i, stmt in enumerate(body):
            if not isinstance(stmt, (ast.For, ast.AsyncFor)):
                continue
            after = body[i + 1:]
            for coll, item in _collected(stmt):
                if not _empty_before(body[:i], coll) or _loads(after, coll):
                    continue
                ret = _return_reading(after, item)
                if ret is not None:
                    report("GS238", method.source, ret,
                           f"`{item}` (last iteration); `{coll}`, filled in the loop, is unused")
                    break


def _collected(loop: ast.For) -> list[tuple[str, str]]:
    """(collection, item) for ``coll[k] = item`` and ``coll.append(item)`` in the loop,
    where ``item`` is a name the loop itself binds."""
    bound = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Store)}
    found = []
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Subscript) and isinstance(node.targets[0].value, ast.Name) \
                and isinstance(node.value, ast.Name):
            found.append((node.targets[0].value.id, node.value.id))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "append" and isinstance(node.func.value, ast.Name) \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            found.append((node.func.value.id, node.args[0].id))
    return [(c, i) for c, i in found if i in bound and c != i]


def _empty_before(stmts: list[ast.stmt], name: str) -> bool:
    """``name = {}`` / ``[]`` / ``dict()`` / ``list()`` at the top level before the loop."""
    for stmt in stmts:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            value = stmt.value
            empty = isinstance(value, (ast.Dict, ast.List)) and not (
                getattr(value, "keys", None) or getattr(value, "elts", None))
            call = isinstance(value, ast.Call) and not value.args and not value.keywords \
                and isinstance(value.func, ast.Name) and value.func.id in _EMPTY
            if empty or call:
                return True
    return False


def _loads(stmts: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Store)
               for s in stmts for n in ast.walk(s))


def _return_reading(stmts: list[ast.stmt], name: str) -> ast.Return | None:
    """The first ``return`` after the loop that reads ``name``, not rebound before it."""
    for stmt in stmts:
        for node in walk_shallow(stmt):
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
                return None
            if isinstance(node, ast.Return) and node.value is not None and _loads(
                    [ast.Expr(node.value)], name):
                return node
    return None


__all__ = ["GS238"]
