"""The ``forward(*args)`` + ``setup_context`` rewrite of an old-style Function, from its source.

Statements of the old forward that use ``ctx`` move to ``setup_context``; the rest stays in
forward. A moved statement that needs a value forward computed (not an input, not the
output) is flagged: recompute it in setup_context or return it as an extra output marked
non-differentiable.
"""

from __future__ import annotations

import ast
import inspect
import textwrap


def setup_context_rewrite(cls: type) -> str | None:
    """Suggested code for ``cls`` (None when its source is unavailable or unusual).

    Example:
        >>> import torch
        >>> class Exp(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         y = x.exp()
        ...         ctx.save_for_backward(y)
        ...         return y
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (y,) = ctx.saved_tensors
        ...         return g * y
        >>> print(setup_context_rewrite(Exp))  # doctest: +SKIP
    """
    try:
        source = textwrap.dedent(inspect.getsource(cls.forward))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0] if tree.body and isinstance(tree.body[0], ast.FunctionDef) else None
    if fn is None or not fn.args.args:
        return None
    ctx = fn.args.args[0].arg
    params = [a.arg for a in fn.args.args[1:]]
    returns = [s for s in fn.body if isinstance(s, ast.Return)]
    if len(returns) != 1 or returns[-1] is not fn.body[-1]:
        return None
    out_name = _output_name(returns[0])
    moved, kept = [], []
    for stmt in fn.body:
        (moved if _uses(stmt, ctx) and not isinstance(stmt, ast.Return) else kept).append(stmt)
    if not moved:
        return None
    known = set(params) | {ctx} | ({out_name} if out_name else set())
    needs = sorted({n for s in moved for n in _names(s)} - known - _assigned(moved)
                   - set(dir(__builtins__)) - _module_names(cls))
    inputs = ", ".join(params) + ("," if len(params) == 1 else "")
    lines = ["@staticmethod", f"def forward({', '.join(params)}):"]
    lines += [f"    {ln}" for s in kept for ln in ast.unparse(s).splitlines()]
    lines += ["", "@staticmethod", f"def setup_context({ctx}, inputs, output):",
              f"    {inputs} = inputs"]
    if out_name:
        lines.append(f"    {out_name} = output")
    lines += [f"    {ln}" for s in moved for ln in ast.unparse(s).splitlines()]
    if needs:
        lines.append(f"    # {', '.join(needs)}: computed in forward; recompute it here or "
                     "return it as an extra output (ctx.mark_non_differentiable)")
    return "\n".join(f"    {ln}" if ln else "" for ln in lines)


def _uses(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}


def _assigned(stmts: list[ast.stmt]) -> set[str]:
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)}


def _output_name(ret: ast.Return) -> str | None:
    return ret.value.id if isinstance(ret.value, ast.Name) else None


def _module_names(cls: type) -> set[str]:
    module = inspect.getmodule(cls)
    return set(vars(module)) if module is not None else set()
