"""The compatibility matrix: one cell per deployment column, derived from the findings.

Columns: ``eager`` (every eager check), ``compile``, ``export``, ``autocast``, ``float32``
(the ``precision`` check), ``checkpoint``, ``torch.func`` (``torch_func`` plus ``vmap``) and
``onnx`` (opt-in: ``n/a`` saying why unless asked for).
A cell is ``{"status", "codes", "note"}`` with status one of :data:`STATUSES`:

- ``ok``: the column's checks ran and found no warning or error;
- ``warn`` / ``fail``: a warning / an error (``codes`` lists them);
- ``gap``: every problem there is a documented gap (``gaps={"export": "why"}``);
- ``n/a``: does not apply, or torch itself cannot do it (the note says which);
- ``not run``: deselected (``checks=``) or skipped after an earlier crash.
"""

from __future__ import annotations

from typing import Any

from gradsmith._errors import GradsmithError
from gradsmith.checker.deploy import DEPLOY_MODULES
from gradsmith.checker.report import Finding, Report

COLUMNS = ("eager", "compile", "export", "autocast", "float32", "checkpoint", "torch.func",
           "onnx")
STATUSES = ("ok", "warn", "fail", "gap", "n/a", "not run")
#: Deployment column of each check; every other check belongs to ``eager``.
CHECK_COLUMNS: dict[str, tuple[str, ...]] = {
    "compile": ("compile",), "export": ("export",), "autocast": ("autocast",),
    "precision": ("float32",), "checkpoint": ("checkpoint",),
    "torch_func": ("torch.func",), "vmap": ("torch.func",), "custom_op": ("eager",),
    "onnx": ("onnx",),
}
#: Findings that belong elsewhere than their check's column.
CODE_COLUMNS: dict[str, tuple[str, ...]] = {
    "custom-op-no-fake": ("compile", "export"),
    "custom-op-fake-mismatch": ("compile", "export"),
    "custom-op-aot-dispatch": ("compile", "export"),
    "float64-crash": ("float32",),
    "deploy-not-comparable": ("compile", "export", "autocast", "torch.func", "onnx"),
}
GAP_COLUMNS = COLUMNS[1:]
#: How an opt-in column's note starts when it was not asked for (the text table hides it).
NOT_REQUESTED = "not requested"
_RANK = {"ok": 0, "n/a": 1, "gap": 2, "warn": 3, "fail": 4}


def columns_of(finding: Finding) -> tuple[str, ...]:
    """The matrix columns a finding counts in."""
    if finding.code in CODE_COLUMNS:
        return CODE_COLUMNS[finding.code]
    return CHECK_COLUMNS.get(finding.check, ("eager",))


def validate_gaps(gaps: Any) -> dict[str, str]:
    """``gaps`` option: column -> non-empty reason."""
    if gaps is None:
        return {}
    if not isinstance(gaps, dict):
        raise GradsmithError(
            f"check: gaps must be a dict of column -> reason, got {type(gaps).__name__} "
            f"{gaps!r}; e.g. gaps={{'export': 'estimator: export keeps the forward only'}}")
    bad = [k for k in gaps if k not in GAP_COLUMNS]
    if bad:
        raise GradsmithError(
            f"check: gaps has unknown column(s) {bad}; choose from {list(GAP_COLUMNS)}")
    empty = [k for k, v in gaps.items() if not isinstance(v, str) or not v.strip()]
    if empty:
        raise GradsmithError(
            f"check: gaps[{empty[0]!r}] must say why (a non-empty string), got "
            f"{gaps[empty[0]]!r}")
    return dict(gaps)


def apply_gaps(report: Report, gaps: dict[str, str]) -> None:
    """Turn problems in documented columns into info findings that carry the reason."""
    seen: set[str] = set()
    for f in report.findings:
        cols = [c for c in columns_of(f) if c in gaps]
        if cols and f.severity in ("error", "warning"):
            f.details["gap"] = gaps[cols[0]]
            f.details["severity"] = f.severity
            f.severity = "info"
            f.message = f"documented gap ({gaps[cols[0]]}): {f.message}"
            seen.update(cols)
    for column, why in gaps.items():
        ran = [c for c, cols in CHECK_COLUMNS.items() if column in cols and c in report.checks]
        if ran and column not in seen:
            report.findings.append(Finding(
                "gap-not-observed", "info",
                f"a gap is documented for {column} ({why}) but the {column} checks found none",
                f"remove {column!r} from the example's gaps=", "setup",
                details={"column": column}))


def build(report: Report) -> dict[str, dict[str, Any]]:
    """The matrix of one report (after :func:`apply_gaps`)."""
    deploy = set(DEPLOY_MODULES) | {"vmap"}
    ran = {c: [ch for ch in report.checks if columns(ch) == (c,)] for c in COLUMNS}
    ran["eager"] = [ch for ch in report.checks if ch not in deploy]
    matrix: dict[str, dict[str, Any]] = {}
    for column in COLUMNS:
        found = [f for f in report.findings if column in columns_of(f)]
        if column == "eager":
            found = [f for f in found if f.code not in CODE_COLUMNS]
        matrix[column] = _cell(column, found, ran[column], report)
    return matrix


def columns(check: str) -> tuple[str, ...]:
    return CHECK_COLUMNS.get(check, ("eager",))


def _cell(column: str, found: list[Finding], ran: list[str], report: Report) -> dict[str, Any]:
    errors = [f for f in found if f.severity == "error"]
    warnings = [f for f in found if f.severity == "warning"]
    gaps = [f for f in found if "gap" in f.details]
    limits = [f for f in found if f.details.get("limitation")]
    if errors or warnings:
        worst = errors or warnings
        return {"status": "fail" if errors else "warn",
                "codes": sorted({f.code for f in errors + warnings}), "note": _note(worst[0])}
    if gaps:
        return {"status": "gap", "codes": sorted({f.code for f in gaps}),
                "note": gaps[0].details["gap"]}
    if not ran:
        skipped = [why for ch, why in report.skipped.items()
                   if columns(ch) == (column,) or (column == "eager" and ch not in CHECK_COLUMNS)]
        after_crash = any("after a structural" in why for why in skipped)
        if skipped and not after_crash:
            return {"status": "n/a", "codes": [], "note": skipped[0]}
        if column == "onnx" and not skipped:
            return {"status": "n/a", "codes": [], "note": _onnx_not_run()}
        return {"status": "not run", "codes": [], "note": skipped[0] if skipped else ""}
    if limits:
        return {"status": "n/a", "codes": sorted({f.code for f in limits}),
                "note": _note(limits[0])}
    return {"status": "ok", "codes": [], "note": ""}


def _onnx_not_run() -> str:
    from gradsmith._requires import ONNX_INSTALL, onnx_missing

    extra = f"; needs the onnx extra: {ONNX_INSTALL}" if onnx_missing() else ""
    return f"{NOT_REQUESTED} (opt-in: --require onnx, or onnx=True in gradsmith.check{extra})"


def _note(f: Finding) -> str:
    text = f.message
    return text if len(text) <= 160 else text[:157] + "..."


def merge(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The cell of several examples: the worst one (``not run`` only if all are)."""
    run = [c for c in cells if c["status"] != "not run"]
    if not run:
        return cells[0]
    return max(run, key=lambda c: _RANK[c["status"]])


def line(matrix: dict[str, dict[str, Any]]) -> str:
    """One line: ``eager ok | compile ok | export warn | ...`` (an opt-in column only when
    it was asked for)."""
    return " | ".join(f"{c} {matrix[c]['status']}" for c in COLUMNS if c in matrix and not (
        c == "onnx" and matrix[c]["note"].startswith(NOT_REQUESTED)))
