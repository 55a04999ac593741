"""``log(1 - exp(x))`` in a formula: ``x`` is a log-probability, below 0 (private).

Log-space recursions (monotonic attention, HMM and CTC marginals, survival models) take the log
of a probability's complement from its log, written ``log(-expm1(x))``, ``log1p(-exp(x))`` or
``log(1 - exp(x))``. The formula is real only for ``x < 0``. Drawn positive (synthesis tries
[0.5, 1.5) first), it is NaN; a forward that reads it only at padded cells stays finite, while a
backward that multiplies it by a zero gradient returns NaN: a false nan-gradient on a correct
Function. Read from the formula, never by running it; the probe confirms the guess.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

from gradsmith.discovery.source import call_name

BOUNDS = (-math.inf, 0.0)
WHY = "forward takes log(1 - exp(x)): a log-probability, the domain it is written for"
_EXP = {"exp", "expm1"}


def log_complement_of(call: ast.Call, param_of: Callable[[ast.AST], str | None]) -> str | None:
    """The parameter ``x`` of ``log(-expm1(x))``, ``log1p(-exp(x))`` or ``log(1 - exp(x))``
    (functions or methods: ``x.exp()``), when ``call`` is one; None otherwise.

    Example:
        >>> node = ast.parse("torch.log(-torch.expm1(lp))").body[0].value
        >>> log_complement_of(node, lambda n: n.id if isinstance(n, ast.Name) else None)
        'lp'
        >>> node = ast.parse("torch.log1p(-x.exp())").body[0].value
        >>> log_complement_of(node, lambda n: n.id if isinstance(n, ast.Name) else None)
        'x'
        >>> node = ast.parse("torch.log(1 + torch.exp(x))").body[0].value
        >>> log_complement_of(node, lambda n: n.id if isinstance(n, ast.Name) else None)
    """
    callee = call_name(call)
    arg = call.args[0] if call.args else (
        call.func.value if isinstance(call.func, ast.Attribute) else None)
    if callee not in ("log", "log1p") or arg is None:
        return None
    if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
        wanted = "expm1" if callee == "log" else "exp"
        return _exp_argument(arg.operand, param_of, {wanted})
    if callee == "log" and isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Sub) and \
            isinstance(arg.left, ast.Constant) and arg.left.value == 1:
        return _exp_argument(arg.right, param_of, {"exp"})
    return None


def _exp_argument(node: ast.AST, param_of: Callable[[ast.AST], str | None],
                  wanted: set[str]) -> str | None:
    if not (isinstance(node, ast.Call) and call_name(node) in wanted & _EXP):
        return None
    if node.args:
        return param_of(node.args[0])
    return param_of(node.func.value) if isinstance(node.func, ast.Attribute) else None
