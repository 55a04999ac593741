"""Which names of a function hold a tensor as it arrived, with its strides, and what guards
them (GS221): a view, ``reshape``, indexing or a transpose keeps the strides; ``.contiguous()``,
``.stride()``, ``is_contiguous()``, a copy or a rebinding guards the whole family of names,
and so does a decorator that makes parameters contiguous (fla's ``@input_guard``)."""

from __future__ import annotations

import ast
import re

from gradsmith.linter._symbols import dotted

#: Calls and attributes whose result shares the tensor's memory with its strides.
_KEEP_STRIDES = frozenset({"view", "view_as", "reshape", "reshape_as", "flatten", "unflatten",
                           "unsqueeze", "squeeze", "expand", "expand_as", "t", "T", "mT",
                           "transpose", "permute", "movedim", "narrow", "select", "detach",
                           "unbind", "split", "chunk", "as_strided", "data"})
#: Attributes showing that the code minds the tensor's layout.
_GUARDS = frozenset({"contiguous", "stride", "strides", "is_contiguous", "clone", "data_ptr",
                     "copy_"})


def asserted_contiguous(func: ast.AST, grads: set[str]):
    """``assert g.is_contiguous()`` on a gradient as it arrived: `out.sum()` hands backward
    an expanded (stride 0) gradient and the assert raises where `.contiguous()` would copy."""
    root = {g: g for g in grads}
    for node in body_nodes(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            origin = strided_origin(node.value, root)
            if origin is not None:
                root[node.targets[0].id] = root[origin]
            else:
                root.pop(node.targets[0].id, None)
        elif isinstance(node, ast.Assert):
            for sub in ast.walk(node.test):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                        sub.func.attr == "is_contiguous" and isinstance(sub.func.value, ast.Name) \
                        and sub.func.value.id in root:
                    return node, sub.func.value.id
    return None


def decorator_guarded(func: ast.AST, where) -> set[str]:
    """Parameters a decorator makes contiguous before the call (fla's ``@input_guard``,
    ``@contiguous``): one named so, or one of the linted code whose body mentions
    contiguity; parameters it names in strings (``no_guard_contiguous=["dy"]``) are left out."""
    params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    guarded: set[str] = set()
    for dec in func.decorator_list:
        head = dec.func if isinstance(dec, ast.Call) else dec
        parts = dotted(head) or [""]
        node = where.find(head) if parts[-1] not in _NOT_GUARDS else None
        if _GUARD_NAME.search(parts[-1]) or isinstance(node, ast.FunctionDef) and any(
            "contiguous" in (getattr(n, "attr", None) or getattr(n, "id", "")).lower()
            for n in ast.walk(node)
        ):
            left_out = {c.value for c in ast.walk(dec) if isinstance(c, ast.Constant)}
            guarded |= params - left_out
    return guarded


_NOT_GUARDS = frozenset({"staticmethod", "classmethod", "once_differentiable", ""})
#: Decorator names that say so; the text pre-filter often leaves their module unparsed.
_GUARD_NAME = re.compile(r"contiguous|input_guard", re.I)


def raw_names(func: ast.AST, grads: set[str]) -> set[str]:
    """Names holding a gradient parameter's memory and strides, unless its family is guarded."""
    root = {g: g for g in grads}
    rebound: set[str] = set()
    for node in body_nodes(func):  # source order: aliases follow their origin
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            origin = strided_origin(node.value, root)
            for target in targets:
                # `(g,) = grad_outputs`, `a, b = g`: each element keeps its origin's strides
                unpacked = isinstance(target, (ast.Tuple, ast.List)) and all(
                    isinstance(e, ast.Name) for e in target.elts)
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        if origin is not None and (isinstance(target, ast.Name) or unpacked):
                            root[sub.id] = root.get(sub.id, root[origin])
                        else:
                            rebound.add(sub.id)
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and \
                strided_origin(node.iter, root) is not None:  # `for chunk in g.split(n)`
            root[node.target.id] = root[strided_origin(node.iter, root)]
        elif isinstance(node, (ast.For, ast.AugAssign, ast.NamedExpr, ast.withitem)):
            bound = node.optional_vars if isinstance(node, ast.withitem) else node.target
            if bound is not None:
                rebound.update(n.id for n in ast.walk(bound) if isinstance(n, ast.Name))
    guarded = {root[n] for n in rebound if n in root}
    for node in body_nodes(func):
        if isinstance(node, ast.Attribute) and node.attr in _GUARDS and isinstance(
                node.value, ast.Name) and node.value.id in root:
            guarded.add(root[node.value.id])
    return {n for n, r in root.items() if r not in guarded}


def strided_origin(expr: ast.expr, root: dict[str, str]) -> str | None:
    """The raw name ``expr`` is a strided alias of (``g``, ``g.t()``, ``g[0]``, ``g.view(...)``)."""
    while True:
        if isinstance(expr, ast.Name):
            return expr.id if expr.id in root else None
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Attribute) and expr.attr in _KEEP_STRIDES:
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                expr.func.attr in _KEEP_STRIDES:
            expr = expr.func.value
        else:
            return None


def is_raw(arg: ast.expr, raw: set[str]) -> bool:
    """``arg`` is a raw gradient name or a strided alias of one written inline (``g.t()``)."""
    return strided_origin(arg, dict.fromkeys(raw, "")) is not None


def body_nodes(func: ast.AST):
    """Nodes of a function body in source order, not entering nested functions or classes."""
    stack = list(reversed(func.body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


__all__ = ["asserted_contiguous", "body_nodes", "decorator_guarded", "is_raw", "raw_names",
           "strided_origin"]
