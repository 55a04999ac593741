"""The compatibility matrix of a ``gradsmith check`` run as a text table (own module, so the
rest of the output can change its wrapping without touching it).

One row per checked Function, one short cell per deployment column: ``ok``, ``warn``,
``FAIL``, ``gap`` (documented), ``n/a`` (does not apply, or torch's own limit), ``-`` (not
run). Cells are at most 4 characters so the table stays readable in a pipe; the reasons for
``gap`` and ``n/a`` cells follow with ``--verbose`` (and are in the JSON and HTML reports).
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from gradsmith.cli._text import escape, one_line

_CELL = {"ok": "[green]ok[/green]", "warn": "[yellow]warn[/yellow]",
         "fail": "[bold red]FAIL[/bold red]", "gap": "[cyan]gap[/cyan]", "n/a": "n/a",
         "not run": "-"}
#: Short headers keep the table narrow; the legend spells them out.
HEADERS = {"eager": "eager", "compile": "compile", "export": "export", "autocast": "amp",
           "float32": "fp32", "checkpoint": "ckpt", "torch.func": "func", "onnx": "onnx"}
#: gradsmith.checker.deploy.matrix.COLUMNS, without importing it: the command line's own process
#: never imports torch (a second on an idle machine, before anything is on screen).
COLUMNS = tuple(HEADERS)
#: Opt-in columns (gradsmith.checker.deploy.OPT_IN): shown only when some row ran them.
OPT_IN = ("onnx",)
#: gradsmith.checker.deploy.matrix.NOT_REQUESTED: the note of an opt-in cell not asked for.
NOT_REQUESTED = "not requested"
LEGEND = ("amp = autocast, fp32 = float32 vs float64, ckpt = activation checkpointing, func = "
          "torch.func. ok: works and agrees with eager; warn/FAIL: see the findings above; "
          "gap: documented gap; n/a: does not apply or torch's own limit; -: not run")


def rows_with_matrix(result) -> list[dict]:
    """The rows of a run that carry a compatibility matrix."""
    return [r for r in result.rows if r.get("report") and r["report"].get("compat")]


def render_compat(console: Console, result, verbose: bool = False) -> None:
    """Print the matrix table (nothing when no row has one, e.g. with ``--no-compat``)."""
    rows = rows_with_matrix(result)
    if not rows:
        return
    # No vertical rules: seven short cells leave the name most of a 110-column pipe.
    table = Table(title="compatibility", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("Function", overflow="fold")
    shown = shown_columns(rows)
    for column in shown:
        table.add_column(HEADERS[column], no_wrap=True)
    for r in rows:
        compat = r["report"]["compat"]
        table.add_row(escape(one_line(r["name"])), *(_CELL[compat[c]["status"]] if c in compat else "-"
                                           for c in shown))
    console.print(table)
    console.print(LEGEND, soft_wrap=True)
    if verbose:
        for line in notes(rows):
            console.print(escape(line), soft_wrap=True)


def _not_requested(cell: dict | None) -> bool:
    return cell is None or str(cell.get("note", "")).startswith(NOT_REQUESTED)


def shown_columns(rows: list[dict]) -> tuple[str, ...]:
    """Every column but an opt-in one no row asked for (``n/a: not requested`` everywhere)."""
    return tuple(c for c in COLUMNS if c not in OPT_IN or not all(
        _not_requested(r["report"]["compat"].get(c)) for r in rows))


def notes(rows: list[dict]) -> list[str]:
    """``name: column gap|n/a: reason`` for every cell that carries one."""
    found = []
    for r in rows:
        for column, cell in r["report"]["compat"].items():
            if cell["status"] in ("gap", "n/a") and cell.get("note") and not (
                    column in OPT_IN and _not_requested(cell)):
                found.append(f"{one_line(r['name'])}: {column} {cell['status']}: {cell['note']}")
    return found
