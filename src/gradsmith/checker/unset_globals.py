"""Errors on module configuration a training script sets: the setup's, not the Function's.

Research code often keeps run settings in a module global that is None at import and filled by
the training script (``global_args = None`` in ``luq/LUQ.py``; ``LUQ.global_args = args`` in
``trainer.py``); forward or backward then reads it (``global_args["rec_grads"]``). Checked
alone, the Function meets the import-time None and raises "'NoneType' object is not
subscriptable": nothing shows the Function is wrong, and no synthesised input can fix it. Such
an error is ``unset-global`` (a warning; the verdict is INCOMPLETE and the later checks do not
run), naming the global, the module that holds it, what the code reads from it, where the
project sets it, and how to set it for the check.

Only an error about a value's kind raised on a line of the user's that reads a global of the
raising frame's module whose value is None, and that the module itself binds to None at top
level, counts; a None the Function computed stays its own error.
"""

from __future__ import annotations

import ast
import linecache
import re
import traceback

from gradsmith.checker.report import Finding
from gradsmith.discovery.module_settings import bound_to_none, importable, set_at, setting_advice

_KIND_ERRORS = (TypeError, AttributeError)
_NONE_USE = re.compile(r"'NoneType' object (?:is not (?:subscriptable|callable|iterable)"
                       r"|has no attribute|does not support item assignment)"
                       r"|argument of type 'NoneType' is not iterable")


def unset_global(exc: BaseException) -> dict | None:
    """What ``exc`` says of an unset module global: ``{"name", "module", "file", "reads",
    "set_at", "keyed"}``, or None when the error is not shown to come from one (see the module's
    docstring)."""
    from gradsmith.checker.explain import _SKIP_DIRS

    if not isinstance(exc, _KIND_ERRORS) or not _NONE_USE.search(str(exc)):
        return None
    user = [(f, line) for f, line in traceback.walk_tb(exc.__traceback__)
            if not f.f_code.co_filename.startswith(_SKIP_DIRS)
            and not f.f_code.co_filename.startswith("<")]
    if not user:
        return None
    frame, lineno = user[-1]
    code = linecache.getline(frame.f_code.co_filename, lineno)
    try:
        names = {n.id for n in ast.walk(ast.parse(code.strip()))
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    except SyntaxError:
        names = set(re.findall(r"\b[A-Za-z_]\w*\b", code))
    path = frame.f_globals.get("__file__") or frame.f_code.co_filename
    module, top = importable(path, frame.f_globals.get("__name__", ""))
    for name in sorted(names):
        if name in frame.f_locals or name not in frame.f_globals \
                or frame.f_globals[name] is not None or not bound_to_none(path, name):
            continue
        return {"name": name, "module": module, "file": path, "reads": _reads(code, name),
                "set_at": set_at(top, module, name), "keyed": bool(
                    re.search(rf"\b{re.escape(name)}\s*\[", code))}
    return None


def finding(exc: BaseException, where: str, check: str, unset: dict, message: str,
            details: dict) -> Finding:
    """The ``unset-global`` finding for ``exc``, raised by ``where`` (forward or backward)."""
    name, module = unset["name"], unset["module"]
    reads = f" (it reads {', '.join(unset['reads'])})" if unset["reads"] else ""
    where_set = (f"; the project sets it at {unset['set_at']}" if unset["set_at"]
                 else "; nothing in the project's files sets it")
    return Finding(
        "unset-global", "warning",
        f"{message}: `{name}` is a module global of {module} that is None at import and set "
        f"by the project's own setup, not by the Function{reads}{where_set}. No input can "
        f"fill it, so what the {where} does there is unverified and the verdict is INCOMPLETE",
        "set it before the check runs: " + setting_advice(
            module, name, [r.strip("'\"") for r in unset["reads"] if r[0] in "'\""],
            unset["keyed"]),
        check, details={**details, "incomplete": True, "global": f"{module}.{name}",
                        "reads": unset["reads"], "set_at": unset["set_at"]})


def _reads(code: str, name: str) -> list[str]:
    """What the failing line reads from the global: keys (``'rec_grads'``), attributes."""
    keys = re.findall(rf"\b{re.escape(name)}\s*\[\s*('[^']*'|\"[^\"]*\")\s*\]", code)
    attrs = [f".{a}" for a in re.findall(rf"\b{re.escape(name)}\.(\w+)", code)]
    return list(dict.fromkeys(keys + attrs))
