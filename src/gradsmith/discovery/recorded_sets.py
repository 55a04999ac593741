"""Which recorded call becomes a Function's input set, and how calls far away are recorded.

Helpers of :mod:`~gradsmith.discovery.project_examples` (private): a test reaching the Function
through another module calls an alias of ``apply`` bound there (``TransducerLoss =
TransducerLossFunction.apply``), which the recorder must see; and of the sets several tests
give, the one the check can cover best is kept.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Folders of installed packages, never the project's own modules.
_INSTALLED = {"site-packages", "dist-packages", ".venv", "venv"}
#: Differentiable elements the check compares one by one (its ``exact_max``).
_EXACT = 1000


def fittest(found: list[tuple[tuple, str]]) -> tuple[tuple, str]:
    """Of the sets the examples gave, a real one before a complex one (the singular or
    eigen vectors of a complex decomposition carry a free phase, which outputs stored flat
    hide from :mod:`gradsmith.checker.gauge`; the project's tests of one call usually cover
    both), then the first (the likeliest test) the check takes element by element (at most
    ``_EXACT`` differentiable elements), else the smallest: a test of a whole decomposition
    passes tens of thousands of elements, which finite differences cannot cover within a
    row's time."""
    import torch

    def size(args: tuple) -> int:
        return sum(a.numel() for a in args if isinstance(a, torch.Tensor)
                   and (a.is_floating_point() or a.is_complex()))

    def rank(item: tuple[tuple, str]) -> tuple:
        args = item[0]
        complex_ = any(isinstance(a, torch.Tensor) and a.is_complex() for a in args)
        fits = 0 < size(args) <= _EXACT
        return (complex_, not fits, 0 if fits else size(args))

    return min(found, key=rank)  # the first of equals: the tests come likeliest first


@contextmanager
def aliases_forwarded(fn: type, root: Path | None) -> Iterator[None]:
    """Module-level aliases of ``fn.apply`` in the project's loaded modules (``TransducerLoss
    = TransducerLossFunction.apply``) call ``fn.apply`` by name while a test runs, so the
    recorder that replaces it sees calls several modules away from the test."""
    changed = []
    for module in list(sys.modules.values()):
        file = str(getattr(module, "__file__", None) or "")
        if root is None or not file.startswith(str(root)) or \
                any(p in Path(file).parts for p in _INSTALLED):
            continue  # not the project's own (a virtual environment inside its folder)
        namespace = vars(module)
        for key, value in list(namespace.items()):
            if inspect.ismethod(value) and value.__self__ is fn and value.__name__ == "apply":
                namespace[key] = lambda *a, **k: fn.apply(*a, **k)
                changed.append((namespace, key, value))
    try:
        yield
    finally:
        for namespace, key, value in changed:
            namespace[key] = value


def unread_inputs(fn: type, args: tuple) -> list[str]:
    """Names of the differentiated tensors of ``args`` that forward never reads (its source
    never loads the parameter): their values reach forward inside another argument (a
    prefactorised solver built from a matrix's values), so perturbing them changes nothing
    and finite differences compare backward with 0, whatever it is worth."""
    import ast

    import torch

    from gradsmith.discovery.source import parse

    tree = parse(getattr(fn, "forward", None))
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None) \
        if tree is not None else None
    if func is None:
        return []
    params = [a.arg for a in func.args.args]
    offset = len(params) - len(args)  # ``ctx`` first, or not (setup_context style)
    if offset < 0:
        return []
    read = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)}
    return [params[i + offset] for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex())
            and a.requires_grad and params[i + offset] not in read]
