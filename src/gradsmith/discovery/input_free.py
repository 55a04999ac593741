"""A forward error no input can change: the raising call reads none of forward's values (private).

``torch.sqrt(2 * torch.pi)`` raises ``TypeError`` (``sqrt`` of a Python float) on every call,
whatever gradsmith passes: its arguments are a literal and a module constant. Such an error is
the Function's, and a row that skips it hides a defect. Every other forward error may be the
invented inputs' fault and stays what it was (a skip, an INCOMPLETE).

An error counts as input-free only when all of these hold, read from the traceback and from the
AST of forward's own source:

- it was raised in forward's own frame (directly, or inside torch or a builtin that forward's
  line called), not in a helper, whose arguments would need a call graph;
- its type is ``TypeError`` or ``ZeroDivisionError``: mistakes in the code, never the machine
  (no CUDA, no process group, a missing package) and never a deliberate ``raise``; neither its
  message nor the call names a device or a backend (``torch.cuda.FloatTensor(3)`` raises
  ``TypeError`` on a CPU-only machine);
- the raising expression (the exact span Python records for the instruction) reads no
  parameter of forward, no ``ctx``, no local of forward (anything derived from them) and no
  closure variable; every name it reads is a builtin or a library module (torch, numpy, scipy,
  the standard library), never a global of the user's, which may be set at run time;
- its statement is reached on every call: a direct statement of forward's body (or of a
  ``with`` block there), after no statement that can ``return``.

Three more errors are input-free whatever the raising expression reads, because what raises is
an operand's *kind*, proven from the code: a ``NameError`` on a name defined nowhere
(:mod:`gradsmith.discovery.never_returns`), an autograd.Function class called without
``.apply`` and a tensor method named without its call (:mod:`gradsmith.discovery.fixed_operands`).
"""

from __future__ import annotations

import ast
import builtins
import linecache
import os
import re
import sys
import types
from typing import Any

import gradsmith
from gradsmith.discovery.fixed_operands import fixed_operand
from gradsmith.discovery.fresh_ctx import fresh_ctx_error
from gradsmith.discovery.never_returns import name_explanation, undefined_read
from gradsmith.discovery.source import function_def

#: Errors that say the code is wrong whatever the machine: a lost CUDA device, a missing
#: package or process group raise other types, and so do deliberate ``raise`` statements.
_TYPES = (TypeError, ZeroDivisionError)
#: The machine, not the code: ``torch.cuda.FloatTensor(3)`` raises ``TypeError`` ("type
#: torch.cuda.FloatTensor not available") on a CPU-only machine and runs on a GPU.
_MACHINE = re.compile(r"cuda|device|mps|xpu|hip|not available|not compiled|distributed",
                      re.IGNORECASE)
_LIBRARIES = frozenset({"torch", "numpy", "scipy"})


def _skip_dirs() -> tuple[str, ...]:
    """torch's and gradsmith's folders (torch imported only here: `gradsmith lint` imports
    discovery on machines without torch)."""
    import torch

    return tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, gradsmith))


def input_free(exc: BaseException) -> dict | None:
    """Where forward raised for a reason no input reaches, or None (see the module's rules).

    Returns:
        ``{"file", "line", "function", "code", "call", "type"}``: ``call`` is the raising
        expression's source (``torch.sqrt(2 * torch.pi)``), ``code`` the whole line, ``type``
        the exception's class name.
    """
    if _MACHINE.search(str(exc)):
        return None
    frames = _user_frames(exc.__traceback__)
    if not frames or frames[-1][0].f_code.co_name != "forward":
        return None  # raised in a helper (or nowhere in user code)
    frame, lasti = frames[-1]
    code = frame.f_code
    span = _span(code, lasti)
    if span is None:
        return None
    fresh = fresh_ctx_error(exc, frame, span[0], _constant_name)
    if fresh is not None and not _MACHINE.search(fresh["call"]):  # `a, b = ctx.saved_tensors`
        return {"file": code.co_filename, "function": "forward", "type": type(exc).__name__,
                **fresh}
    if isinstance(exc, NameError):  # a name bound nowhere, read where every call gets
        found = undefined_read(code, frame.f_globals, span[0])
        if found is None or found["name"] != getattr(exc, "name", None):
            return None
        return {**found, "call": found["name"], "type": type(exc).__name__}
    if not isinstance(exc, _TYPES):
        return None
    call = _source(code.co_filename, *span)
    if call is None or _MACHINE.search(call):
        return None
    if (fixed := fixed_operand(exc, frame, span[0], call)) is not None:  # DirectQuant(x, k)
        line = linecache.getline(code.co_filename, span[0]).strip()
        return {"file": code.co_filename, "line": span[0], "function": "forward", "code": line,
                "call": " ".join(call.split()), "type": type(exc).__name__, **fixed}
    if not _reads_nothing_of_forward(call, frame):
        return None
    if not _reached_on_every_call(code, span[0]):
        return None
    line = linecache.getline(code.co_filename, span[0]).strip()
    return {"file": code.co_filename, "line": span[0], "function": "forward", "code": line,
            "call": call, "type": type(exc).__name__}


def explanation(found: dict) -> tuple[str, str]:
    """``(cause, fix)`` of an input-free forward error, for the finding."""
    if found.get("ctx_read"):  # see gradsmith.discovery.fresh_ctx
        read = ", ".join(f"`{r}`" for r in found["ctx_read"])
        return (f"`{found['code']}` reads {read} before forward has saved or set anything on "
                "ctx: a new ctx is the same on every call (nothing saved, no attribute set), so "
                "this raises whatever the inputs, and no input can make this Function run",
                "read saved tensors and ctx attributes in backward, after forward stored them; "
                "a backward written as a second `def forward` replaces the real forward "
                "(name it `backward`)")
    if found.get("kind") in ("undefined", "unbound"):  # see gradsmith.discovery.never_returns
        return name_explanation(found)
    if found.get("kind") == "function-class":  # see gradsmith.discovery.fixed_operands
        owner = found["owner"]
        return (f"`{found['operand']}` calls the autograd.Function class {owner} itself, not "
                f"`{owner}.apply`: that builds a {owner} object (never a tensor) whatever its "
                f"arguments, which `{found['call']}` rejects, on a line every call reaches: no "
                "input can make this Function run",
                f"call `{owner}.apply(...)` (or the module's alias of it) instead of `{owner}(...)`")
    if found.get("kind") == "method-object":
        return (f"`{found['operand']}` is the method itself, not its result (the call's "
                f"parentheses are missing): `{found['call']}` raises on a method object "
                "whatever the tensor holds, on a line every call reaches: no input can make "
                "this Function run", f"call the method: `{found['operand']}()`")
    cause = (f"`{found['call']}` reads no argument of forward, no ctx value and nothing "
             "derived from them, and forward reaches it on every call: it raises whatever the "
             "inputs, so no input can make this Function run")
    fix = f"fix `{found['call']}` in forward"
    if found["type"] == "TypeError":
        fix += (" (a torch function given a Python number needs a tensor, `torch.tensor(...)`, "
                "or the `math` module's function instead)")
    return cause, fix


def _user_frames(tb) -> list[tuple[types.FrameType, int]]:
    out = []
    skip = _skip_dirs()
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not name.startswith(skip) and not name.startswith("<"):
            out.append((tb.tb_frame, tb.tb_lasti))
        tb = tb.tb_next
    return out


def _span(code: types.CodeType, lasti: int) -> tuple[int, int, int, int] | None:
    """``(line, end_line, col, end_col)`` of the instruction at ``lasti``."""
    try:
        positions = list(code.co_positions())[lasti // 2]
    except (AttributeError, IndexError):
        return None
    return None if any(p is None for p in positions) else positions


def _source(filename: str, line: int, end_line: int, col: int, end_col: int) -> str | None:
    lines = [linecache.getline(filename, n) for n in range(line, end_line + 1)]
    if not all(lines):
        return None
    encoded = [text.encode() for text in lines]
    encoded[-1] = encoded[-1][:end_col]
    encoded[0] = encoded[0][col:]
    text = b"".join(encoded).decode(errors="replace").strip()
    return text or None


def _reads_nothing_of_forward(call: str, frame: types.FrameType) -> bool:
    try:
        tree = ast.parse(call, mode="eval")
    except SyntaxError:
        return False
    code = frame.f_code
    own = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Lambda, ast.comprehension, ast.NamedExpr, ast.Starred)):
            return False
        if not isinstance(node, ast.Name):
            continue
        if node.id in own:
            return False
        if not _constant_name(node.id, frame):
            return False
    return True


def _constant_name(name: str, frame: types.FrameType) -> bool:
    """A library module (torch, numpy, scipy, the standard library) or a builtin: nothing a
    user or gradsmith passes in. Never a global of the user's: a project's settings module or
    ``SCALE = None`` is filled in at run time (``glv.network_config[...]``)."""
    if name in frame.f_globals:
        value: Any = frame.f_globals[name]
        return isinstance(value, types.ModuleType) and \
            value.__name__.split(".")[0] in _LIBRARIES | sys.stdlib_module_names
    return hasattr(builtins, name)


def _reached_on_every_call(code: types.CodeType, line: int) -> bool:
    if (found := function_def(code)) is None:
        return False
    fn, start = found
    return _in_straight_line(fn.body, line - start + 1)


def _in_straight_line(body: list[ast.stmt], line: int) -> bool:
    for stmt in body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if isinstance(stmt, ast.Raise):
                return False  # a deliberate raise (abstract base, deprecation): not a mistake
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                return _in_straight_line(stmt.body, line)
            return isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign,
                                     ast.Return))
        if any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
            return False  # an earlier return: some input may never reach the line
    return False


def raising_inputs(call, plans: list, seed: int, tries: int = 4):
    """The first synthesised inputs on which forward raises an input-free error (see
    :func:`input_free`), as ``(args, description)``, or None. Tried when no layout let forward
    run: those inputs make the check report forward's error, which no other input avoids."""
    from gradsmith.discovery.build import build_args
    from gradsmith.discovery.layouts import layouts_for
    from gradsmith.discovery.probe import probe_failure

    tried = 0
    for slots in [p for i, p in enumerate(plans) if p not in plans[:i]]:
        for layout in layouts_for(slots):
            if tried == tries:
                return None
            tried += 1
            try:
                args, parts = build_args(slots, layout, seed, False)
            except Exception:  # noqa: BLE001 - a layout these slots cannot take: the next
                continue
            _, exc = probe_failure(call, args)
            found = input_free(exc) if exc is not None else None
            if found is not None:
                fresh, parts = build_args(slots, layout, seed, False)
                why = ("whatever the inputs (see the finding)" if found.get("kind") else
                       "which reads none of its inputs")
                return tuple(fresh), (f"{', '.join(parts)}; forward raises on every call at "
                                      f"`{found['call']}`, {why}")
    return None
