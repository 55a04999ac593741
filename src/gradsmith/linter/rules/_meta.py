"""GS0xx: problems reported by the engine itself (parse, decode, internal errors)."""

from __future__ import annotations

from gradsmith.linter._registry import Rule, define

define(Rule(
    "GS001", "syntax-error", "error", "The file is not valid Python",
    "Nothing in it can be checked, and importing it fails.",
    "fix the syntax error at the reported position.",
    bad="def f(:\n    pass\n",
    good="def f():\n    pass\n",
    scope="engine",
    brief="syntax error",
))
define(Rule(
    "GS004", "newer-python-syntax", "warning",
    "The file uses syntax of a newer Python than the one running gradsmith",
    "Type parameters (`class C[T]`, `def f[T]()`), `type X = ...` (Python 3.12) or "
    "`except A, B:` (3.14) are valid for a project that targets that Python, but this "
    "interpreter's parser rejects them, so the file is not linted. Not a defect of the code.",
    "run gradsmith under the Python the project targets (the message names it).",
    bad="class Box[T]:  # GS004 under Python 3.11\n    pass\n",
    good="from typing import Generic, TypeVar\n\nT = TypeVar('T')\n\n\n"
    "class Box(Generic[T]):\n    pass\n",
    scope="engine",
    brief="syntax of a newer Python: not linted",
))
define(Rule(
    "GS002", "undecodable-file", "error", "The file cannot be read or decoded",
    "Python decodes source as UTF-8 unless a PEP 263 coding cookie says otherwise.",
    "save the file as UTF-8 or add a correct `# -*- coding: ... -*-` line.",
    bad="# the bytes b'x = \"\\xff\"' saved without a coding cookie\n",
    good="x = 'ÿ'  # saved as UTF-8\n",
    scope="engine",
    brief="cannot read or decode the file",
))
define(Rule(
    "GS003", "internal-error", "warning", "A lint rule crashed on this code",
    "The rule could not check this Function, so problems may be missed; this is a "
    "gradsmith bug.",
    "report it with the code that triggers it; other rules still ran.",
    bad="# (no user code triggers this on purpose)\n",
    good="# (no user code triggers this on purpose)\n",
    scope="engine",
    brief="internal error in a rule",
))
