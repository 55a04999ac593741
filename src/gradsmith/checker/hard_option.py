"""A further input set whose option turns forward hard while backward keeps the first set's
verified gradient: a straight-through estimator the option selects (private).

Synthesis checks further input sets with an option flipped from forward's default. A Function
such as a Gumbel-sigmoid (``forward_hard_map=False``: the soft map, an exact reparameterisation
gradient) may offer a hard mode (``True``: ``(values > 0).float()``) whose backward is, on
purpose, the soft map's gradient: the straight-through estimator the option exists for. On
that set the gradients check sees a piecewise constant forward and an undeclared estimator;
as an error it was a false alarm on a correct Function (deep-object-reid's
HardGumbelSigmoid).

:func:`hard_option` does not trust the option's name: it demonstrates the property. When the
first set raised no error (backward is the exact gradient of the default forward there), the
further set's only errors are ``undeclared-estimator``, the two sets differ only in plain
options and hold equal tensors, and backward on the further set returns, at the same random
state and the same ``grad_output``, exactly what it returns with the first set's options (the
verified gradient), the error becomes a warning that says so. A backward that gives the hard
mode any other gradient (a planted wrong one) keeps its error, and so does a first set that
failed.
"""

from __future__ import annotations

from typing import Any

from gradsmith.checker.report import Finding
from gradsmith.checker.seeded import seeded_grads


def hard_option(obj: Any, first: tuple, args: tuple, first_report: Any,
                report: Any) -> Finding | None:
    """The warning that replaces ``report``'s undeclared-estimator errors (``report``: the
    check of the further set ``args``; ``first``: the first set's arguments, checked in
    ``first_report``) when backward on ``args`` is the first set's verified gradient (see the
    module); else None."""
    errors = [f for f in report.findings if f.is_error]
    if not errors or any(f.code != "undeclared-estimator" for f in errors):
        return None
    if first_report.errors or not isinstance(obj, type) or len(first) != len(args):
        return None
    from gradsmith.checker.refused import _differs
    from gradsmith.discovery.source import forward_parameters

    names = forward_parameters(obj)
    changed = {}
    for i, (a, b) in enumerate(zip(first, args)):
        if _differs(a, b):
            changed[i] = b
        elif not _same(a, b):
            return None  # other tensors or values: the first set verified other inputs
    if not changed or not _same_backward(obj, first, args):
        return None
    said = ", ".join(f"{names[i] if i < len(names) else i}={v!r}" for i, v in changed.items())
    return Finding(
        "straight-through-option", "warning",
        f"with {said} forward is piecewise constant and backward returns exactly the gradient "
        f"it returns with the first set's options, which the gradients check verified there "
        f"(same inputs, random state and grad_output): a straight-through estimator the option "
        f"selects, on purpose in such a hard mode; not declared, it is checked only as that",
        "nothing to fix if the option is a straight-through mode; to have it checked as an "
        "estimator, declare it", errors[0].check, errors[0].input,
        {"options": {names[i] if i < len(names) else str(i): v for i, v in changed.items()}})


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            torch.equal(a.detach(), b.detach()))
    return a is b or (type(a) is type(b) and not isinstance(a, torch.Tensor) and _eq(a, b))


def _eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object without a plain equality: not the same
        return False


def _same_backward(obj: type, first: tuple, args: tuple) -> bool:
    """Whether backward's gradients on ``args`` equal those on ``first`` (same tensors) at
    the same random state and grad_output."""
    import torch

    got = [_gradients(obj, a) for a in (first, args)]
    if any(g is None for g in got) or len(got[0]) != len(got[1]) or not any(
            g is not None for g in got[0]):
        return False
    for a, b in zip(*got):
        if (a is None) != (b is None):
            return False
        if a is not None and (a.shape != b.shape or not torch.allclose(
                a.to(torch.float64), b.to(torch.float64), rtol=1e-6, atol=1e-9)):
            return False
    return True


def _gradients(obj: type, args: tuple) -> list | None:
    import torch

    leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor)
              and a.requires_grad else a for a in args]
    wrt = [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad]
    if not wrt:
        return None
    grads = seeded_grads(obj, leaves, wrt, seed=1)
    return None if grads is None else list(grads)
