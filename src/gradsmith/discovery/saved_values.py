"""Forward's parameters as backward reads them through ``ctx.saved_tensors`` (private).

A Python value (a flag, a count) has to become a tensor before ``save_for_backward`` takes it:
``ctx.save_for_backward(torch.tensor(quantize), torch.tensor(repeat))`` ... ``quant, repeat =
ctx.saved_tensors; if quant: for _ in range(repeat): ...``. Readers of what backward does with
a parameter (:mod:`~gradsmith.discovery.flags`) followed ``ctx.attr`` only, so such a flag
looked unused, was synthesised as a float tensor, and backward raised "Boolean value of Tensor
with more than one value is ambiguous" on every layout: a skip. :func:`saved_locals` maps
backward's locals to the parameters saved at their positions. A tensor forward only saves,
whose single entries backward branches on (``seen, size = ups[0], ups[1]; if seen <= size:``),
holds counters: :func:`saved_counters` reads its length, and it gets one small whole number
per entry, ascending first and descending as a variant, so each branch runs. Read, never run.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from gradsmith.discovery.source import module_function, parse

__all__ = ["read_saved_counts", "saved_counters", "saved_locals", "with_saved_counters",
           "wrapped_for_saving"]

_SAVED = ("saved_tensors", "saved_variables")
_WRAPS = ("tensor", "as_tensor")


def saved_locals(owner: Any, names: list[str], wrapped: bool = False) -> dict[str, str]:
    """Backward's local name -> the parameter of ``names`` forward saved at its position
    (as it is or wrapped, ``torch.tensor(flag)``; ``wrapped``: only wrapped ones, Python
    values by construction), from ``a, b = ctx.saved_tensors`` or ``a = ctx.saved_tensors[i]``.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, quantize, repeat):
        ...         ctx.save_for_backward(torch.tensor(quantize), torch.tensor(repeat))
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         quant, times = ctx.saved_tensors
        ...         return (g * 2 if quant else g), None, None
        >>> saved_locals(F, ["x", "quantize", "repeat"])
        {'quant': 'quantize', 'times': 'repeat'}
    """
    if not isinstance(owner, type):
        return {}
    saved: dict[int, str] = {}
    for method in ("forward", "setup_context"):
        tree = parse(vars(owner).get(method))
        for node in ast.walk(tree) if tree is not None else ():
            if _saving(node):
                saved.update({i: p for i, a in enumerate(node.args)
                              if (p := _saved_parameter(a, names, wrapped)) is not None})
    backward = parse(vars(owner).get("backward"))
    if not saved or backward is None:
        return {}
    local: dict[str, str] = {}
    for node in ast.walk(backward):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if _is_saved(value) and isinstance(target, (ast.Tuple, ast.List)):
            local.update({e.id: saved[i] for i, e in enumerate(target.elts)
                          if isinstance(e, ast.Name) and i in saved})
        elif (isinstance(value, ast.Subscript) and _is_saved(value.value)
              and isinstance(value.slice, ast.Constant) and value.slice.value in saved
              and isinstance(target, ast.Name)):
            local[target.id] = saved[value.slice.value]
    return local


def read_saved_counts(owner: Any, hints: dict) -> None:
    """A Python value forward saves as a tensor and backward passes to ``range`` (``for _ in
    range(repeat)``): an int, a count (at least 1). Only where nothing else gave it a kind.

    Example:
        >>> import torch
        >>> from gradsmith.discovery.hints import Hint
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, repeat):
        ...         ctx.save_for_backward(torch.tensor(repeat))
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (n,) = ctx.saved_tensors
        ...         return sum(g for _ in range(n)) / n, None
        >>> hints = {"x": Hint(), "repeat": Hint()}
        >>> read_saved_counts(F, hints)
        >>> hints["repeat"].kind, hints["repeat"].count
        ('int', True)
    """
    local = saved_locals(owner, list(hints), wrapped=True)
    backward = parse(vars(owner).get("backward")) if local else None
    for node in ast.walk(backward) if backward is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "range":
            for arg in node.args:
                hint = hints[local[arg.id]] if isinstance(arg, ast.Name) and \
                    arg.id in local else None
                if hint is not None and hint.kind in (None, "int"):
                    hint.kind = "int"
                    hint.count = hint.count or len(node.args) == 1
    if backward is not None:
        _bit_widths(owner, backward, {name: hints[p] for name, p in local.items()})


def _bit_widths(owner: Any, backward: ast.AST, hints: dict) -> None:
    """Saved values that backward raises 2 to (``2 ** (k - 1)``) or hands to a helper that
    does (``constquant(g, kdr, kgw)``, a function or another Function's ``apply``): bit
    widths, small whole numbers (WAGE's gradient quantiser saves ``torch.tensor(kgw)``; as
    float tensors the widths made every grid step random). ``hints``: backward's locals."""
    from gradsmith.discovery.guards import bit_count
    from gradsmith.discovery.hints import forward_hints

    for node in ast.walk(backward):
        if isinstance(node, ast.BinOp):
            bit_count(node, hints)
        found = _helper(node, vars(owner)["backward"]) if isinstance(node, ast.Call) else None
        if found is None:
            continue
        helper, params = found
        passed = {params[i]: name for i, a in enumerate(node.args[:len(params)])
                  if (name := _shifted(a)) in hints and hints[name].kind is None}
        inner = forward_hints(helper, list(passed), depth=1) if passed else {}
        for theirs, ours in passed.items():
            if inner[theirs].kind == "int" and inner[theirs].count:
                hints[ours].kind, hints[ours].count = "int", True


def _shifted(node: ast.AST) -> str | None:
    """``k`` of ``k`` or ``k + 3`` (a width moved by a constant is still a width)."""
    if (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))
            and isinstance(node.right, ast.Constant) and type(node.right.value) is int):
        node = node.left
    return node.id if isinstance(node, ast.Name) else None


def _helper(call: ast.Call, fn: Any) -> tuple[Any, list[str]] | None:
    """What a call in ``fn`` runs: a module-level function (its parameters), or the forward
    of a Function whose ``apply`` it calls (``q = Q.apply; q(g, k)``, ``Q.apply(g, k)``), whose
    parameters after ``ctx`` the call's arguments fill."""
    found = module_function(call, fn)
    if found is not None:
        return found
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "apply":
        func = func.value
    target = getattr(getattr(fn, "__func__", fn), "__globals__", {}).get(
        getattr(func, "id", None))
    target = getattr(target, "__self__", target)  # Q.apply is bound to Q
    forward = getattr(target, "forward", None) if isinstance(target, type) else None
    try:
        params = list(inspect.signature(forward).parameters) if forward else []
    except (TypeError, ValueError):
        return None
    return (forward, params[1:]) if params[:1] == ["ctx"] else None


def saved_counters(owner: Any, names: list[str]) -> dict[str, int]:
    """Parameters forward only saves (``ctx.save_for_backward(..., ups)``) and whose single
    entries (``ups[0]``, directly or through a local) backward compares in the test of an
    ``if``, ``while`` or conditional expression, with the number of entries read.

    Example:
        >>> import torch
        >>> class F(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, ups):
        ...         ctx.save_for_backward(x, ups)
        ...         return x.clone()
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         x, counts = ctx.saved_tensors
        ...         seen, size = counts[0], counts[1]
        ...         return (g if seen <= size else 2 * g), None
        >>> saved_counters(F, ["x", "ups"])
        {'ups': 2}
    """
    local = saved_locals(owner, names)
    forward = parse(vars(owner).get("forward")) if isinstance(owner, type) and local else None
    backward = parse(vars(owner).get("backward")) if forward is not None else None
    if backward is None:
        return {}
    only_saved = {p for p in set(local.values()) if _only_saved(forward, p)}
    entries: dict[str, tuple[str, int]] = {}  # seen = ups[0]: local -> (parameter, entry)
    for node in ast.walk(backward):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            pairs = zip(target.elts, value.elts) if isinstance(target, ast.Tuple) and \
                isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) \
                else [(target, value)]
            for t, v in pairs:
                if isinstance(t, ast.Name) and (e := _entry(v, local)) is not None:
                    entries[t.id] = e
    found: dict[str, int] = {}
    for node in ast.walk(backward):
        if not isinstance(node, (ast.If, ast.While, ast.IfExp)):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            for side in (compare.left, *compare.comparators):
                entry = entries.get(side.id) if isinstance(side, ast.Name) else _entry(
                    side, local)
                if entry is not None and entry[0] in only_saved:
                    found[entry[0]] = max(found.get(entry[0], 0), entry[1] + 1)
    return found


def with_saved_counters(plans: list, counters: dict[str, int]) -> list:
    """``plans`` with each counter tensor (:func:`saved_counters`) a 1-D int64 tensor of small
    whole numbers (2, 5, ...: ascending, so ``seen <= size`` holds; descending as a variant)."""
    from gradsmith.discovery.hints import Hint
    from gradsmith.discovery.slots import Slot

    out = []
    for plan in plans:
        new = []
        for slot in plan:
            if slot.name in counters:
                up = tuple(2 + 3 * i for i in range(counters[slot.name]))
                hint = Hint(kind="tensor", literals=[up, up[::-1]])
                slot = Slot(slot.name, "scalar", up, hint, frozen=slot.frozen)
            new.append(slot)
        out.append(new)
    return out


def _only_saved(forward: ast.AST, name: str) -> bool:
    """Whether forward uses ``name`` only as an argument of ``save_for_backward``."""
    parents = {child: node for node in ast.walk(forward) for child in ast.iter_child_nodes(node)}
    uses = [n for n in ast.walk(forward) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(_saving(parents.get(n)) for n in uses)


def _entry(node: ast.AST, local: dict[str, str]) -> tuple[str, int] | None:
    """``ups[0]`` of a saved local: (its parameter, 0)."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
            node.value.id in local and isinstance(node.slice, ast.Constant) and \
            type(node.slice.value) is int and 0 <= node.slice.value < 8:
        return local[node.value.id], node.slice.value
    return None


def wrapped_for_saving(node: ast.AST, parents: dict) -> bool:
    """Whether ``node`` (a parameter's name) is only made a tensor to be saved:
    ``ctx.save_for_backward(torch.tensor(flag))``; that passes it on, it does not use it."""
    call = parents.get(node)
    return (isinstance(call, ast.Call) and _wrap(call) and call.args[:1] == [node]
            and _saving(parents.get(call)))


def _saving(node: Any) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "save_for_backward"


def _wrap(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in _WRAPS and len(node.args) == 1


def _saved_parameter(node: ast.AST, names: list[str], wrapped: bool) -> str | None:
    if isinstance(node, ast.Call) and _wrap(node):
        node = node.args[0]
    elif wrapped:
        return None
    return node.id if isinstance(node, ast.Name) and node.id in names else None


def _is_saved(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in _SAVED
