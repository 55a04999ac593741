"""Values of the argument kinds read from how the code uses them, not drawn (private): a
config object (the project's own class, or a namespace of the attributes read), a mapping of
the keys read, split sections and a size; with what the Inputs column says of each."""

from __future__ import annotations

from typing import Any

from gradsmith.discovery.slots import Slot


def from_use(slot: Slot, first_shape: tuple[int, ...]) -> tuple[Any, str]:
    """The value of a config object, sections or a size (see :mod:`~gradsmith.discovery.uses`)
    and what the Inputs column says about it.

    Example:
        >>> from_use(Slot("sections", "sections", -1), (3, 4))
        ([1, 3], 'sections=[1, 3] (sizes summing to dim -1 of the first tensor: forward splits by them)')
    """
    import torch

    if slot.kind == "config" and not isinstance(slot.value, dict):  # builders.Built
        shown = ", ".join(sorted(slot.value.items))
        return slot.value.make(), (
            f"{slot.name}: the attributes ({shown}) of {slot.value.where} (the project's own "
            "class builds an object with the attributes forward reads)")
    if slot.kind == "config":
        from gradsmith.discovery.builders import Invented

        value = Invented(**slot.value)
        shown = ", ".join(f"{k}={getattr(v, '__name__', None) or repr(v)}"
                          for k, v in slot.value.items())
        return value, (f"{slot.name}=namespace({shown}) (a config object: the code reads these "
                       "attributes)")
    if slot.kind == "keyed":
        from gradsmith.discovery.keyed import keyed_value

        value = {key: keyed_value(key, how) for key, how in slot.value.items()}
        shown = ", ".join(f"{k!r}: {v!r}" for k, v in value.items())
        only = any(how.startswith("neutral") for how in slot.value.values())
        return value, (f"{slot.name}={{{shown}}} (a mapping: the code reads these keys"
                       + ("; only backward reads them, so each is 1" if only else "") + ")")
    if slot.kind == "sections":
        dim = slot.value if -len(first_shape) <= slot.value < len(first_shape) else 0
        size = first_shape[dim] if first_shape else 1
        sections = [1, size - 1] if size > 1 else [size]
        return sections, (f"{slot.name}={sections} (sizes summing to dim {slot.value} of the "
                          "first tensor: forward splits by them)")
    size = torch.Size(first_shape)
    return size, f"{slot.name}={size} (the first tensor's shape: forward reshapes to it)"
