"""``gradsmith check --format github|sarif``: the findings of a run as GitHub Actions
annotations or a SARIF 2.1.0 log, like ``gradsmith lint``'s (same levels and escaping).

Each finding is placed at the line that defines its Function (``file``/``line`` of the row); a
row that failed without a report (import error, crash, timeout) is one error at that place,
with the row's reason. Passing rows without warnings print nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from gradsmith import __version__
from gradsmith.checker.code_docs import help_text
from gradsmith.cli._check_output import _relative
from gradsmith.linter._formats import _GITHUB_LEVEL, _SARIF_LEVEL, _escape


def annotations(result) -> list[dict]:
    """``{path, line, code, severity, message, hint}`` for every finding worth a note."""
    out = []
    for row in result.rows:
        path = _relative(row.get("file")) if row.get("file") else row["name"].split("::")[0]
        line = int(row.get("line") or 1)
        report = row.get("report")
        findings = report["findings"] if report else []
        if row["verdict"] == "fail" and row["error"] not in (None, "incomplete") and not [
                f for f in findings if f["severity"] == "error"]:
            findings = [{"code": row["error"], "severity": "error",
                         "message": row.get("reason") or row["error"], "hint": ""},
                        *findings]
        for f in findings:
            if f["severity"] == "info":
                continue
            out.append({"path": path, "line": max(line, 1), "name": row["name"],
                        "code": f["code"], "severity": f["severity"],
                        "message": f["message"], "hint": f.get("hint") or ""})
    return out


def github(result) -> str:
    """``::error file=...,line=...,title=...::message`` lines (GitHub Actions)."""
    return "\n".join(
        f"::{_GITHUB_LEVEL[a['severity']]} file={_escape(a['path'], True)},line={a['line']},"
        f"title={_escape(a['code'] + ' in ' + a['name'], True)}::"
        f"{_escape(a['message'] + (' Fix: ' + a['hint'] if a['hint'] else ''))}"
        for a in annotations(result))


def sarif(result) -> str:
    """A SARIF 2.1.0 log with one run of ``gradsmith-check``."""
    found = annotations(result)
    codes = sorted({a["code"] for a in found})
    index = {code: i for i, code in enumerate(codes)}
    rules = [{"id": code, "name": code, "shortDescription": {"text": code},
              "help": {"text": help_text(code)}}
             for code in codes]
    results = [{
        "ruleId": a["code"], "ruleIndex": index[a["code"]], "level": _SARIF_LEVEL[a["severity"]],
        "message": {"text": f"{a['name']}: {a['message']}"
                            + (f" Fix: {a['hint']}" if a["hint"] else "")},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": Path(a["path"]).as_posix()},
            "region": {"startLine": a["line"]}}}],
    } for a in found]
    log = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "gradsmith-check", "version": __version__,
                                         "rules": rules}},
                     "results": results}]}
    return json.dumps(log, indent=2)


def render(result, fmt: str) -> str:
    """``github`` or ``sarif``."""
    return github(result) if fmt == "github" else sarif(result)
