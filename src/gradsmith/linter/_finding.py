"""What a lint run reports: one :class:`LintFinding` per problem, optionally with a safe fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Edit:
    """Replace the text between two positions (1-based lines, 0-based character columns)."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str


@dataclass(frozen=True)
class LintFinding:
    """One problem found by ``gradsmith lint``.

    Attributes:
        path: File the finding is in (``"<string>"`` for linted source text).
        line: 1-based line.
        col: 1-based column (characters).
        code: Rule code such as ``"GS101"``.
        severity: ``"error"``, ``"warning"`` or ``"info"``.
        message: What is wrong, why it matters, and what to do.
        fix: Text edits that fix the problem safely, or ``()`` when there is no safe fix.

    Example:
        >>> f = LintFinding("a.py", 3, 5, "GS201", "warning", "uses .data")
        >>> f.as_dict()["code"], f.fixable
        ('GS201', False)
    """

    path: str
    line: int
    col: int
    code: str
    severity: Severity
    message: str
    fix: tuple[Edit, ...] = field(default=(), compare=False, repr=False)

    @property
    def fixable(self) -> bool:
        """Whether the finding carries a safe automatic fix."""
        return bool(self.fix)

    def as_dict(self) -> dict[str, object]:
        """The JSON form: path, line, col, code, severity, message."""
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
        }

    def sort_key(self) -> tuple[str, int, int, str]:
        """Order by file, position, then code."""
        return (self.path, self.line, self.col, self.code)
