"""What the Triton kernels a forward launches say about its arguments (private).

Host code hands tensors and numbers to ``kernel[grid](...)``; the kernel's body then says what
they are, where the host code says nothing. Read, never run:

- an **index tensor**: the kernel loads it and compares the value with column offsets
  (``t = tl.load(target_ptr + row)``; ``tl.where(cols == t, ...)``, ``cols = tl.arange(...)``)
  or uses it in another load's or store's address (``tl.load(logits_ptr + row * n + t)``): a
  class index, so integer values in range (float values match no class, and the kernel's loss
  is then another function);
- an **integer code**: the kernel compares it with integer literals (``if ACT == 0: ...
  elif ACT == 1: ...``): an int, its first value, the others as variants;
- a **tensor of integer codes**: the kernel loads it and compares the loaded value with integer
  literals (``at = tl.load(act_ptr + row)``; ``tl.where(at == 5, ...)``): an index tensor whose
  values are those codes (``codes``); random floats match no code and select a branch the
  kernel's author never meant for any row.

Also on the host side: ``p.long()`` (or ``.to(torch.long)``) makes ``p`` an index.
"""

from __future__ import annotations

import ast
import inspect
import types
from typing import Any

from gradsmith.discovery.callees import followed
from gradsmith.discovery.source import parse

_LONG = {"long", "int64"}
# Methods whose result is a number or a Python object, not a view of the tensor.
_NOT_VIEWS = {"size", "stride", "dim", "numel", "item", "tolist", "data_ptr", "element_size",
              "nelement", "ndimension", "storage_offset", "is_contiguous", "sum", "max", "min",
              "mean", "any", "all"}


def read_kernel_args(target: Any, owner: type | None, hints: dict) -> None:
    """Mark forward parameters the launched kernels use as class indices (``kind`` "index"),
    tensors of codes (``kind`` "index" with ``codes``) or integer codes (``kind`` "int" with the
    compared ``literals``), in ``hints``."""
    floats = _floats(target, list(hints))
    _read(host_code(target, owner, list(hints)), hints, floats)
    _read(_backward_code(owner, hints), hints, floats)  # once forward found codes


def _read(code: list, hints: dict, floats: set[str]) -> None:
    for body, known, launched in code:
        for name in _long_casts(body, known):
            _as_index(hints[name])
        for kernel, passed in launched:
            uses = _kernel_uses(kernel, set(passed))
            for param, (kind, literals) in uses.items():
                hint = hints[passed[param]]
                if kind == "index":
                    _as_index(hint)
                elif kind == "codes" and hint.kind in (None, "tensor", "float", "index"):
                    hint.kind = "index"
                    hint.codes += [v for v in literals if v not in hint.codes]
                elif hint.kind in (None, "int") and passed[param] not in floats and not any(
                        isinstance(v, str) for v in hint.literals):
                    hint.kind = "int"
                    hint.literals += [v for v in literals if v not in hint.literals]


def _backward_code(owner: type | None, hints: dict) -> list:
    """:func:`host_code` of backward for the tensors forward saved that forward's kernels load
    as codes: backward's kernels may test codes forward's leave to a default branch."""
    from gradsmith.discovery.saved_values import saved_locals

    coded = [n for n, h in hints.items() if h.codes]
    defining = next((c for c in getattr(owner, "__mro__", ()) if "backward" in vars(c)), None)
    if not coded or defining is None:
        return []
    known = {k: v for k, v in saved_locals(defining, list(hints)).items() if v in coded}
    return host_code(defining.backward, defining, known) if known else []


def _floats(target: Any, names: list[str]) -> set[str]:
    """Parameters that are floats by their default or by name (``scale``, ``alpha``): a kernel's
    ``if alpha == 1:`` shortcut does not make them int codes."""
    from gradsmith.discovery.slots import _table_value

    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return set()
    return {n for n in names if isinstance(_table_value(n), float) or (
        n in params and type(params[n].default) is float)}


def host_code(target: Any, owner: type | None, names: list[str] | dict[str, str]) -> list:
    """``(tree, local name -> forward parameter, launches)`` for forward and each helper it
    hands parameters to; launches: ``(kernel's AST, kernel parameter -> forward parameter)``
    for each ``kernel[grid](...)`` there that is given a forward parameter. ``names``: forward's
    parameters, or (for backward) its local names -> the parameters they hold."""
    tree = parse(target)
    if tree is None:
        return []
    mine = dict(names) if isinstance(names, dict) else {n: n for n in names}
    scope = getattr(inspect.unwrap(target), "__globals__", None) or {}  # @once_differentiable
    trees = [(tree, _aliases(tree, mine))]
    trees += [(t, _aliases(t, known)) for t, known in followed(
        target, tree, mine, owner=owner, local=_aliases)]
    return [(body, known, list(_launches(body, known, scope))) for body, known in trees]


def _as_index(hint) -> None:
    if hint.kind in (None, "tensor", "float"):
        hint.kind = "index"


def _aliases(tree: ast.AST, names: dict[str, str]) -> dict[str, str]:
    """``names`` plus local names bound to a view, slice or copy of one (``t = targ[a:b]``,
    ``x = x.contiguous().view(-1, n)``), in source order."""
    known = dict(names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            root = _root(node.value, known)
            if root is not None:
                known[node.targets[0].id] = root
    return known


def _root(node: ast.AST, known: dict[str, str]) -> str | None:
    """The parameter an expression is a view, slice or method-chain result of."""
    while True:
        if isinstance(node, ast.Name):
            return known.get(node.id)
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr not in _NOT_VIEWS:
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "data"):
            node = node.value
        else:
            return None


def _long_casts(tree: ast.AST, known: dict[str, str]):
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func = node.func
        cast = func.attr == "long" or (func.attr == "to" and any(
            isinstance(a, ast.Attribute) and a.attr in _LONG for a in node.args))
        if cast and isinstance(func.value, ast.Name) and func.value.id in known:
            yield known[func.value.id]


def _launches(tree: ast.AST, known: dict[str, str], scope: dict):
    """``(kernel's function AST, kernel parameter -> forward parameter)`` for each
    ``kernel[grid](...)`` whose arguments include forward parameters."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name)):
            continue
        function = _python_function(scope.get(node.func.value.id))
        if function is None:
            continue
        try:
            params = list(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            continue
        passed = {}
        for i, arg in enumerate(node.args[:len(params)]):  # t, t.contiguous(), t[a:b]
            if (root := _root(arg, known)) is not None:
                passed[params[i]] = root
        for kw in node.keywords:
            if kw.arg in params and (root := _root(kw.value, known)) is not None:
                passed[kw.arg] = root
        kernel = parse(function)
        if passed and kernel is not None:
            yield kernel, passed


def _python_function(obj: Any) -> types.FunctionType | None:
    """The Python function under a ``@triton.jit`` kernel (and ``autotune``/``heuristics``)."""
    for _ in range(4):
        if obj is None or isinstance(obj, types.FunctionType):
            break
        if not type(obj).__module__.startswith("triton"):
            return None
        obj = getattr(obj, "fn", None)
    return obj if isinstance(obj, types.FunctionType) and obj.__module__ is not None else None


def _kernel_uses(kernel: ast.AST, params: set[str]) -> dict[str, tuple[str, list[int]]]:
    """For kernel parameters ``params``: ("index", []), ("codes", literals its loaded values
    are compared with) or ("int", literals compared with)."""
    assigns = [n for n in ast.walk(kernel) if isinstance(n, ast.Assign)]
    # data: what is loaded and everything computed from it; offsets: index arithmetic only
    data = _closure(assigns, set(), lambda v, s: _loads(v) or bool(_names(v) & s))
    offsets = _closure(assigns, set(), lambda v, s: not _names(v) & data and not _loads(v)
                       and bool(_has_arange(v) or _names(v) & s))
    addresses = _addresses(kernel, assigns)
    found: dict[str, tuple[str, list[int]]] = {}
    for p in params:
        derived = _closure(assigns, {p}, lambda v, s: bool(_names(v) & s) and not _loads(v))
        loaded = _closure(assigns, set(), lambda v, s, d=derived: _loads(v, d) or (
            isinstance(v, ast.Name) and v.id in s))
        if loaded and (loaded & addresses or _compared_with(kernel, loaded, offsets)):
            found[p] = ("index", [])
            continue
        if loaded and (codes := _int_literals(kernel, loaded)) and not loaded & addresses:
            found[p] = ("codes", codes)
            continue
        literals = _int_literals(kernel, {p})
        if literals and not derived & addresses:
            found[p] = ("int", literals)
    return found


def _addresses(kernel: ast.AST, assigns) -> set[str]:
    """Names an address of a ``tl.load``/``tl.store`` is computed from (``ptr + row * n + t``:
    ``ptr``, ``row``, ``n``, ``t``), through the names assigned before."""
    found = {n for node in ast.walk(kernel) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "store")
             and node.args for n in _names(node.args[0])}
    changed = True
    while changed:
        changed = False
        for node in assigns:
            if any(isinstance(t, ast.Name) and t.id in found for t in node.targets) and \
                    not _loads(node.value):
                more = _names(node.value) - found
                found |= more
                changed = changed or bool(more)
    return found


def _compared_with(kernel, loaded, offsets) -> bool:
    """A loaded value tested for equality with column offsets (``cols == t``)."""
    for node in ast.walk(kernel):
        if isinstance(node, ast.Compare) and all(isinstance(o, (ast.Eq, ast.NotEq))
                                                 for o in node.ops):
            sides = [node.left, *node.comparators]
            if any(_names(s) & loaded for s in sides) and any(
                    _names(s) & offsets or _has_arange(s) for s in sides):
                return True
    return False


def _int_literals(kernel: ast.AST, names: set[str]) -> list[int]:
    """The int literals any of ``names`` is tested for equality with (``at == 5``)."""
    found: list[int] = []
    for node in ast.walk(kernel):
        if isinstance(node, ast.Compare) and len(node.comparators) == 1 and \
                isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            a, b = node.left, node.comparators[0]
            for x, y in ((a, b), (b, a)):
                if isinstance(x, ast.Name) and x.id in names and isinstance(y, ast.Constant) and \
                        type(y.value) is int and y.value not in found:
                    found.append(y.value)
    return found


def _closure(assigns, start: set[str], grows) -> set[str]:
    found = set(start)
    changed = True
    while changed:
        changed = False
        for node in assigns:
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id not in found and grows(node.value, found):
                    found.add(t.id)
                    changed = True
    return found


def _loads(value: ast.AST, pointers: set[str] | None = None) -> bool:
    """``value`` is ``tl.load(...)`` (from ``pointers`` when given), perhaps cast with
    ``.to(...)`` or indexed (``[:, None]``); with no ``pointers``: contains any load."""
    if pointers is None:
        return any(_is_load(n) for n in ast.walk(value))
    while isinstance(value, ast.Subscript) or isinstance(value, ast.Call) and \
            isinstance(value.func, ast.Attribute) and value.func.attr == "to":
        value = value.value if isinstance(value, ast.Subscript) else value.func.value
    return _is_load(value) and bool(value.args) and bool(_names(value.args[0]) & pointers)


def _is_load(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "load"


def _has_arange(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "arange" for n in ast.walk(node))


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
