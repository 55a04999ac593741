"""Input sets that mix real and complex operands, where forward promotes between them (private).

A forward that calls ``torch.promote_types`` or ``torch.result_type`` on its inputs states that
it takes operands of different dtypes (a block-sparse product casting a real operand to the
complex dtype of the other). A backward written for one dtype often fails there: it allocates
both gradients in the promoted complex dtype and returns a complex gradient for the real
operand, which autograd rejects. Inputs recorded from a project's tests share one dtype more
often than not, so such a Function gets, for each floating operand, a variant where that one is
complex and the others stay real (or, from an all-complex set, that one real), kept where
forward runs on it. The check then runs backward
there like on any set: a backward that fails for a combination forward supports is the
Function's own error.
"""

from __future__ import annotations

import inspect

from gradsmith.discovery.variants import Variant

_PROMOTES = ("promote_types", "result_type")


def promotes(fn: type) -> bool:
    """Whether ``fn``'s forward promotes between its inputs' dtypes (read from its source)."""
    try:
        text = inspect.getsource(fn.forward)
    except (OSError, TypeError):
        return False
    return any(f"{name}(" in text for name in _PROMOTES)


def mixed_variants(fn: type, args: tuple, source: str, seed: int) -> list[Variant]:
    """Where ``args`` has two or more floating tensors all real (or all complex): one variant
    per tensor with that one made complex (its values as the real part, a seeded normal
    imaginary part), or made real (its real part), the others as they are."""
    import torch

    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
               and (a.is_floating_point() or a.is_complex())]
    kinds = {args[i].is_complex() for i in tensors}
    if len(tensors) < 2 or len(kinds) != 1 or not promotes(fn):
        return []
    complex_now = kinds.pop()
    generator = torch.Generator().manual_seed(seed + 3)
    found = []
    for i in tensors:
        value = args[i].detach()
        if complex_now:
            changed = value.real.clone()
        else:
            changed = torch.complex(value, torch.randn(value.shape, generator=generator,
                                                       dtype=value.dtype))
        mixed = list(args)
        mixed[i] = changed.requires_grad_(args[i].requires_grad)
        if _runs(fn, mixed):
            found.append(Variant(tuple(mixed), source,
                                 f"argument {i} {'real' if complex_now else 'complex'} and the "
                                 f"others {'complex' if complex_now else 'real'} (forward "
                                 f"promotes between their dtypes)"))
    return found


def _runs(fn: type, args: list) -> bool:
    from gradsmith.discovery.probe import probe

    return probe(fn.apply, args) is True
