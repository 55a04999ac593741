"""The shape contracts synthesis reads from the code, in one place for
:mod:`~gradsmith.discovery.synthesize` (private): grid-sample grids and the shapes built from a
parameter (:mod:`~gradsmith.discovery.grid_samples`), integer lists of dimensions, cuts and cut
points (:mod:`~gradsmith.discovery.int_lists`) and adjoints passed beside a matrix
(:mod:`~gradsmith.discovery.adjoint_pairs`; its layout is :mod:`~gradsmith.discovery.layouts`'s).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gradsmith.discovery.adjoint_pairs import with_adjoints
from gradsmith.discovery.grid_samples import read_grids, shape_params, with_shapes
from gradsmith.discovery.int_lists import explained, int_lists, with_int_lists
from gradsmith.discovery.leading_vectors import read_leading
from gradsmith.discovery.slots import Slot


@dataclass(frozen=True)
class Contracts:
    """What the code says about shapes: the integer lists and the shape parameters."""

    names: tuple[str, ...]
    lists: dict
    shapes: frozenset


def read_contracts(target: Any, owner: type | None, names: list[str], hints: dict) -> Contracts:
    """Read the contracts of forward ``target`` (grids go into ``hints``)."""
    read_grids(target, owner, hints)  # F.grid_sample(x, grid): (N, H, W, 2) in [-1, 1]
    read_leading(target, owner, hints)  # w * scale[:, None, None, None]: scale (out,)
    return Contracts(tuple(names), int_lists(target, names),  # enumerate(dims): cuts[n]
                     frozenset(shape_params(target, names)))  # broadcast_to(xshape): a shape


def with_contracts(plans: list[list[Slot]], contracts: Contracts) -> list[list[Slot]]:
    """The plans with the integer lists set, and shape parameters as the first tensor's size
    first (then as planned, when forward refuses that)."""
    plans = with_int_lists(plans, contracts.lists)
    if contracts.shapes:
        plans = [with_shapes(plan, set(contracts.shapes)) for plan in plans] + plans
    return plans


def finished(found: Any, contracts: Contracts, frozen: set[str]) -> Any:
    """``found`` with each adjoint its matrix's ``.mH`` and the lists explained."""
    found = with_adjoints(found, list(contracts.names), frozen)  # matrix_adjoint = matrix.mH
    return replace(found, description=explained(found.description, contracts.lists))
