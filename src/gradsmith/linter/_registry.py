"""The rule registry: every rule registers itself here, docs and tests read it from here.

A rule is metadata (code, severity, message, why, fix, bad/good examples) plus an optional
checker. Checkers come in two scopes: ``"function"`` checkers run once per discovered
``autograd.Function`` subclass, ``"module"`` checkers once per parsed file (call sites).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gradsmith.linter._finding import SEVERITIES, Severity

_CODE = re.compile(r"^GS[0-9]{3}$")


@dataclass(frozen=True)
class Rule:
    """Metadata of one lint rule.

    Attributes:
        code: ``GS`` + three digits; the hundreds give the group.
        name: Short kebab-case name.
        severity: Default severity of its findings.
        summary: One line: what is wrong.
        why: Why it matters.
        fix: What to do instead.
        bad: Code example that triggers the rule.
        good: The corrected example.
        autofix: Whether ``--fix`` can repair it.
        scope: ``"function"``, ``"module"`` or ``"engine"`` (reported by the engine itself).
        brief: The head of each finding's one-line message (the why and the fix are in
            docs/lint.md and ``gradsmith lint --explain CODE``).
    """

    code: str
    name: str
    severity: Severity
    summary: str
    why: str
    fix: str
    bad: str
    good: str
    autofix: bool = False
    scope: str = "function"
    brief: str = ""

    def message(self, detail: str = "") -> str:
        """The one-line finding message: brief and detail, at most :data:`MESSAGE_LIMIT` chars.

        Example:
            >>> Rule("GS999", "x", "error", "s", "w", "f", "b", "g", brief="bad").message("`x`")
            'bad: `x`'
        """
        head = self.brief or self.summary
        text = " ".join(f"{head}: {detail}".split()) if detail else head
        return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


#: Longest finding message (flake8/ruff users expect one short line).
MESSAGE_LIMIT = 100


RULES: dict[str, Rule] = {}
CHECKERS: dict[str, list[tuple[Rule, Callable]]] = {"function": [], "module": []}

GROUPS = {
    "GS0": "Parse and internal",
    "GS1": "Correctness (wrong gradients, crashes, silent corruption)",
    "GS2": "Autograd hygiene (fragile or deprecated; wrong higher-order gradients)",
    "GS3": "Performance",
}


def define(rule: Rule) -> Rule:
    """Add ``rule`` to the registry; codes must be unique and well formed."""
    if not _CODE.match(rule.code):
        raise ValueError(f"rule code must look like GS123, got {rule.code!r}")
    if rule.code in RULES:
        raise ValueError(f"rule code {rule.code} is registered twice")
    if rule.severity not in SEVERITIES:
        raise ValueError(f"{rule.code}: severity must be one of {SEVERITIES}, got {rule.severity}")
    RULES[rule.code] = rule
    return rule


def checker(*rules: Rule, scope: str = "function") -> Callable[[Callable], Callable]:
    """Decorator registering ``fn`` as the checker of ``rules`` (all run in one pass).

    The checker is called as ``fn(target, report)``; ``report(code, node, detail, fix=())``.
    """

    def decorate(fn: Callable) -> Callable:
        for rule in rules:
            define(rule)
        CHECKERS[scope].append((rules[0], fn))
        return fn

    return decorate
