"""Self-contained HTML report of a ``gradsmith check`` run (``--html FILE``).

For every gradient mismatch the page shows three heatmaps side by side: the analytic Jacobian
(what backward computed), the numerical one (finite differences) and their difference. Rows
are output elements, columns input elements, so a transposed gradient shows as a mirrored
pattern and an off-by-one index as a shifted diagonal. Images are PNGs embedded as base64:
the file can be mailed or attached to CI artifacts as is. matplotlib is an optional extra.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from gradsmith._errors import GradsmithError

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
.pass{color:#080}.fail{color:#c00;font-weight:bold}.skip{color:#a60}
.ok{color:#080}.warn{color:#a60}.gap{color:#08a}.na{color:#888}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;white-space:pre-wrap}
img{max-width:100%}
"""


def require_matplotlib() -> None:
    """Raise a :class:`GradsmithError` with the install command if matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise GradsmithError(
            "check: --html needs matplotlib, which is not installed; install the extra with "
            "`pip install 'gradsmith[html]'` (or `pip install matplotlib`)"
        ) from None


def write_html(path: str, result: Any) -> None:
    """Write the report of ``result`` (a :class:`gradsmith.checkrun.session.CheckRun`) to ``path``."""
    require_matplotlib()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_html(result))


def render_html(result: Any) -> str:
    """The report as one HTML string (summary table, then a section per failure)."""
    counts = result.counts()
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>gradsmith check</title>",
        f"<style>{_STYLE}</style></head><body><h1>gradsmith check</h1>",
        f"<p>{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped "
        f"in {result.elapsed:.1f} s</p>",
        "<table><tr><th>Function</th><th>Verdict</th><th>Time</th><th>Checks run</th></tr>",
    ]
    for r in result.rows:
        parts.append(f"<tr><td>{_e(r['name'])}</td><td class='{r['verdict']}'>"
                     f"{r['verdict'].upper()}</td><td>{r['elapsed']:.2f}s</td>"
                     f"<td>{_e(', '.join(r['checks']))}</td></tr>")
    parts.append("</table>")
    parts.append(compat_html(result))
    for r in result.rows:
        if r["verdict"] == "fail":
            parts.append(_failure(r))
    parts.append("</body></html>")
    return "\n".join(parts)


def compat_html(result: Any) -> str:
    """The compatibility matrix as a table; each cell's title (hover) gives its note."""
    from gradsmith.cli._compat_output import COLUMNS

    rows = [r for r in result.rows if r.get("report") and r["report"].get("compat")]
    if not rows:
        return ""
    out = ["<h2>Compatibility</h2><table><tr><th>Function</th>"
           + "".join(f"<th>{_e(c)}</th>" for c in COLUMNS) + "</tr>"]
    for r in rows:
        compat = r["report"]["compat"]
        cells = []
        for column in COLUMNS:
            cell = compat.get(column, {"status": "not run", "note": "", "codes": []})
            status = cell["status"]
            klass = {"n/a": "na", "not run": "na"}.get(status, status)
            title = "; ".join(x for x in (", ".join(cell.get("codes", [])), cell.get("note"))
                              if x)
            cells.append(f"<td class='{klass}' title='{_e(title)}'>{_e(status)}</td>")
        out.append(f"<tr><td>{_e(r['name'])}</td>{''.join(cells)}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _failure(r: dict) -> str:
    out = [f"<h2 class='fail'>FAIL {_e(r['name'])}</h2>"]
    text = "\n".join(x for x in (r.get("inputs") and f"inputs: {r['inputs']}", r.get("reason"),
                                 r.get("text")) if x)
    out.append(f"<pre>{_e(text)}</pre>")
    for label, jac in (r.get("_jacobians") or {}).items():
        rows, cols = len(jac["analytic"]), len(jac["analytic"][0]) if jac["analytic"] else 0
        note = "" if tuple(jac["shape"]) == (rows, cols) else (
            f" (showing {rows}x{cols} of {jac['shape'][0]}x{jac['shape'][1]})")
        out.append(f"<h3>Jacobian {_e(label)}{_e(note)}</h3>")
        out.append(f"<img alt='Jacobian heatmaps for {_e(label)}' "
                   f"src='data:image/png;base64,{heatmaps_png(jac['analytic'], jac['numerical'])}'>")
    return "\n".join(out)


def heatmaps_png(analytic: Any, numerical: Any) -> str:
    """Analytic, numerical and difference heatmaps of two Jacobians, as a base64 PNG.

    Args:
        analytic: 2-D array or nested lists (outputs x inputs) from backward.
        numerical: 2-D array or nested lists of the same shape from finite differences.

    Returns:
        The PNG bytes, base64-encoded (ASCII).
    """
    import numpy as np
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    analytic, numerical = np.asarray(analytic, float), np.asarray(numerical, float)
    diff = analytic - numerical
    finite = np.concatenate([analytic[np.isfinite(analytic)], numerical[np.isfinite(numerical)]])
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
    span = float(np.nanmax(np.abs(diff[np.isfinite(diff)]))) if np.isfinite(diff).any() else 1.0
    fig = Figure(figsize=(13, 4), layout="constrained")
    panels = (("analytic (backward)", analytic, "viridis", low, high),
              ("numerical (finite differences)", numerical, "viridis", low, high),
              ("difference analytic - numerical", diff, "RdBu_r", -span or -1, span or 1))
    for ax, (title, data, cmap, vmin, vmax) in zip(fig.subplots(1, 3), panels):
        image = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest",
                          aspect="auto")
        ax.set_title(title)
        ax.set_xlabel("input element")
        ax.set_ylabel("output element")
        fig.colorbar(image, ax=ax)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _e(text: Any) -> str:
    return html.escape(str(text))
