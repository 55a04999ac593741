"""The last touches on inputs synthesis found (private): the layout the code states when its
kernels' backward rejects the one found, masks as 0/1, a bisection's root inside its bracket,
equal last sizes where the code slices the last dimension (moved out of
:mod:`~gradsmith.discovery.synthesize`, which its size test holds to 300 lines)."""

from __future__ import annotations

from typing import Any

from gradsmith.discovery.brackets import bracketed
from gradsmith.discovery.from_code import stated_if_misfit
from gradsmith.discovery.group_sizes import same_last_sizes, slices_last_dim
from gradsmith.discovery.masks import read_shaped
from gradsmith.discovery.slots import signature

__all__ = ["stated_or"]


def stated_or(fn: Any, params, hints: dict, seed: int, found: Any) -> Any:
    """Inputs shaped as the code states when ``found``'s layout (a
    :class:`~gradsmith.discovery.synthesize.Synthesized`) is one its kernels' backward rejects
    (:func:`~gradsmith.discovery.from_code.stated_if_misfit`), else ``found``."""
    better = stated_if_misfit(fn, params, hints, seed, found.args)
    found = found if better is None else type(found)(*better, seed=seed)
    call, _, target = signature(fn)
    found = read_shaped(found, call, target, [p.name for p in params])  # masks 0/1, z[..., 0]
    found = bracketed(found, call, target, [p.name for p in params])  # a bisection's root inside
    return same_last_sizes(found, getattr(fn, "apply", fn)) if slices_last_dim(fn) else found
