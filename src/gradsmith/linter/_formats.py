"""Output formats: text (grouped by file), json, sarif (2.1.0), github (annotations)."""

from __future__ import annotations

import json
from collections import Counter
from itertools import groupby
from pathlib import Path

from gradsmith.linter._finding import LintFinding
from gradsmith.linter._registry import RULES

FORMATS = ("text", "json", "sarif", "github")
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def text(findings: list[LintFinding]) -> str:
    """Human-readable, grouped by file, with a summary line; ``[*]`` marks what --fix fixes.

    Example:
        >>> from gradsmith.linter._finding import Edit, LintFinding
        >>> fixable = (Edit((3, 5), (3, 10), ".detach()"),)
        >>> print(text([LintFinding("a.py", 3, 5, "GS201", "warning", "uses .data", fixable)]))
        a.py
          3:5  warning  GS201  [*] uses .data
        <BLANKLINE>
        1 finding: 0 errors, 1 warning, 0 info
        [*] 1 fixable with `gradsmith lint --fix`
    """
    lines = []
    for path, group in groupby(findings, key=lambda f: f.path):
        lines.append(path)
        for f in group:
            mark = "[*] " if f.fixable else ""
            lines.append(f"  {f.line}:{f.col}  {f.severity:<7}  {f.code}  {mark}{f.message}")
        lines.append("")
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    noun = "finding" if len(findings) == 1 else "findings"
    lines.append(
        f"{len(findings)} {noun}: {counts['error']} error{'s' * (counts['error'] != 1)}, "
        f"{counts['warning']} warning{'s' * (counts['warning'] != 1)}, {counts['info']} info"
    )
    fixable = sum(f.fixable for f in findings)
    if fixable:
        lines.append(f"[*] {fixable} fixable with `gradsmith lint --fix`")
    return "\n".join(lines)


def statistics(findings: list[LintFinding], fmt: str = "text") -> str:
    """How many findings of each code, most frequent first (``--statistics``).

    ``fmt`` is ``"text"`` (count, code, ``[*]`` when fixable, rule name) or ``"json"``.

    Example:
        >>> from gradsmith.linter._finding import LintFinding
        >>> found = [LintFinding("a.py", n, 1, "GS201", "warning", "uses .data") for n in (3, 7)]
        >>> print(statistics(found))
        2  GS201       dot-data
    """
    counts = Counter(f.code for f in findings)
    fixable = {f.code for f in findings if f.fixable}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        return json.dumps([{"code": code, "name": RULES[code].name, "count": n,
                            "fixable": code in fixable} for code, n in rows], indent=2)
    width = max((len(str(n)) for n in counts.values()), default=1)
    return "\n".join(f"{n:>{width}}  {code}  {'[*]' if code in fixable else '   '}  "
                     f"{RULES[code].name}" for code, n in rows)


def as_json(findings: list[LintFinding]) -> str:
    """A JSON list of {path, line, col, code, severity, message}."""
    return json.dumps([f.as_dict() for f in findings], indent=2)


def sarif(findings: list[LintFinding], version: str = "0") -> str:
    """SARIF 2.1.0 log with one run; rules come from the registry."""
    codes = sorted(RULES)
    index = {code: i for i, code in enumerate(codes)}
    rules = [
        {
            "id": code,
            "name": RULES[code].name,
            "shortDescription": {"text": RULES[code].summary},
            "fullDescription": {"text": f"{RULES[code].why} Fix: {RULES[code].fix}"},
            "help": {"text": RULES[code].fix},
            "defaultConfiguration": {"level": _SARIF_LEVEL[RULES[code].severity]},
        }
        for code in codes
    ]
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": Path(f.path).as_posix()},
                    "region": {"startLine": max(f.line, 1), "startColumn": max(f.col, 1)},
                }
            }],
        }
        for f in findings
    ]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gradsmith-lint",
                "version": version,
                "rules": rules,
            }},
            "results": results,
        }],
    }
    return json.dumps(log, indent=2)


def _escape(value: str, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        value = value.replace(":", "%3A").replace(",", "%2C")
    return value


def github(findings: list[LintFinding]) -> str:
    """GitHub Actions workflow commands: ``::error file=...,line=...,col=...::message``."""
    return "\n".join(
        f"::{_GITHUB_LEVEL[f.severity]} file={_escape(f.path, True)},line={f.line},"
        f"col={f.col},title={f.code}::{_escape(f'{f.code} {f.message}')}"
        for f in findings
    )


def render(findings: list[LintFinding], fmt: str, version: str = "0") -> str:
    """Render ``findings`` in format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "text":
        return text(findings)
    if fmt == "json":
        return as_json(findings)
    if fmt == "sarif":
        return sarif(findings, version)
    if fmt == "github":
        return github(findings)
    raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
