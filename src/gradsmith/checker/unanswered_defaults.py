"""An optional forward parameter backward has no gradient slot for: a trap, harm only if passed.

``forward(ctx, input, stride=2)`` whose backward returns one gradient answers ``apply(input)``,
the call its module makes; ``apply(input, 3)`` makes autograd raise "returned an incorrect
number of gradients (expected 2, got 1)". Harm is demonstrated only by a call that passes the
parameter: a call in the Function's module that does is checked as it is written (synthesis
passes the parameter, see :func:`gradsmith.discovery.defaults.passable`) and ends in
``wrong-grad-count``. Otherwise the checked call leaves the parameter at its default, and this
warning says which parameters a caller cannot pass, so a PASS states the call it holds for.
"""

from __future__ import annotations

import inspect
from typing import Any

from gradsmith.checker.report import Finding
from gradsmith.discovery.defaults import passable


def findings(owner: Any, passed: int, returned: int, check: str) -> list[Finding]:
    """A warning when the checked call passes ``passed`` arguments, backward ``returned`` as
    many gradients and forward's later parameters, each with a default, are ones no call in the
    module passes; [] otherwise.

    Example:
        >>> import torch
        >>> class Sub(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, stride=2):
        ...         return x[..., ::stride]
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g
        >>> [f.message for f in findings(Sub, 1, 1, "structure")]  # doctest: +ELLIPSIS
        ['forward also takes stride (default 2), left at its default here: backward returns 1 ...]
    """
    if not isinstance(owner, type) or passed != returned:
        return []
    try:
        params = list(inspect.signature(owner.forward).parameters.values())
    except (TypeError, ValueError, AttributeError):
        return []
    if "setup_context" not in vars(owner) and params:
        params = params[1:]  # ctx
    if len(params) <= passed or passable(owner, params) != passed:
        return []
    left = params[passed:]
    named = ", ".join(f"{p.name} (default {p.default!r})" for p in left)
    which = " or ".join(p.name for p in left)
    count = f"{returned} gradient{'s' if returned != 1 else ''}"
    return [Finding(
        "unanswered-default", "warning",
        f"forward also takes {named}, left at {'its default' if len(left) == 1 else 'their defaults'} "
        f"here: backward returns {count}, so a call that passes {which} raises \"returned an "
        f"incorrect number of gradients\"; no call in the Function's module passes it, so the "
        "verdict holds for calls that leave it at its default",
        f"return one value per forward parameter (None for {which}), or drop the parameter "
        "from forward if callers must not set it", check,
        details={"unanswered": [p.name for p in left]})]
