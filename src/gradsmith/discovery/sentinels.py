"""Values a forward compares a tensor with for equality: sentinels to plant (private).

A forward that treats the elements equal to an argument specially (``mask = x == magic``,
``x != fill``, ``torch.where(x.eq(value), ...)``) runs its special path only where some element
*is* that value. Random floats never are, so a backward wrong only there (one that drops the
gradient interpolated samples send to their neighbours) passed. Synthesis makes the compared
argument a number and plants it in the tensor (:func:`plant`), isolated and in short runs, away
from the ends, in an input set of its own. Read from the source (forward and the module-level
helpers it passes parameters to), never by running it.
"""

from __future__ import annotations

import ast
from typing import Any

from gradsmith.discovery.source import module_function, parse

#: Methods and functions that compare for equality (``x.eq(v)``, ``torch.ne(x, v)``).
_EQUALITY = {"eq", "ne", "equal"}


def equality_sentinels(fn: Any, names: list[str], depth: int = 0) -> dict[str, str | float]:
    """Parameters of ``fn`` compared for equality with another parameter or a number literal:
    parameter -> the other parameter's name, or the literal (as a float).

    Example:
        >>> def forward(ctx, x, magic_number):
        ...     mask = x == magic_number
        ...     return x.masked_fill(mask, 0.0)
        >>> equality_sentinels(forward, ["x", "magic_number"])
        {'x': 'magic_number', 'magic_number': 'x'}
    """
    tree = parse(fn)
    found: dict[str, str | float] = {}
    if tree is None:
        return found
    wanted = set(names)
    for node in ast.walk(tree):
        for left, right in _equal_pairs(node):
            for a, b in ((left, right), (right, left)):
                name = _name(a, wanted)
                if name is None or name in found:
                    continue
                other = _name(b, wanted)
                number = _number(b)
                if other is not None and other != name:
                    found[name] = other
                elif number is not None:
                    found[name] = number
        if depth == 0 and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            _from_helper(node, fn, wanted, found)
    return found


def _from_helper(call: ast.Call, fn: Any, wanted: set[str], found: dict) -> None:
    """``mask = find_gaps(x, magic)``: the helper's comparison, in forward's names."""
    found_helper = module_function(call, fn)
    if found_helper is None:
        return
    helper, params = found_helper
    ours = {params[i]: a.id for i, a in enumerate(call.args[:len(params)])
            if isinstance(a, ast.Name) and a.id in wanted}
    if not ours:
        return
    for theirs, other in equality_sentinels(helper, params, depth=1).items():
        if theirs not in ours:
            continue
        if isinstance(other, str):
            if other in ours:
                found.setdefault(ours[theirs], ours[other])
        else:
            found.setdefault(ours[theirs], other)


def _equal_pairs(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
            node.ops[0], (ast.Eq, ast.NotEq)):
        return [(node.left, node.comparators[0])]
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or \
            node.func.attr not in _EQUALITY:
        return []
    owner = node.func.value
    if isinstance(owner, ast.Name) and owner.id in ("torch", "np", "numpy"):
        return [(node.args[0], node.args[1])] if len(node.args) >= 2 else []
    return [(owner, node.args[0])] if node.args else []


def _name(node: ast.AST, wanted: set[str]) -> str | None:
    while isinstance(node, ast.Attribute) and node.attr in ("data",) or isinstance(
            node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "detach", "item", "float", "double"):
        node = node.value if isinstance(node, ast.Attribute) else node.func.value
    return node.id if isinstance(node, ast.Name) and node.id in wanted else None


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not \
            isinstance(node.value, bool):
        return float(node.value)
    return None


def plant(value: Any, sentinel: float) -> tuple[Any, int]:
    """``value`` (a tensor) with ``sentinel`` set along its last dimension: per row in turn one
    isolated element, a run of 2, a run of 3, never the first or last of a row (an
    interpolation needs neighbours); how many were set. Rows shorter than 3 stay as they are.

    Example:
        >>> import torch
        >>> planted, n = plant(torch.arange(15.).reshape(3, 5), -1.0)
        >>> planted.tolist(), n
        ([[0.0, -1.0, 2.0, 3.0, 4.0], [5.0, -1.0, -1.0, 8.0, 9.0], [10.0, -1.0, -1.0, -1.0, 14.0]], 6)
    """
    import torch

    if value.dim() == 0 or value.shape[-1] < 3:
        return value, 0
    width = value.shape[-1]
    rows = value.detach().clone().reshape(-1, width)
    count = 0
    for r in range(rows.shape[0]):
        run = min(1 + r % 3, width - 2)
        rows[r, 1:1 + run] = sentinel
        count += run
    out = rows.reshape(value.shape).to(value.dtype)
    return out.requires_grad_(value.requires_grad) if torch.is_floating_point(out) else out, count


#: The number a compared argument gets when nothing else gives it one (data never holds it).
SENTINEL_VALUE = 0.5


def with_sentinels(slots: list, compared: dict[str, str | float]) -> list:
    """The plan with each tensor compared for equality marked to get the value planted (see
    :func:`plant`), and the argument it is compared with a number: a tensor nothing in the
    code uses as one becomes :data:`SENTINEL_VALUE` (a default or a number stays)."""
    from gradsmith.discovery.slots import Slot

    by_name = {s.name: s for s in slots}
    numbers: dict[str, Slot] = {}
    order = [s.name for s in slots]  # the first tensor (the data) is the compared one
    for name, other in sorted(compared.items(), key=lambda kv: order.index(kv[0])
                              if kv[0] in order else len(order)):
        slot = by_name.get(name)
        if slot is None or slot.kind != "tensor" or name in numbers:
            continue
        if isinstance(other, str):
            partner = by_name.get(other)
            if partner is None:
                continue
            if partner.kind == "tensor" and not partner.per_feature and (
                    partner.hint is None or partner.hint.kind in (None, "float", "int")):
                numbers[other] = Slot(other, "value", SENTINEL_VALUE, partner.hint,
                                      frozen=partner.frozen)
            elif partner.kind == "tensor" and not partner.per_feature:
                # used as a tensor too (saved for backward, a tensor method): a 0-d one
                numbers[other] = Slot(other, "value", _scalar_tensor(SENTINEL_VALUE),
                                      partner.hint, frozen=partner.frozen)
            elif not (partner.kind == "value" and isinstance(partner.value, (int, float))):
                continue
        numbers.setdefault(name, Slot(**{**vars(slot), "sentinel": other}))
    return [numbers.get(s.name, s) for s in slots]


def _scalar_tensor(value: float) -> Any:
    import torch

    return torch.tensor(value, dtype=torch.float64)


def sentinel_value(slot: Any, values: dict[str, Any]) -> float | None:
    """The number planted in ``slot``'s tensor: the literal, or the compared argument's
    value in this input set (a number or a one-element tensor; None otherwise)."""
    import torch

    other = slot.sentinel
    value = values.get(other) if isinstance(other, str) else other
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point():
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
