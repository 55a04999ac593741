"""The ``gradsmith bench --plot`` chart: op / reference ratios on a log axis.

One panel per ratio (time, saved bytes, peak memory), one bar per row (op and mode), drawn from
1 (parity) to the ratio on a logarithmic axis, so 0.5x and 2x are the same distance from parity
and one 69x bar does not squash the rest. Every bar carries its value; the time bars carry the
interquartile range of the paired per-round ratios as an error bar. A row without a reference
(or with an error) is written as such across its panels, never drawn as a comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradsmith._errors import GradsmithUsageError

__all__ = ["plot"]

_PANELS = (("time_ratio", "time (op / reference)"),
           ("saved_ratio", "saved for backward (op / reference)"),
           ("peak_ratio", "peak memory (op / reference)"))
_WIN, _LOSS, _EVEN = "#2a7f3f", "#b8402e", "#888888"


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GradsmithUsageError(
            "gradsmith bench --plot needs matplotlib, which is not installed; "
            "install it with: pip install 'gradsmith[html]'  (or: pip install matplotlib)"
        ) from None
    return plt


def _label(row: dict[str, Any]) -> str:
    mode = row.get("mode", "eager")
    return f"{row['op']} [{mode}]" if mode != "eager" else row["op"]


def _missing(row: dict[str, Any], key: str) -> str:
    if row.get("error"):
        return "error (see table)"
    if row["time_ms"].get("reference") is None:
        return f"no reference: {row['reference']}" if key == "time_ratio" else "no reference"
    values = (row.get(key.replace("_ratio", "_bytes")) or {}).values()
    if values and all(v == 0 for v in values):
        return "0 B both"
    return "not measured"


def plot(report: dict[str, Any], path: str | Path) -> None:
    """Draw the report's ratios and save the chart as a PNG at ``path``.

    Args:
        report: a ``gradsmith bench`` report (schema 2).
        path: the PNG to write.

    Raises:
        GradsmithUsageError: if matplotlib is not installed.
    """
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    results = report["results"]
    labels = [_label(r) for r in results]
    panels = [(k, t) for k, t in _PANELS if any(r.get(k) is not None for r in results)] \
        or list(_PANELS[:1])
    height = max(3.0, 0.32 * len(results) + 1.6)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 2.2, height),
                             sharey=True, squeeze=False)
    y = list(range(len(results)))
    for ax, (key, title) in zip(axes[0], panels):
        values = [r.get(key) for r in results]
        present = [v for v in values if v]
        if key == "time_ratio":  # the error bars must fit too
            present += [q for r in results if r.get(key) for q in r.get("time_ratio_iqr") or ()]
        lo = min([*present, 1.0]) / 2.5
        hi = max([*present, 1.0]) * 2.5
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        for i, (row, value) in enumerate(zip(results, values)):
            if not value:
                ax.text(1.0, i, "  " + _missing(row, key), va="center", ha="left", fontsize=7,
                        color=_EVEN, style="italic", clip_on=True)
                continue
            color = _WIN if value < 0.95 else _LOSS if value > 1.05 else _EVEN
            ax.barh(i, value - 1.0, left=1.0, color=color, height=0.62)
            text_x = value
            if key == "time_ratio" and row.get("time_ratio_iqr"):
                q1, q3 = row["time_ratio_iqr"]
                ax.errorbar(value, i, xerr=[[max(value - q1, 0)], [max(q3 - value, 0)]],
                            fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
                text_x = q3 if value >= 1 else q1
            ax.text(text_x * (1.06 if value >= 1 else 1 / 1.06), i, f"{value:.2g}x",
                    va="center", ha="left" if value >= 1 else "right", fontsize=7)
        ax.axvline(1.0, color="black", linewidth=0.9)
        ax.set_title(title, fontsize=10)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(axis="x", which="major", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="x", labelsize=8)
    axes[0][0].set_yticks(y)
    axes[0][0].set_yticklabels(labels, fontsize=8)
    axes[0][0].invert_yaxis()
    env = report.get("environment", {})
    fig.suptitle(f"gradsmith bench: op / reference, log scale (below 1x the op is cheaper); "
                 f"median of {report.get('repeat')} interleaved runs, error bars: IQR of the "
                 f"paired ratios; torch {env.get('torch')}, {env.get('torch_threads')} threads, "
                 f"{env.get('device', 'cpu')}, load {env.get('load_average_1min')}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
