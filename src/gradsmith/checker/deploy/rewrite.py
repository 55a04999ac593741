"""The ``forward(*args)`` + ``setup_context`` rewrite of an old-style Function, from its source.

Statements of the old forward that use ``ctx`` move to ``setup_context``; the rest stays in
forward. A moved statement that needs a value forward computed (not an input, not the
output) is flagged: recompute it in setup_context or return it as an extra output marked
non-differentiable. A tensor kept as a ctx attribute (``ctx.x = x``: torch.func sees no
such tensor) is saved with ``ctx.save_for_backward`` instead, and backward, shown too, reads
it back from ``ctx.saved_tensors``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap


def setup_context_rewrite(cls: type, tensor_attrs: set[str] | frozenset[str] = frozenset()
                          ) -> str | None:
    """Suggested code for ``cls`` (None when its source is unavailable or unusual).

    Args:
        cls: an old-style Function (``forward(ctx, ...)``).
        tensor_attrs: ctx attributes that hold tensors (the hygiene check's
            ``tensor-on-ctx`` findings): saved with ``save_for_backward`` in the rewrite.

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
    saved = _saved_attributes(cls, ctx, moved, set(tensor_attrs))
    backward = None
    if saved is not None:
        moved, backward = saved
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
    if backward:
        lines += ["", "@staticmethod", *backward.splitlines()]
    return "\n".join(f"    {ln}" if ln else "" for ln in lines)


def _saved_attributes(cls: type, ctx: str, moved: list[ast.stmt], tensors: set[str]
                      ) -> tuple[list[ast.stmt], str] | None:
    """``moved`` with each ``ctx.<tensor attribute> = value`` folded into the one
    ``ctx.save_for_backward(...)``, and backward's source reading them back; None when there
    is nothing to fold or the code is unusual (two saves, a save inside a branch, a backward
    whose source is unavailable)."""
    stores = [s for s in moved if isinstance(s, ast.Assign) and len(s.targets) == 1
              and _is_ctx_attr(s.targets[0], ctx) and s.targets[0].attr in tensors]
    if not stores:
        return None
    saves = [s for s in moved if _is_save(s, ctx)]
    if len(saves) > 1 or any(_is_save(n, ctx) for s in moved if s not in saves
                             for n in ast.walk(s)) or any(
            isinstance(n, ast.Starred) for s in saves for n in ast.walk(s)):
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.backward)))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0] if tree.body and isinstance(tree.body[0], ast.FunctionDef) else None
    if fn is None or not fn.args.args:
        return None
    before = list(saves[0].value.args) if saves else []
    attrs = [s.targets[0].attr for s in stores]
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    local = {a: a if a not in taken else f"saved_{a}" for a in attrs}
    call = ast.Expr(ast.Call(ast.Attribute(ast.Name(ctx, ast.Load()), "save_for_backward",
                                           ast.Load()),
                             before + [s.value for s in stores], []))
    first = saves[0] if saves else stores[0]
    folded = [call if s is first else s for s in moved if s is first or (
        s not in stores and s not in saves)]
    fn.body = [_ReadSaved(fn.args.args[0].arg, local, len(before)).visit(s) for s in fn.body]
    names = ", ".join(local[a] for a in attrs) + ("," if len(attrs) == 1 else "")
    where = f"ctx_saved[{len(before)}:]" if before else "ctx_saved"
    unpack = ast.parse(f"{names} = {where}").body[0]
    unpack = _ReadSaved(fn.args.args[0].arg, {}, 0, whole=True).visit(unpack)
    fn.body.insert(_after_docstring(fn), unpack)
    fn.decorator_list = [d for d in fn.decorator_list if not (
        isinstance(d, ast.Name) and d.id == "staticmethod")]
    return folded, ast.unparse(ast.fix_missing_locations(tree))


class _ReadSaved(ast.NodeTransformer):
    """In backward: ``ctx.<attr>`` -> its local name; ``ctx.saved_tensors`` -> the part the
    original save held (``[:n]``), or all of it (``whole``, for the added unpacking)."""

    def __init__(self, ctx: str, local: dict[str, str], n: int, whole: bool = False) -> None:
        self.ctx, self.local, self.n, self.whole = ctx, local, n, whole

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if _is_ctx_attr(node, self.ctx) and node.attr in self.local and isinstance(
                node.ctx, ast.Load):
            return ast.copy_location(ast.Name(self.local[node.attr], ast.Load()), node)
        if _is_ctx_attr(node, self.ctx) and node.attr == "saved_tensors" and not self.whole:
            return ast.copy_location(ast.Subscript(node, ast.Slice(None, ast.Constant(
                self.n)), ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if self.whole and node.id == "ctx_saved":
            return ast.copy_location(ast.Attribute(ast.Name(self.ctx, ast.Load()),
                                                   "saved_tensors", ast.Load()), node)
        return node


def _is_ctx_attr(node: ast.AST, ctx: str) -> bool:
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == ctx)


def _is_save(node: ast.AST, ctx: str) -> bool:
    call = node.value if isinstance(node, ast.Expr) else node
    return (isinstance(call, ast.Call) and _is_ctx_attr(call.func, ctx)
            and call.func.attr == "save_for_backward")


def _after_docstring(fn: ast.FunctionDef) -> int:
    first = fn.body[0] if fn.body else None
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
               and isinstance(first.value.value, str))


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
