"""``gradsmith check --select / --ignore / --require``: which findings count, and which
deployment columns (and ``second-order``) must hold (they fail the run like an eager error).
The command line, ``testing.assert_gradients`` and the pytest plugin apply the same policy, so
it lives here, below all three, importing no torch (the command-line process never does).

Applied to the rows after the run, in the ``gradsmith`` process: the workers always report
everything, so a row's JSON says what was ignored (``report.ignored``) and why a deployment
warning became an error (``details["required"]``). Validation needs no torch (it runs before
the workers start); rebuilding a row's text imports the report class, only when an option is
given.
"""

from __future__ import annotations

from typing import Any

from gradsmith._config import REQUIRABLE
from gradsmith._errors import GradsmithUsageError
from gradsmith._selection import selected

#: The matrix column of each deployment check (for a ``deployment-timeout`` row, which has
#: no matrix): ``gradsmith.checker.deploy.matrix.CHECK_COLUMNS``, kept equal by a test.
CHECK_COLUMN = {"compile": "compile", "export": "export", "autocast": "autocast",
                "precision": "float32", "checkpoint": "checkpoint", "torch_func": "torch.func",
                "vmap": "torch.func", "onnx": "onnx"}
#: Codes that only ``gradsmith check`` itself reports (not ``gradsmith.check``).
COMMAND_CODES = ("backward-crash", "synthesis-crash", "deployment-timeout",
                 "required-not-checked")
#: Requirable names that are properties of the eager checks, not deployment columns: name ->
#: (the warnings requiring it turns into errors, the check that establishes it).
EAGER_REQUIRABLE = {"second-order": (("double-backward-unsupported", "double-backward-error",
                                      "nan-double-backward"), "second_order")}
#: Words of every reason second_order gives for skipping a backward whose double backward
#: raises (``@once_differentiable``, itself or inside): that contract holds, nothing is missing.
_RAISES = "double backward raises"


def split(option: str, value: Any) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` -> ``["a", "b"]`` (blank items dropped)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise GradsmithUsageError(f"check: {option} must be comma-separated names or a list "
                                  f"of strings, got {value!r}; e.g. {option} compile,export")
    return [i.strip() for i in items if i.strip()]


def validate_require(option: str, names: list[str]) -> list[str]:
    """The required names; an unknown one is an error naming it and the valid ones."""
    bad = [n for n in names if n not in REQUIRABLE]
    if bad:
        raise GradsmithUsageError(
            f"check: {option} has unknown name(s) {', '.join(map(repr, bad))}; "
            f"valid: {', '.join(REQUIRABLE)} (e.g. {option} compile,export)")
    return list(dict.fromkeys(names))


def validate_codes(option: str, items: list[str]) -> list[str]:
    """Finding codes or code prefixes (``compile-``); each must match a known code."""
    if not items:
        return []
    from gradsmith.checker.codes import CODES

    known = [*CODES, *COMMAND_CODES]
    bad = [i for i in items if not any(c.startswith(i) for c in known)]
    if bad:
        raise GradsmithUsageError(
            f"check: {option} has unknown finding code(s) {', '.join(map(repr, bad))}; give "
            f"codes or prefixes of codes as listed by `gradsmith check --explain all` (e.g. "
            f"{option} unneeded-grad,compile-)")
    return items


def apply(rows: list[dict], *, select: list[str], ignore: list[str],
          require: list[str]) -> None:
    """Filter each row's findings (``select``, then ``ignore``), then turn every warning in a
    ``require``d column into an error; rows' verdicts, reports and texts follow."""
    if not (select or ignore or require):
        return
    for row in rows:
        report = row.get("report")
        if not report or row["verdict"] == "skip":
            continue
        kept, dropped = [], []
        for f in report["findings"]:
            (kept if selected(f["code"], select, ignore) else dropped).append(f)
        report["findings"] = kept
        if dropped:
            report["ignored"] = sorted({f["code"] for f in dropped})
        if require:
            _require(row, report, require)
        _refresh(row, report)


def _require(row: dict, report: dict, require: list[str]) -> None:
    compat = report.get("compat") or {}
    for column in require:
        if column in EAGER_REQUIRABLE:
            _require_eager(report, column)
            continue
        cell = compat.get(column)
        in_column = [f for f in report["findings"] if f["severity"] in ("warning", "error") and (
            (cell is not None and f["code"] in cell["codes"])
            or (f["code"] == "deployment-timeout" and CHECK_COLUMN.get(f["check"]) == column))]
        for f in in_column:
            if f["severity"] == "warning":
                _raise_required(f, column)
        if in_column or (cell is not None and cell["status"] != "not run"):
            continue  # held, a documented gap, n/a, or its findings were --ignore'd
        why = (cell["note"] or "deselected") if cell is not None else (
            "the deployment checks did not run for this Function (--no-compat, the "
            "example's compat=False, or time ran out before them)")
        report["findings"].append({
            "code": "required-not-checked", "severity": "error",
            "message": f"{column} is required (--require / require in [tool.gradsmith.check]) "
                       f"but was not checked: {why}",
            "hint": f"let the {column} check run (drop --no-compat or compat=False, raise "
                    "--timeout), or stop requiring it",
            "check": column, "input": None, "details": {"required": column}})


def _raise_required(f: dict, name: str) -> None:
    """A warning of a required name becomes an error saying so."""
    f["severity"] = "error"
    f["details"] = {**f.get("details", {}), "required": name}
    f["message"] = (f"{name} is required (--require / require in [tool.gradsmith.check]): "
                    f"{f['message']}")


def _require_eager(report: dict, name: str) -> None:
    """Required ``second-order``: its warnings fail; a second_order check that did not run
    (other than for a backward whose double backward raises, as intended) is
    ``required-not-checked``."""
    codes, check = EAGER_REQUIRABLE[name]
    found = [f for f in report["findings"] if f["code"] in codes and f["severity"] == "warning"]
    for f in found:
        _raise_required(f, name)
    skipped = report.get("skipped", {}).get(check)
    if found or check in report["checks"] or (skipped and _RAISES in skipped):
        return
    report["findings"].append({
        "code": "required-not-checked", "severity": "error",
        "message": f"{name} is required (--require / require in [tool.gradsmith.check]) but "
                   f"was not checked: {skipped or f'the {check} check did not run to the end'}",
        "hint": f"let the {check} check run (fix what stopped it), or stop requiring {name}",
        "check": check, "input": None, "details": {"required": name}})


def _refresh(row: dict, report: dict) -> None:
    """Verdict, report flags and text of a row whose findings changed."""
    from gradsmith.checker.report import Finding, Report

    rebuilt = Report(name=report["name"], checks=list(report["checks"]),
                     skipped=dict(report["skipped"]), elapsed=report["elapsed"],
                     saved_bytes=report.get("saved_bytes"), compat=report.get("compat") or {},
                     findings=[Finding(**{k: f.get(k) for k in (
                         "code", "severity", "message", "hint", "check", "input")},
                         details=f.get("details") or {}) for f in report["findings"]])
    rebuilt.sort()
    report["findings"] = [f.to_dict() for f in rebuilt.findings]
    report["passed"], report["verdict"] = rebuilt.passed, rebuilt.verdict
    if row["error"] in (None, "incomplete"):
        row["verdict"] = "pass" if rebuilt.passed else "fail"
        row["error"] = "incomplete" if rebuilt.verdict == "INCOMPLETE" else None
    elif rebuilt.errors:
        row["verdict"] = "fail"
    if row["verdict"] == "fail" and not row.get("repro"):  # failed by --require: its inputs
        row["repro"] = row.get("_repro_if_failed")
    note = (f"\n  ignored (--select/--ignore): {', '.join(report['ignored'])}"
            if report.get("ignored") else "")
    row["text"] = rebuilt.format() + note
    row["_text_brief"] = rebuilt.format(skipped=False) + note
