"""The result of a check: findings (what is wrong, where, how to fix it) and what ran."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

SEVERITIES = ("error", "warning", "info")


@dataclass
class Finding:
    """One observation about a Function.

    Attributes:
        code: stable kebab-case identifier, e.g. ``"gradient-mismatch"`` (see :mod:`gradsmith.checker.codes`).
        severity: ``"error"`` (the Function is wrong), ``"warning"`` (suspicious or wasteful)
            or ``"info"`` (worth knowing, not a problem).
        message: what was observed and where: which input, which elements, expected vs got.
        hint: how to fix it.
        check: name of the check that produced it.
        input: label of the input concerned (e.g. ``"x"`` or ``"args[1][0]"``), or None.
        details: JSON-ready extra data (indices, numbers).

    Example:
        >>> f = Finding("kink", "info", "x[0] sits on a kink", "nothing to fix", "gradients")
        >>> f.is_error
        False
    """

    code: str
    severity: str
    message: str
    hint: str = ""
    check: str = ""
    input: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a message quoting torch's exception must not pass on torch's "please file an issue"
        from gradsmith.checker.explain import strip_boilerplate

        self.message = strip_boilerplate(self.message)
        self.hint = strip_boilerplate(self.hint)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    @property
    def is_incomplete(self) -> bool:
        """A planned check did not establish its property (it crashed, could not compare or
        compared nothing but zeros): the report is INCOMPLETE, never PASSED. Said by
        ``details["incomplete"]``, so the report's JSON carries it too."""
        return bool(self.details.get("incomplete")) and not self.is_error

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["details"] = _jsonable(self.details)
        return data

    def __str__(self) -> str:
        where = f" [{self.input}]" if self.input else ""
        text = f"{self.severity.upper()} {self.code}{where}: {self.message}"
        return f"{text}\n    fix: {self.hint}" if self.hint else text


@dataclass
class Report:
    """Everything :func:`gradsmith.check` found out about one Function.

    Attributes:
        name: the Function's name (or the ``name`` option).
        findings: all findings, errors first.
        checks: names of the checks that ran.
        skipped: check name -> reason it did not run.
        elapsed: wall time of the whole check, in seconds.
        timings: check name -> seconds it took (summed over input sets and examples): where
            the time went, e.g. the eager checks apart from the deployment checks.
        saved_bytes: bytes of tensors saved for backward (None when not measurable).
        jacobians: label -> (analytic, numerical) 2-D float64 Jacobian blocks for gradient
            mismatches (cropped around the worst element when large).
        compat: the compatibility matrix, column (``eager``, ``compile``, ``export``,
            ``autocast``, ``float32``, ``checkpoint``, ``torch.func``) -> ``{"status",
            "codes", "note"}``; empty when the deployment checks did not run.

    Example:
        >>> r = Report(name="f")
        >>> r.passed
        True
    """

    name: str
    findings: list[Finding] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    elapsed: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    saved_bytes: int | None = None
    jacobians: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    compat: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when no finding has severity "error" and every planned check that applies
        ran to the end and was exercised (no finding :attr:`Finding.is_incomplete`)."""
        return not self.errors and not self.incomplete

    @property
    def incomplete(self) -> list[Finding]:
        """Findings saying a planned check did not establish its property."""
        return [f for f in self.findings if f.is_incomplete]

    @property
    def verdict(self) -> str:
        """``"FAILED"`` (an error), ``"INCOMPLETE"`` (no error, but a planned check crashed,
        could not compare or was never exercised) or ``"PASSED"``."""
        if self.errors:
            return "FAILED"
        return "INCOMPLETE" if self.incomplete else "PASSED"

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    def codes(self, severity: str | None = None) -> set[str]:
        """Codes of the findings, optionally only those of one severity."""
        return {f.code for f in self.findings if severity is None or f.severity == severity}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (Jacobians as nested lists)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "verdict": self.verdict,
            "elapsed": round(self.elapsed, 4),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "checks": list(self.checks),
            "skipped": dict(self.skipped),
            "saved_bytes": self.saved_bytes,
            "findings": [f.to_dict() for f in self.findings],
            "compat": _jsonable(self.compat),
            "jacobians": {k: {"analytic": a.tolist(), "numerical": n.tolist()}
                          for k, (a, n) in self.jacobians.items()},
        }

    def __str__(self) -> str:
        return self.format()

    def format(self, *, skipped: bool = True) -> str:
        """The readable report; ``str(report)`` is ``report.format()``.

        Args:
            skipped: also list the checks that did not run and why (one line per reason).
                ``gradsmith check`` shows them only with ``-v``.

        Example:
            >>> Report(name="f", skipped={"vmap": "no vmap rule"}).format(skipped=False)
            'gradsmith check f: PASSED (0.00s, checks: none)'
        """
        lines = [f"gradsmith check {self.name}: {self.verdict} ({self.elapsed:.2f}s, "
                 f"checks: {', '.join(self.checks) or 'none'})"]
        lines += [f"  {line}" for f in self.findings for line in str(f).splitlines()]
        by_reason: dict[str, list[str]] = {}
        for name, why in self.skipped.items() if skipped else ():  # one line per reason
            by_reason.setdefault(why, []).append(name)
        lines += [f"  skipped {', '.join(names)}: {why}" for why, names in by_reason.items()]
        if self.saved_bytes is not None:
            lines.append(f"  saved for backward: {self.saved_bytes} bytes")
        if self.compat:
            from gradsmith.checker.deploy.matrix import line  # an opt-in column if asked for

            lines.append("  compat: " + line(self.compat))
        return "\n".join(lines)

    def sort(self) -> None:
        self.findings.sort(key=lambda f: SEVERITIES.index(f.severity))

    def add_timings(self, other: Report) -> None:
        """Add ``other``'s per-check seconds (a further input set or example) to these."""
        for name, seconds in other.timings.items():
            self.timings[name] = self.timings.get(name, 0.0) + seconds

    def merge_exercised(self, other: Report) -> None:
        """Before merging ``other`` (a further input set or example) into this report:
        backward counts as exercised when any set exercised it, so ``not-exercised`` stays
        only when both say it (``other``'s own is dropped; it adds nothing new)."""
        ran = any(c in other.checks for c in ("gradients", "surrogate"))
        if ran and "not-exercised" not in other.codes():
            self.findings = [f for f in self.findings if f.code != "not-exercised"]
        other.findings = [f for f in other.findings if f.code != "not-exercised"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)
