"""Defaults a Function's own module states for forward parameters that have none (private).

``forward(ctx, M, regularization, gradient_eps)`` has no defaults, but the function users call
does: ``def svd(M, regularization=0.0, gradient_eps=1e-12): return SVD.apply(M,
regularization, gradient_eps)``, or the docstring says ``gradient_eps: ... Default: 1e-12``.
Synthesis invented 0.5 and 1.5 instead, and a threshold of 1.5 zeroes real terms that the
backward deliberately drops only below a tiny one: a false alarm on a correct Function. The
first input set keeps the stated default; tolerance-like parameters (:func:`tolerance_like`)
are never moved in a variant. Read from the source, never by running it.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

from gradsmith.discovery.source import parse

_TOLERANCE_WORDS = ("eps", "tol")


def tolerance_like(name: str, default: Any = None) -> bool:
    """A tolerance or epsilon: the name says so, or its default is tiny. A threshold is one only
    when its default is small (``threshold=20`` in softplus switches a real branch: variants move it).

    Example:
        >>> tolerance_like("gradient_eps"), tolerance_like("beta", 1e-12), tolerance_like("beta", 1.0)
        (True, True, False)
        >>> tolerance_like("zero_thresh", 1e-8), tolerance_like("threshold", 20.0)
        (True, False)
    """
    lower = name.lower()
    if any(word in lower for word in _TOLERANCE_WORDS):
        return True
    small = isinstance(default, (int, float)) and not isinstance(default, bool) and \
        0 < abs(default) <= 1e-3
    if "thresh" in lower:
        return default is None or small
    return isinstance(default, float) and 0 < abs(default) < 1e-6


def stated_defaults(owner: Any, names: list[str]) -> dict[str, tuple[Any, str]]:
    """Defaults for forward parameters ``names`` (ctx excluded) that the Function's module
    states: name -> (value, where it was read).

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     '''Args: eps: guard of the division. Default: 1e-9.'''
        ...     @staticmethod
        ...     def forward(ctx, x, eps):
        ...         return x / (x.abs() + eps)
        >>> stated_defaults(F, ["x", "eps"])
        {'eps': (1e-09, 'its docstring')}
    """
    if not isinstance(owner, type):
        return {}
    found = _from_callers(owner, names)
    for text in (owner.__doc__, getattr(owner.forward, "__doc__", None)):
        for name in names:
            if name not in found and text and (value := _documented(text, name)) is not None:
                found[name] = (value, "its docstring")
    return found


def _from_callers(owner: type, names: list[str]) -> dict[str, tuple[Any, str]]:
    """``def f(x, eps=1e-12): return Owner.apply(x, eps)`` in the owner's module, also one
    wrapper further out (``def g(x, eps=1e-5): return _apply(x, eps)`` where ``_apply`` passes
    its parameters on to ``Owner.apply``); a number written in the call (``Owner.apply(w, 2,
    4)``); and a layer's setting (``Owner.apply(self.weight, self.N, self.M)`` in a class whose
    ``__init__(..., N=2, M=4)`` stores ``self.N = N``)."""
    tree = _module_tree(owner)
    found: dict[str, tuple[Any, str]] = {}
    if tree is None:
        return found
    funcs = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    settings = _class_settings(tree)  # method -> (class name, self attribute -> its default)
    # a wrapper's name -> its positional parameter i -> forward's parameter index
    wrappers: dict[str, dict[int, int]] = {}
    for depth in range(2):
        for func in funcs:
            defaults = _literal_defaults(func.args)
            params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
            klass, stored = settings.get(func, ("", {}))
            for call in ast.walk(func):
                slots = _target_slots(call, owner, wrappers, depth)
                if slots is None:
                    continue
                for i, arg in enumerate(call.args):
                    if i not in slots or slots[i] >= len(names):
                        continue
                    name = names[slots[i]]
                    if (number := _number(arg)) is not None:
                        found.setdefault(name, (number, f"the call in {func.name}()"))
                    elif _self_attribute(arg) in stored:
                        attr = _self_attribute(arg)
                        found.setdefault(name, (stored[attr], f"{klass}'s default {attr}"))
                    elif not isinstance(arg, ast.Name):
                        continue
                    elif arg.id in defaults:
                        found.setdefault(name, (defaults[arg.id], f"the default of {func.name}()"))
                    elif depth == 0 and arg.id in params:
                        wrappers.setdefault(func.name, {})[params.index(arg.id)] = slots[i]
    return found


def _number(node: ast.AST) -> int | float | None:
    """A number written in the code (``4``, ``-1``, ``1e-3``; not a bool)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id == "self":
        return node.attr
    return None


def _class_settings(tree: ast.AST) -> dict[ast.AST, tuple[str, dict[str, Any]]]:
    """Each method of a class whose ``__init__`` stores a numeric default on ``self``
    (``def __init__(self, ..., M=4): self.M = M``, or ``self.M = 4``) -> (the class's name,
    attribute -> that value)."""
    out: dict[ast.AST, tuple[str, dict[str, Any]]] = {}
    for klass in ast.walk(tree):
        if not isinstance(klass, ast.ClassDef):
            continue
        methods = [f for f in klass.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        init = next((f for f in methods if f.name == "__init__"), None)
        if init is None:
            continue
        defaults = _literal_defaults(init.args)
        stored: dict[str, Any] = {}
        for node in ast.walk(init):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            attr = _self_attribute(node.targets[0])
            if attr is None:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in defaults:
                stored.setdefault(attr, defaults[node.value.id])
            elif (number := _number(node.value)) is not None:
                stored.setdefault(attr, number)
        for method in methods:
            out[method] = (klass.name, stored)
    return out


def _target_slots(call: ast.AST, owner: type, wrappers: dict[str, dict[int, int]],
                  depth: int) -> dict[int, int] | None:
    """For a call to ``Owner.apply`` (depth 0) or to a wrapper of it (depth 1): which of its
    positional arguments land in which of forward's parameters."""
    if not isinstance(call, ast.Call):
        return None
    if depth == 0:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "apply" and \
                _names_owner(call.func.value, owner):
            return {i: i for i in range(len(call.args))}
        return None
    if isinstance(call.func, ast.Name):
        return wrappers.get(call.func.id)
    return None


def _module_tree(owner: type) -> ast.AST | None:
    """The owner's whole module, parsed (also one loaded without a sys.modules entry)."""
    module = inspect.getmodule(owner)
    if module is not None:
        return parse(module)
    try:
        with open(inspect.getsourcefile(owner.forward) or "", encoding="utf-8") as handle:
            return ast.parse(handle.read())
    except (OSError, TypeError, SyntaxError, ValueError):
        return None


def _names_owner(node: ast.AST, owner: type) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name == owner.__name__


def _literal_defaults(args: ast.arguments) -> dict[str, Any]:
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    out: dict[str, Any] = {}
    for arg, node in pairs:
        try:
            value = ast.literal_eval(node)
        except ValueError:
            continue
        if value is None or isinstance(value, (int, float)):  # bool is an int: flags too
            out[arg.arg] = value
    return out


def _documented(text: str, name: str) -> Any:
    """``name ... Default: 1e-12`` / ``defaults to 0.5`` within the line(s) about ``name``."""
    pattern = (rf"\b{re.escape(name)}\b[^\n]*(?:\n(?![ \t]*\w+\s*(?:\(|:))[^\n]*)*?"
               r"\bdefaults?(?:\s+(?:is|to))?\s*[:=]?\s*`*([-+]?\d[\w.+-]*|True|False)")
    match = re.search(pattern, text, re.IGNORECASE)
    if match is None:
        return None
    try:
        value = ast.literal_eval(match.group(1).rstrip("."))
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, (int, float)) else None


def with_defaults(slots: list, stated: dict[str, tuple[Any, str]], required: set[str]) -> list:
    """The plan with required parameters whose default the module states at that value
    (unless the code uses them as tensors)."""
    from gradsmith.discovery.slots import Slot

    out = []
    for s in slots:
        if s.name in stated and stated[s.name][0] is None:
            pass  # see with_none_defaults: tried first, not instead
        elif s.name in stated and s.name in required and s.kind in ("tensor", "value", "scalar") \
                and not s.per_feature and (s.hint is None or s.hint.kind not in ("tensor", "index")):
            s = Slot(s.name, "value", stated[s.name][0], s.hint, frozen=s.frozen)
        out.append(s)
    return out


def with_none_defaults(plans: list, stated: dict[str, tuple[Any, str]],
                       frozen: frozenset[str] = frozenset()) -> list:
    """``plans`` after copies in which hyperparameters whose stated default is ``None``
    (``def modspec(y, n=2048, norm=None)``) are ``None``: tried first, not instead, since a
    ``None`` may also mean "off" where forward needs a value (``clamp(min=None, max=None)``).
    A tensor too where backward returns no gradient for it (``frozen``: ``def forward(self, x,
    sizes=None): return Gather.apply(x, self.dim, sizes)``); an optional tensor with a
    gradient (a bias) keeps its value, so its gradient is checked."""
    from gradsmith.discovery.slots import Slot

    nones = {k for k, (v, _) in stated.items() if v is None}

    def absent(s) -> bool:
        return s.name in nones and (s.kind == "value" or (s.kind == "tensor" and s.name in frozen))

    extra = []
    for plan in plans:
        if any(absent(s) for s in plan):
            extra.append([Slot(s.name, "value", None, s.hint, frozen=s.frozen)
                          if absent(s) else s for s in plan])
    return [*extra, *plans]


def passable(owner: Any, params: list[inspect.Parameter]) -> int | None:
    """How many of forward's positional parameters a working call passes, when the code says
    fewer than all: backward returns one value per input passed, so if every ``return`` of
    backward is a tuple of ``k`` values and forward's parameters from ``k`` on have defaults,
    passing one of them makes autograd raise (``return g, None, None`` for ``forward(ctx, w,
    N, M, decay=0.0002)``: callers pass three). None otherwise.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, k, decay=0.1):
        ...         return x * k
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * 2, None
        >>> passable(F, list(inspect.signature(F.forward).parameters.values())[1:])
        2

    A call in the Function's module that passes more (``F.apply(x, k, 0.5)``) makes it None:
    that call raises, and the check should show it.
    """
    tree = parse(getattr(owner, "backward", None)) if isinstance(owner, type) else None
    if tree is None:
        return None
    returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return)]
    counts = {_returned_count(r, tree) for r in returns}
    if not returns or None in counts:
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(counts) != 1 or len(positional) != len(params):
        return None
    k = counts.pop()
    if not (0 < k < len(params) and all(p.default is not p.empty for p in params[k:])):
        return None
    tree = _module_tree(owner)  # a call in its module passing more: that is a defect to show
    for call in ast.walk(tree) if tree is not None else ():
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                call.func.attr == "apply" and _names_owner(call.func.value, owner) and \
                len(call.args) + len(call.keywords) > k:
            return None
    return k


def _returned_count(value: ast.AST | None, backward: ast.AST) -> int | None:
    """How many gradients a ``return`` of backward gives: a tuple's length, or 1 for one of
    backward's own incoming gradients returned as it is or in arithmetic (``return
    grad_output``, ``return g * mask``: a straight-through backward); None when unknown (a
    local may hold a tuple)."""
    if isinstance(value, ast.Tuple):
        return None if any(isinstance(e, ast.Starred) for e in value.elts) else len(value.elts)
    defs = [n for n in ast.walk(backward) if isinstance(n, ast.FunctionDef)]
    incoming = {a.arg for a in defs[0].args.args[1:]} if defs else set()
    if isinstance(value, ast.Name) and value.id not in incoming:  # `grad = 2 * g.real; return grad`
        sets = [n for n in ast.walk(backward) if isinstance(n, (ast.Assign, ast.AugAssign,
                ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)) and any(
            isinstance(t, ast.Name) and t.id == value.id for t in ast.walk(
                n.target if not isinstance(n, (ast.Assign, ast.With)) else
                ast.Tuple([*n.targets] if isinstance(n, ast.Assign) else
                          [i.optional_vars for i in n.items if i.optional_vars], ast.Load())))]
        binds = [n for n in sets if not _fills(n, value.id)]  # `g[..., ::s] = grad` fills g
        if len(binds) == 1 and isinstance(binds[0], ast.Assign) and \
                len(binds[0].targets) == 1 and isinstance(binds[0].targets[0], ast.Name):
            filled = any(isinstance(m, ast.Name) and m.id in incoming  # reads a gradient
                         for n in sets if n is not binds[0] for m in ast.walk(n.value))
            return 1 if _one_tensor(binds[0].value, incoming, filled) else None
    while isinstance(value, (ast.BinOp, ast.UnaryOp)):
        value = value.left if isinstance(value, ast.BinOp) else value.operand
    return 1 if isinstance(value, ast.Name) and value.id in incoming else None


# Methods of a gradient that give one tensor like it (never a tuple).
_SAME_TENSOR = {"clone", "contiguous", "detach", "float", "double", "to", "type_as", "view_as",
                "reshape_as", "expand_as"}


def _fills(node: ast.AST, name: str) -> bool:
    """``name[...] = value``: a store into the tensor ``name`` holds, never a new binding."""
    return isinstance(node, ast.Assign) and all(
        isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
        for t in node.targets)


def _one_tensor(value: ast.AST, incoming: set[str], filled: bool = False) -> bool:
    """Arithmetic of numbers, incoming gradients and ``torch.<fn>(...)`` calls only (one tensor,
    never a tuple), reading an incoming gradient (``2 * torch.real(torch.conj(g) * d)``), or
    ``filled`` with one by subscript stores (``g = torch.zeros_like(x); g[..., ::s] = grad``)."""
    nodes = list(ast.walk(value))
    for node in nodes:
        if isinstance(node, (ast.Tuple, ast.List, ast.Starred, ast.Subscript)):
            return False
        if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and (node.func.value.id == "torch" or node.func.value.id in incoming
                     and node.func.attr in _SAME_TENSOR)):  # einsum(..., g.clone())
            return False
    return filled or any(isinstance(n, ast.Name) and n.id in incoming for n in nodes)
