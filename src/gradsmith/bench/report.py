"""Render a benchmark report: a rich table, markdown, JSON file and an optional bar chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gradsmith._errors import GradsmithUsageError

__all__ = ["table", "markdown", "write_json", "write_results", "plot"]

_HEADERS = ("op", "reference", "size", "op ms (IQR)", "ref ms (IQR)", "time x",
            "op saved", "ref saved", "saved x")


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _ms(stats: dict[str, float]) -> str:
    return f"{stats['median']:.3g} ({stats['q1']:.3g}-{stats['q3']:.3g})"


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}"


def rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row of strings per result, in the column order of :data:`_HEADERS`."""
    out = []
    for r in report["results"]:
        out.append((r["op"], r["reference"], r["shape"], _ms(r["time_ms"]["op"]),
                    _ms(r["time_ms"]["reference"]), _ratio(r["time_ratio"]),
                    _bytes(r["saved_bytes"]["op"]), _bytes(r["saved_bytes"]["reference"]),
                    _ratio(r["saved_ratio"])))
    return out


def table(report: dict[str, Any]):
    """A ``rich.table.Table`` of the report (ratios < 1 mean the gradsmith op is cheaper)."""
    from rich.table import Table

    env = report["environment"]
    t = Table(title=f"gradsmith bench: forward+backward, median of {report['repeat']} "
                    f"interleaved runs; torch {env['torch']}, {env['torch_threads']} threads")
    for h in _HEADERS:
        t.add_column(h, justify="left" if h in ("op", "reference", "size") else "right")
    for row in rows(report):
        t.add_row(*row)
    return t


def markdown(report: dict[str, Any]) -> str:
    """The report as a markdown table preceded by its environment.

    Example:
        >>> r = {"environment": {"torch": "2", "torch_threads": 1}, "repeat": 1, "results": []}
        >>> markdown(r).splitlines()[0]
        '| op | reference | size | op ms (IQR) | ref ms (IQR) | time x | op saved | ref saved | saved x |'
    """
    lines = ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(report)]
    return "\n".join(lines) + "\n"


def write_json(report: dict[str, Any], path: str | Path) -> None:
    """Write the report as indented JSON."""
    Path(path).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def write_results(data: dict[str, Any], md: str, directory: str | Path,
                  stem: str) -> tuple[Path, Path]:
    """Record a benchmark: ``data`` as ``STEM.json`` and its rendering ``md`` as ``STEM.md``.

    The directory is created if missing; both files are UTF-8, the JSON indented.

    Args:
        data: JSON-ready measurements, with their ``environment``.
        md: the markdown rendering of ``data``.
        directory: where to write (``benchmarks/results`` for recorded runs).
        stem: file name without suffix.

    Returns:
        The two paths written, JSON first.

    Example:
        >>> import tempfile
        >>> paths = write_results({"rows": [1]}, "# demo", tempfile.mkdtemp(), "demo")
        >>> [p.name for p in paths], json.loads(paths[0].read_text()), paths[1].read_text()
        (['demo.json', 'demo.md'], {'rows': [1]}, '# demo')
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    json_path, md_path = directory / f"{stem}.json", directory / f"{stem}.md"
    write_json(data, json_path)
    md_path.write_text(md, encoding="utf-8")
    return json_path, md_path


def plot(report: dict[str, Any], path: str | Path) -> None:
    """Bar chart of time and saved-bytes ratios (op / reference) per op, as a PNG.

    Raises:
        GradsmithUsageError: if matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GradsmithUsageError(
            "gradsmith bench --plot needs matplotlib, which is not installed; "
            "install it with: pip install 'gradsmith[html]'  (or: pip install matplotlib)"
        ) from None
    results = report["results"]
    names = [r["op"] for r in results]
    fig, axes = plt.subplots(1, 2, figsize=(12, max(3, 0.35 * len(names))), sharey=True)
    for ax, key, title in ((axes[0], "time_ratio", "time (op / reference)"),
                           (axes[1], "saved_ratio", "saved bytes (op / reference)")):
        values = [r[key] if r[key] is not None else 0.0 for r in results]
        ax.barh(names, values)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_title(title)
        ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
