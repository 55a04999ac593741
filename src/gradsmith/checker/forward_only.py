"""A Function that is forward-only by design: nothing to check, not a failure (private).

Some Functions never mean to be differentiated: a graph node with an ONNX ``symbolic`` that
exists to be exported (auto_LiRPA's gradient-graph operators), or a class whose forward saves
nothing for a backward it never defines. Autograd stays loud about them (differentiating one
raises "You must implement either the backward or vjp method"), so reporting that raise as the
Function's error blames it for a use it was not written for. The report says instead "forward-
only: defines no backward, nothing to check", and the verdict is INCOMPLETE, never PASS.

A Function that evidently intends a backward keeps the error: one whose forward saves tensors
or state on ``ctx`` for later, or one with a misspelt backward (``backwards``, ``bwd``,
``_backward``), the cases lint's GS212 also reports.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from gradsmith.checker.report import Finding


def _own_classes(cls: type) -> list[type]:
    """The classes of ``cls``'s MRO that are not torch's (nor ``object``)."""
    return [k for k in cls.__mro__ if k is not object
            and not str(getattr(k, "__module__", "")).startswith("torch")]


def _misspelt(names: set[str]) -> str | None:
    """A class attribute that looks like a backward under another name."""
    for name in sorted(names):
        plain = name.lower().strip("_")
        if plain in ("backward", "vjp", "jvp") or plain.startswith(("backward", "bwd")) \
                or plain.endswith(("backward", "_bwd", "backwards")):
            return name
    return None


def _saves_state(forward: Any) -> bool:
    """Whether ``forward`` stores anything on its first parameter (ctx) or saves tensors:
    state kept for a backward. Unreadable source counts as saving (keep the error)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
    except (OSError, TypeError, SyntaxError):
        return True
    func = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                            ast.AsyncFunctionDef))), None)
    if func is None or not func.args.args:
        return False
    ctx = func.args.args[0].arg
    for node in ast.walk(func):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == ctx and (isinstance(node.ctx, ast.Store)
                                              or node.attr.startswith("save_for")):
            return True
    return False


def reason(cls: Any) -> str | None:
    """Why ``cls`` (a Function class) is forward-only by design, or ``None`` when it defines a
    backward, evidently intends one, or is not a Function class at all."""
    if not isinstance(cls, type):
        return None
    own = _own_classes(cls)
    names = {n for k in own for n in vars(k)}
    if not own or "backward" in names or "vjp" in names or "setup_context" in names:
        return None  # a backward (or a setup_context, which exists to feed one)
    if _misspelt(names - {"forward", "_backward_cls"}) is not None:  # torch's metaclass sets it
        return None  # a backward under another name: the author meant one
    if "symbolic" in names:
        return "it defines an ONNX `symbolic` and no backward: a graph node made for export"
    forward = next((vars(k)["forward"] for k in own if "forward" in vars(k)), None)
    forward = getattr(forward, "__func__", forward)
    if forward is None or _saves_state(forward):
        return None
    return "its forward saves nothing on ctx and it defines no backward (nor vjp)"


def finding(cls: Any) -> Finding | None:
    """The INCOMPLETE finding for a forward-only ``cls``, or ``None``."""
    why = reason(cls)
    if why is None:
        return None
    return Finding(
        "forward-only", "warning",
        f"forward-only: defines no backward, nothing to check ({why}). Differentiating it "
        "raises (autograd: 'You must implement either the backward or vjp method'), loudly, "
        "never a silent wrong gradient; the verdict is INCOMPLETE, not PASS",
        "if gradients should flow through it, define `@staticmethod def backward(ctx, "
        "*grad_outputs)`; if not, mark its outputs non-differentiable "
        "(`ctx.mark_non_differentiable`) so that autograd says so", "setup",
        details={"incomplete": True, "reason": why})
