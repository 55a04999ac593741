"""``forward(ctx, *args)`` read at constant positions (private): one parameter per position.

Some Functions take everything through ``*args`` and name the items in the body:
``d = args[0]``, ``kappa = args[1]``, or ``(ray0, direction, ..., max_points) = input[:11]``.
Synthesis saw one variadic parameter and passed a single tensor (``tuple index out of range``,
``not enough values to unpack (expected 11, got 1)``: corpus 7's vmf-lib ``vMFLogPartition``
and nitorch's ``_ApproximateShoot`` were skipped). Read from forward's body: each constant index
(or the names unpacked from a prefix) becomes a positional parameter named as the body names it
(``args_7`` where it has no name), so every reader of hints sees the body's own names; the
variadic parameter stays after them only where the body reads past them (``args[2:]``, a
variable index, ``helper(*args)``).
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.source import parse as _parse

MAX_POSITIONS = 32  # a larger constant index is no argument list


def named_positions(target: Any, params: list[inspect.Parameter]
                    ) -> list[inspect.Parameter] | None:
    """``params`` with a trailing ``*args`` that forward reads at constant positions replaced by
    one positional parameter per position (and ``*args`` kept after them when forward reads
    past them); None when forward reads it otherwise or not at all.

    Example:
        >>> def forward(ctx, *args):
        ...     d = args[0]
        ...     kappa = args[1]
        ...     return kappa * d
        >>> import inspect
        >>> params = list(inspect.signature(forward).parameters.values())[1:]
        >>> [str(p) for p in named_positions(forward, params)]
        ['d', 'kappa']
    """
    found = _starred(target, params)
    if found is None:
        return None
    name, tree = found
    names: dict[int, str] = {}
    rest = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            read = _unpacked(node.targets[0], node.value, name)
            if read is not None:
                found, more = read
                for i, alias in found.items():
                    names.setdefault(i, alias)
                rest = rest or more
                continue
        if isinstance(node, ast.Subscript) and _is(node.value, name):
            span = _span(node.slice)
            if span is None:
                rest = True  # args[1:], args[i]: more than the named positions
            for index in span or ():
                names.setdefault(index, f"{name}_{index}")
    taken = {p.name for p in params[:-1]}
    if not names or max(names) >= MAX_POSITIONS or set(names.values()) & taken:
        return None
    if _passed_whole(tree, name):
        rest = True  # shoot(*args): a callee reads positions the body does not name
    count = max(names) + 1
    positional = [inspect.Parameter(names.get(i, f"{name}_{i}"),
                                    inspect.Parameter.POSITIONAL_ONLY) for i in range(count)]
    return params[:-1] + positional + ([params[-1]] if rest else [])


def counted_by_backward(owner: type | None, params: list[inspect.Parameter]
                        ) -> list[inspect.Parameter] | None:
    """``params`` with a trailing ``*args`` sized by what backward returns: when every
    ``return`` of backward is a tuple literal of the same length ``n`` with nothing unpacked
    into it, forward takes exactly ``n`` inputs, so ``*args`` holds ``n`` minus the named ones
    (none when backward returns one per named parameter: ``return dy * diff, None, None,
    None, None`` for ``forward(ctx, x, y, f, batched, maximize, *args)``, which its callers use
    with ``*args`` empty). None when backward returns a variable number (``(None, None,
    *grads)``, ``(None,) + grads``: then ``*args`` holds more, see the split and the module's
    parameters in :mod:`~gradsmith.discovery.slots`) or fewer than the named ones.

    Example:
        >>> import inspect, torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, f, *args):
        ...         return f(x, *args)
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g, None
        >>> params = list(inspect.signature(F.forward).parameters.values())[1:]
        >>> counted_by_backward(F, params)
        [<Parameter "x">, <Parameter "f">]
    """
    if owner is None or not params or params[-1].kind is not inspect.Parameter.VAR_POSITIONAL:
        return None
    tree = _parse(getattr(owner, "backward", None))
    body = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    lengths = set()
    for node in _own_returns(body):
        if not isinstance(node.value, ast.Tuple) or any(
                isinstance(e, ast.Starred) for e in node.value.elts):
            return None  # `return grads`, `(None, *grads)`: a number the code decides
        lengths.add(len(node.value.elts))
    named = len(params) - 1
    if len(lengths) != 1 or (count := lengths.pop()) < named or _passed_more(owner, count):
        return None
    name = params[-1].name
    return params[:-1] + [inspect.Parameter(f"{name}_{i}", inspect.Parameter.POSITIONAL_ONLY)
                          for i in range(count - named)]


def _passed_more(owner: type, count: int) -> bool:
    """A call in the Function's own module passes more than ``count`` arguments
    (``F.apply(x, y, f, True, True, extra)``): backward's fixed count is then the bug."""
    import sys

    tree = _parse(sys.modules.get(getattr(owner, "__module__", ""), None))
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "apply" and isinstance(node.func.value, ast.Name) and \
                node.func.value.id == owner.__name__ and len(node.args) > count and \
                not any(isinstance(a, ast.Starred) for a in node.args):
            return True
    return False


def _own_returns(function: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of ``function`` itself, not of functions defined inside it."""
    found: list[ast.Return] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                   ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _unpacked(target: ast.AST, value: ast.AST, name: str) -> tuple[dict[int, str], bool] | None:
    """Names by position of ``x = args[k]`` and ``(a, b, c) = args[:3]`` (or ``args[1:4]``,
    ``= args``), and whether the body may read past them (never, here)."""
    if isinstance(target, ast.Name) and isinstance(value, ast.Subscript) and \
            _is(value.value, name) and (index := _constant(value.slice)) is not None:
        return {index: target.id}, False
    if not (isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts)):
        return None
    if _is(value, name):
        return {i: e.id for i, e in enumerate(target.elts)}, False
    if isinstance(value, ast.Subscript) and _is(value.value, name) and \
            isinstance(value.slice, ast.Slice):
        span = _span(value.slice)
        if span is not None and len(span) == len(target.elts):
            return {i: e.id for i, e in zip(span, target.elts)}, False
    return None


def _span(node: ast.AST) -> range | None:
    """The positions ``args[k]`` or ``args[lo:hi]`` reads (constants), else None."""
    if (index := _constant(node)) is not None:
        return range(index, index + 1)
    if not isinstance(node, ast.Slice) or node.step is not None:
        return None
    lower = 0 if node.lower is None else _constant(node.lower)
    upper = _constant(node.upper)
    return None if lower is None or upper is None else range(lower, upper)


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _constant(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
        return node.value
    return None


def _passed_whole(tree: ast.AST, name: str) -> bool:
    return any(isinstance(node, ast.Starred) and _is(node.value, name)
               for node in ast.walk(tree))


def counted_by_guards(target: Any, params: list[inspect.Parameter]
                      ) -> list[inspect.Parameter] | None:
    """``params`` with a trailing ``*args`` holding the fewest items forward's raising guards
    on its length accept: ``n = len(coeffs)`` then ``if n == 1: raise ...`` (or
    ``if len(args) < 2: raise``, ``assert len(args) >= 2``) rejects one item, which is what
    synthesis passed (corpus 13's phytorch ``Roots``, ``forward(ctx, force_numeric, *coeffs)``,
    was skipped on ``NotImplementedError``). None when no guard rejects a single item.

    Example:
        >>> def forward(ctx, flag, *coeffs):
        ...     n = len(coeffs)
        ...     if n == 0:
        ...         raise ValueError("at least 2")
        ...     if n == 1:
        ...         raise NotImplementedError
        ...     return coeffs
        >>> import inspect
        >>> params = list(inspect.signature(forward).parameters.values())[1:]
        >>> [str(p) for p in counted_by_guards(forward, params)]
        ['flag', 'coeffs_0', 'coeffs_1']
    """
    found = _starred(target, params)
    if found is None:
        return None
    name, tree = found
    aliases = {name}  # n = len(coeffs): n stands for the length
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and _length_of(node.value, set(), name):
            aliases.add(node.targets[0].id)
    tests = [node.test for node in ast.walk(tree) if isinstance(node, ast.If) and
             node.body and all(isinstance(s, ast.Raise) for s in node.body)]
    rejects = [_rejects(test, aliases, name, negate=False) for test in tests]
    rejects += [_rejects(node.test, aliases, name, negate=True) for node in ast.walk(tree)
                if isinstance(node, ast.Assert)]
    rejects = [r for r in rejects if r is not None]
    count = next((k for k in range(1, 9) if not any(r(k) for r in rejects)), None)
    if count is None or count == 1:
        return None
    return params[:-1] + [inspect.Parameter(f"{name}_{i}", inspect.Parameter.POSITIONAL_ONLY)
                          for i in range(count)]


_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
            ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
            ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def _rejects(test: ast.AST, aliases: set[str], name: str, negate: bool) -> Any:
    """A predicate on the length that says a guard raises (``len(x) == 1``, ``n < 2``; for an
    ``assert``, when its test fails), or None when the test is not one such comparison."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            type(test.ops[0]) in _COMPARE):
        return None
    left, right, op = test.left, test.comparators[0], _COMPARE[type(test.ops[0])]
    if _length_of(left, aliases, name) and _constant(right) is not None:
        bound = _constant(right)
        return (lambda k: not op(k, bound)) if negate else (lambda k: op(k, bound))
    if _length_of(right, aliases, name) and _constant(left) is not None:
        bound = _constant(left)
        return (lambda k: not op(bound, k)) if negate else (lambda k: op(bound, k))
    return None


def _length_of(node: ast.AST, aliases: set[str], name: str) -> bool:
    """``node`` is ``len(name)`` or a name bound to it."""
    if isinstance(node, ast.Name) and node.id in aliases - {name}:
        return True
    return isinstance(node, ast.Call) and _is(node.func, "len") and len(node.args) == 1 and \
        _is(node.args[0], name)


def _starred(target: Any, params: list[inspect.Parameter]) -> tuple[str, ast.AST] | None:
    """The name of forward's trailing ``*args`` and forward's parsed source, or None."""
    if not params or params[-1].kind is not inspect.Parameter.VAR_POSITIONAL:
        return None
    tree = _parse(target)
    return None if tree is None else (params[-1].name, tree)
