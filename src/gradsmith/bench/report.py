"""Render a benchmark report: a rich table, markdown, JSON file and an optional bar chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["title", "table", "markdown", "notes", "rows", "write_json", "write_results", "plot"]

_HEADERS = ("op", "mode", "reference", "size", "op ms (IQR)", "ref ms (IQR)", "time x (IQR)",
            "op saved", "ref saved", "saved x", "op peak", "ref peak", "peak x")


def _bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _ms(stats: dict[str, float] | None) -> str:
    if stats is None:
        return "n/a"
    return f"{stats['median']:.3g} ({stats['q1']:.3g}-{stats['q3']:.3g})"


def _ratio(r: float | None, spread: list[float] | None = None) -> str:
    if r is None:
        return "-"
    return f"{r:.2f}" if not spread else f"{r:.2f} ({spread[0]:.2f}-{spread[1]:.2f})"


def _parts(row: dict[str, Any]) -> list[str]:
    """A row's error, or the parts of its note (joined with ``"; "`` when the row was made)."""
    if row.get("error"):
        return [f"error: {row['error']}"]
    return [part for part in (row.get("note") or "").split("; ") if part]


def _numbers(report: dict[str, Any]) -> dict[str, int]:
    """Each distinct note part or error, numbered in the order the rows first show it."""
    order: dict[str, int] = {}
    for r in report["results"]:
        for part in _parts(r):
            order.setdefault(part, len(order) + 1)
    return order


def notes(report: dict[str, Any]) -> list[str]:
    """``[n] text`` once for every distinct note or error; rows carry the numbers, so a note
    that many rows share (synthesised inputs, a missing torchsort) is printed once.

    Example:
        >>> notes({"results": [{"op": "a", "note": "x; y"}, {"op": "b", "note": "y"},
        ...                    {"op": "c", "error": "boom"}]})
        ['[1] x', '[2] y', '[3] error: boom']
    """
    return [f"[{n}] {text}" for text, n in _numbers(report).items()]


def rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row of strings per result, in the column order of :data:`_HEADERS`.

    A row with an error or notes gets their ``[n]`` markers after its name (see :func:`notes`).
    """
    numbers = _numbers(report)
    out = []
    for r in report["results"]:
        name = r["op"]
        marks = [str(numbers[part]) for part in _parts(r)]
        if marks:
            name = f"{name} [{','.join(marks)}]"
        t, s, p = r["time_ms"], r["saved_bytes"], r.get("peak_bytes") or {}
        out.append((name, r.get("mode", "eager"), r["reference"], r["shape"], _ms(t["op"]),
                    _ms(t["reference"]), _ratio(r["time_ratio"], r.get("time_ratio_iqr")),
                    _bytes(s["op"]), _bytes(s["reference"]), _ratio(r["saved_ratio"]),
                    _bytes(p.get("op")), _bytes(p.get("reference")),
                    _ratio(r.get("peak_ratio"))))
    return out


def title(report: dict[str, Any], full: bool = False) -> str:
    """What was measured and where; ``full`` adds the CPU, the date and the load (for files).

    Example:
        >>> title({"repeat": 3, "environment": {"torch": "2.13.0", "torch_threads": 2}})
        'gradsmith bench: forward+backward, median of 3 interleaved runs; torch 2.13.0, 2 threads, cpu'
    """
    env = report["environment"]
    text = (f"gradsmith bench: forward+backward, median of {report['repeat']} interleaved runs; "
            f"torch {env['torch']}, {env['torch_threads']} threads, {env.get('device', 'cpu')}")
    if full:
        text += (f" ({env.get('cpu')}, {env.get('cpu_count')} CPUs, Python {env.get('python')}, "
                 f"{env.get('platform')}); measured {env.get('date_utc')}, 1-minute load "
                 f"average {env.get('load_average_1min')}")
    return text


def table(report: dict[str, Any]):
    """A ``rich.table.Table`` of the report (ratios < 1 mean the op is cheaper), with the
    notes and errors as its caption."""
    from rich.table import Table

    t = Table(title=title(report),
              caption="\n".join(notes(report)) or None, caption_justify="left")
    body = rows(report)
    widest = max((len(r[0]) for r in body), default=2)
    for h in _HEADERS:
        left = h in ("op", "mode", "reference", "size")
        t.add_column(h, justify="left" if left else "right", overflow="fold",
                     no_wrap=h not in ("op", "size"),
                     min_width=min(widest, 48) if h == "op" else None)
    for row in body:
        t.add_row(*row)
    return t


def markdown(report: dict[str, Any]) -> str:
    """The report as a markdown table, followed by its notes.

    Example:
        >>> r = {"environment": {"torch": "2", "torch_threads": 1}, "repeat": 1, "results": []}
        >>> markdown(r).splitlines()[0]
        '| op | mode | reference | size | op ms (IQR) | ref ms (IQR) | time x (IQR) | op saved | ref saved | saved x | op peak | ref peak | peak x |'
    """
    lines = ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
              for row in rows(report)]
    extra = notes(report)
    if extra:
        lines += [""] + [f"- {n}" for n in extra]
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
    """Chart of the time, saved-bytes and peak-memory ratios per row, as a PNG.

    See :func:`gradsmith.bench.plot.plot`.

    Raises:
        GradsmithUsageError: if matplotlib is not installed.
    """
    from gradsmith.bench.plot import plot as draw

    draw(report, path)
