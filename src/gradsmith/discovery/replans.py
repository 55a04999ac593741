"""Other plans of the same parameters, tried when the first plans' layouts do not run
(private): the contract the code is written for (numbers kept as Python numbers, per-feature
vectors), required hyperparameters as tensors, bare tensors as numbers, unnamed ints as 1, and
target-like tensors as index tensors. Each takes a plan (:func:`~gradsmith.discovery.slots.plan_slots`)
and returns another, or None when it would change nothing."""

from __future__ import annotations

from gradsmith.discovery.slots import _INDEX_NAMES, _TENSOR_NAMES, Slot, _table_value

__all__ = ["as_index", "as_numbers", "as_small_ints", "as_tensors", "with_contract"]


def with_contract(slots: list[Slot], scalars: set[str], features: set[str]) -> list[Slot]:
    """The plan with the contract the code is written for: parameters used as Python numbers
    get a float (``ctx.coef = coef``, ``float(bias_init)``), per-feature vectors a tensor that
    the first layouts make 1-D (``x + bias`` with backward ``g.sum(0)``)."""
    out = []
    for s in slots:
        if s.name in scalars and s.kind == "tensor":  # 0.5, 1.5, ...: pairs are open windows
            value = 0.5 + sum(o.name in scalars and o.kind == "value" for o in out)
            s = Slot(s.name, "value", value, s.hint)
        elif s.name in features and s.kind in ("tensor", "value") and not (
                s.kind == "value" and not isinstance(s.value, float)):
            s = Slot(s.name, "tensor", hint=s.hint, per_feature=True)
        out.append(s)
    return out


def as_tensors(slots: list[Slot], required: set[str]) -> list[Slot] | None:
    """The plan with required parameters that got a hyperparameter value as tensors."""
    if not any(s.kind in ("value", "scalar") and s.name in required for s in slots):
        return None
    return [Slot(s.name, "tensor", hint=s.hint, frozen=s.frozen) if s.kind in (
        "value", "scalar") and s.name in required else s for s in slots]


def as_numbers(slots: list[Slot]) -> list[Slot] | None:
    """The plan with tensors nothing in the code uses as tensors (no tensor method, no
    indexing, not saved, not named like one; ``1. - lb_smooth``, ``label.eq(lb_ignore)``) as
    Python floats, 0.1 each (a smoothing, a probability; an id no label equals); the first
    tensor stays one. None when there are none."""
    tensors = [s for s in slots if s.kind == "tensor"]

    def bare(s: Slot) -> bool:
        return (s.kind == "tensor" and s is not tensors[0] and s.name not in _TENSOR_NAMES
                and (s.hint is None or s.hint.kind is None) and not s.per_feature)

    if not tensors or not any(bare(s) for s in slots):
        return None
    return [Slot(s.name, "value", 0.1, s.hint, frozen=s.frozen) if bare(s) else s
            for s in slots]


def as_small_ints(slots: list[Slot]) -> list[Slot] | None:
    """The plan with ints the code reads but no name or comparison gives a value (2 by
    default) as 1: a slice bound such as ``x[:, :, fold:2 * fold]`` needs a dimension of at
    least twice it, which no padded layout's size 2 has; None when there are none."""
    def small(s: Slot) -> bool:
        return (s.kind == "value" and type(s.value) is int and s.value == 2
                and s.hint is not None and s.hint.kind == "int" and not s.hint.literals
                and _table_value(s.name) is None)

    if not any(small(s) for s in slots):
        return None
    return [Slot(s.name, "value", 1, s.hint, frozen=s.frozen) if small(s) else s
            for s in slots]


def as_index(slots: list[Slot]) -> list[Slot] | None:
    """The plan with target-like tensors (``_INDEX_NAMES``) as index tensors; None if none."""
    if not any(s.kind in ("tensor", "none") and s.name in _INDEX_NAMES for s in slots):
        return None
    return [Slot(s.name, "index", hint=s.hint) if s.kind in ("tensor", "none")
            and s.name in _INDEX_NAMES else s for s in slots]
