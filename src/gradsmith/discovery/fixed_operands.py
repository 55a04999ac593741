"""A forward ``TypeError`` whose bad operand is the same object whatever the inputs (private).

Two mistakes give an operand whose *kind* no input can change:

- an ``autograd.Function`` class called directly, ``torch.clamp(DirectQuant(x, k), lo, hi)``
  (``.apply`` forgotten): calling the class builds a ``DirectQuant`` object whatever ``x`` and
  ``k`` are (its ``__init__`` and ``__new__`` are Function's, which take anything), and no
  torch function or tensor operator accepts one;
- a tensor method named without its call, ``(x / sc).abs >= 1``: ``.abs`` of a tensor is a
  bound method whatever the tensor holds, and ``>=`` with a method raises.

Each is proven from the error and forward's frame together, never guessed: the raising
expression (the span Python records) has the operand directly (an argument of the raising call,
an operand of the raising operator); the error names the operand's type (the class's name, a
method type at that operand's place); the class is found through the module's globals, not a
local; the method is one ``torch.Tensor`` defines. And the expression is evaluated on every call
that gets to its statement, a statement every call reaches
(:func:`gradsmith.discovery.never_returns.reached`). corpus 13 held-out: wageubn WeightQuant
and ErrorQuant were skips blaming the inputs.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import types

from gradsmith.discovery.never_returns import reached, unconditional
from gradsmith.discovery.source import dotted, function_def, through_namespaces

#: The types a method object has (``torch.Tensor.abs`` bound: ``builtin_function_or_method``).
_METHOD_TYPES = frozenset({"builtin_function_or_method", "method", "method-wrapper", "function"})
#: ``'>=' not supported between instances of 'A' and 'B'``, ``unsupported operand type(s) for
#: +: 'A' and 'B'``, ``bad operand type for unary -: 'A'``.
_PAIR = re.compile(r"(?:instances of|operand type\(s\) for [^:]+:) '([^']+)' and '([^']+)'")
_UNARY = re.compile(r"bad operand type for unary [^:]+: '([^']+)'")


def fixed_operand(exc: BaseException, frame: types.FrameType, line: int,
                  call: str) -> dict | None:
    """``{"operand", "kind", "owner"}`` when ``exc``, raised by ``call`` at ``line`` of forward's
    ``frame``, comes from an operand of a fixed kind (see the module's rules), else None.
    ``kind`` is ``"function-class"`` (``owner`` the class's name) or ``"method-object"``."""
    if not isinstance(exc, TypeError):
        return None
    try:
        top = ast.parse(call, mode="eval").body
    except SyntaxError:
        return None
    text = str(exc)
    for place, operand in _operands(top):
        owner = _function_class(operand, frame)
        if owner is not None and re.search(rf"\b{re.escape(owner)}\b", text):
            kind = "function-class"
        elif _tensor_method(operand) and _named_as_method(text, top, place):
            kind, owner = "method-object", ""
        else:
            continue
        if not _every_call(frame.f_code, line, top):
            return None
        return {"operand": ast.unparse(operand), "kind": kind, "owner": owner}
    return None


def _operands(top: ast.expr) -> list[tuple[int, ast.expr]]:
    """The raising expression's direct operands with their place (for the error's types)."""
    if isinstance(top, ast.Call):
        return [(i, a) for i, a in enumerate(top.args) if not isinstance(a, ast.Starred)] + \
            [(-1, k.value) for k in top.keywords]
    if isinstance(top, ast.BinOp):
        return [(0, top.left), (1, top.right)]
    if isinstance(top, ast.Compare) and len(top.ops) == 1:
        return [(0, top.left), (1, top.comparators[0])]
    if isinstance(top, ast.UnaryOp):
        return [(0, top.operand)]
    return []


def _function_class(node: ast.expr, frame: types.FrameType) -> str | None:
    """The name of the autograd.Function class ``node`` calls directly (found through the
    module's globals, with Function's own ``__init__``/``__new__``), or None."""
    import torch

    if not isinstance(node, ast.Call):
        return None
    func, path = dotted(node.func)
    code = frame.f_code
    if not isinstance(func, ast.Name) or func.id in (*code.co_varnames, *code.co_cellvars,
                                                     *code.co_freevars):
        return None
    value = through_namespaces(frame.f_globals.get(func.id, getattr(builtins, func.id, None)),
                               path)
    base = torch.autograd.Function
    if not (isinstance(value, type) and issubclass(value, base) and value is not base):
        return None
    if value.__init__ is not base.__init__ or value.__new__ is not base.__new__ or \
            type(value).__call__ is not type.__call__:
        return None  # a class that builds something else when called
    return value.__name__


def _tensor_method(node: ast.expr) -> bool:
    """``expr.name`` (not called) where ``name`` is a method of torch.Tensor."""
    import torch

    return isinstance(node, ast.Attribute) and \
        inspect.isroutine(getattr(torch.Tensor, node.attr, None))


def _named_as_method(text: str, top: ast.expr, place: int) -> bool:
    """Whether the error gives the operand at ``place`` a method type."""
    if isinstance(top, (ast.BinOp, ast.Compare)):
        m = _PAIR.search(text)
        return m is not None and m.group(place + 1) in _METHOD_TYPES
    if isinstance(top, ast.UnaryOp):
        m = _UNARY.search(text)
        return m is not None and m.group(1) in _METHOD_TYPES
    return any(re.search(rf"\b{re.escape(t)}\b", text) for t in _METHOD_TYPES - {"function"})


def _every_call(code: types.CodeType, line: int, top: ast.expr) -> bool:
    """Whether ``top`` (at ``line`` of the file) is evaluated whenever its statement runs,
    on a statement every call that has not raised reaches."""
    if (found := function_def(code)) is None:
        return False
    tree, start = found
    wanted = ast.unparse(top)
    return any(start + node.lineno - 1 == line and ast.unparse(node) == wanted
               for _, exprs in reached(tree.body) for expr in exprs
               for node in unconditional(expr) if isinstance(node, ast.expr))
