"""Matrix operands and their adjoints passed beside them (private).

``forward(x, matrix, matrix_adjoint)`` returning ``matrix @ x``, with backward applying
``matrix_adjoint @ grad``: the code says ``matrix`` is the left operand of a product with an
input listed before it, so it is a matrix (at least 2-D) whose columns match that input's
rows. The layouts tried so far put tensors in parameter order (``x`` first), and the first one
on which forward ran made ``matrix`` a vector, ``matrix @ x`` contracting ``x``'s first
dimension and backward's ``matrix_adjoint @ grad`` a gradient of the wrong shape: a false
``grad-shape-mismatch``.

- :func:`operand_layout`: shapes that follow the product, the left operand ``(5, 3)``, the
  right one ``(3, 4)``, an adjoint of the left operand ``(3, 5)``;
- :func:`adjoint_pairs`: a parameter named as another one's adjoint (``<name>_adjoint``,
  ``<name>_H``, ``<name>T``... the suffixes :mod:`~gradsmith.discovery.operators` reads on
  operator objects) for which backward returns no gradient: it only applies the map's
  adjoint, so it must be that adjoint. Two independent random matrices would compare
  ``matrix_adjoint @ g`` with the true ``matrix.mH @ g``: a false ``gradient-mismatch``.
  :func:`with_adjoints` sets it to ``<name>.mH`` in every input set, so a backward that
  applies the map itself, or a wrong multiple of the adjoint, still fails.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gradsmith.discovery.operators import _ADJOINT_SUFFIXES
from gradsmith.discovery.slots import Slot

LEFT, RIGHT = (5, 3), (3, 4)


def adjoint_pairs(names: list[str], frozen: set[str]) -> dict[str, str]:
    """Adjoint parameter -> the parameter it is the adjoint of, by name, for adjoints that
    backward returns no gradient for.

    Example:
        >>> adjoint_pairs(["x", "matrix", "matrix_adjoint"], {"matrix", "matrix_adjoint"})
        {'matrix_adjoint': 'matrix'}
        >>> adjoint_pairs(["x", "matrix", "matrix_adjoint"], set())
        {}
    """
    pairs = {}
    for name in names:
        for suffix in _ADJOINT_SUFFIXES:
            base = name[:-len(suffix)]
            if name.endswith(suffix) and base in names and base != name and name in frozen:
                pairs[name] = base
                break
    return pairs


def operand_layout(slots: list[Slot]) -> tuple[tuple[int, ...], ...] | None:
    """Tensor shapes following ``left @ right`` where ``left`` comes after ``right`` in the
    signature (parameter order already serves the other case), else None."""
    tensors = [s for s in slots if s.kind in ("tensor", "none")]
    names = [s.name for s in tensors]
    pairs = adjoint_pairs(names, {s.name for s in tensors})
    for i, slot in enumerate(tensors):
        right = slot.hint.matmul_left_of if slot.hint is not None else None
        if right in names and names.index(right) < i:
            return tuple(LEFT if s is slot else LEFT[::-1] if pairs.get(s.name) == slot.name
                         else RIGHT for s in tensors)
    return None


def with_adjoints(found: Any, names: list[str], frozen: set[str]) -> Any:
    """``found`` (a :class:`~gradsmith.discovery.synthesize.Synthesized`) with each adjoint
    parameter set to its map's conjugate transpose in the inputs and every variant; unchanged
    when no pair applies or a shape does not fit."""
    pairs = adjoint_pairs(names, frozen)
    if not pairs:
        return found
    args, description = _paired(found.args, found.description, names, pairs)
    if args is None:
        return found
    variants = []
    for variant in found.variants:
        v_args, v_text = _paired(variant.args, variant.description, names, pairs)
        if v_args is not None:
            variants.append(replace(variant, args=v_args, description=v_text))
    return replace(found, args=args, description=description, variants=tuple(variants))


def _paired(args: tuple, description: str, names: list[str], pairs: dict[str, str]
            ) -> tuple[tuple | None, str]:
    import torch

    if len(args) != len(names):
        return None, description
    args = list(args)
    for adjoint, base in pairs.items():
        a, m = args[names.index(adjoint)], args[names.index(base)]
        if not (isinstance(a, torch.Tensor) and isinstance(m, torch.Tensor) and m.dim() >= 2
                and a.shape == m.mH.shape):
            return None, description
        args[names.index(adjoint)] = m.detach().mH.clone().requires_grad_(a.requires_grad)
        description = re.sub(
            rf"\b{re.escape(adjoint)}: (\w+) (\([^)]*\))[^,]*(\([^)]*\))?",
            rf"{adjoint}: \1 \2 = {base}.mH (its name pairs it with {base} and backward "
            "returns no gradient for it: it applies the adjoint)", description, count=1)
    return tuple(args), description
