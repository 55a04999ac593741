"""Render a ``gradsmith check`` run: rich table and failure details, or a JSON document.

JSON document (``--format json``), one object on stdout::

    {"gradsmith": "<version>", "targets": [...],
     "summary": {"passed": n, "failed": n, "skipped": n, "import_errors": n,
                 "exit_code": 0|1|2, "elapsed": seconds, "usage_errors": [...]},
     "results": [{"name", "target", "verdict", "error", "reason", "inputs", "elapsed",
                  "checks", "report"}, ...]}

``report`` is :meth:`gradsmith.Report.to_dict` (``None`` for skipped, crashed or timed-out rows).
"""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gradsmith import __version__

_VERDICT_STYLE = {"pass": "[green]PASS[/green]", "fail": "[bold red]FAIL[/bold red]",
                  "skip": "[yellow]SKIP[/yellow]"}
_ERROR_LABEL = {"crash": "crashed", "timeout": "timed out", "import": "import error",
                "exception": "error"}


class Output:
    """Progress bar (text format on a terminal only) and the final rendering."""

    def __init__(self, fmt: str, verbose: bool = False) -> None:
        self.fmt = fmt
        self.verbose = verbose
        self.console = Console(file=sys.stdout, highlight=False,
                               width=None if sys.stdout.isatty() else 110)
        self._progress = None
        self._task = None

    def progress(self, done: int, total: int, row: dict) -> None:
        """Advance the progress bar; created on first use, only for text on a terminal."""
        if self.fmt != "text" or not self.console.is_terminal:
            return
        if self._progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(TextColumn("checking"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.description}"), console=self.console,
                                      transient=True)
            self._progress.start()
            self._task = self._progress.add_task("", total=total)
        self._progress.update(self._task, completed=done, description=escape(row["name"]))

    def close(self) -> None:
        """Remove the progress bar before anything else is printed."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def render(self, result, targets: list[str]) -> None:
        """Print the run as a table plus details, or as JSON."""
        if self.fmt == "json":
            sys.stdout.write(json.dumps(to_document(result, targets), indent=1) + "\n")
            return
        self._table(result)
        self._details(result)
        counts = result.counts()
        summary = (f"{counts['passed']} passed, {counts['failed']} failed, "
                   f"{counts['skipped']} skipped in {result.elapsed:.1f} s")
        colour = {0: "green", 1: "red", 2: "red"}[result.exit_code()]
        self.console.print(f"[{colour}]{summary}[/{colour}]")

    def _table(self, result) -> None:
        if not result.rows:
            return
        table = Table(title="gradsmith check", title_justify="left")
        table.add_column("Function", overflow="fold")
        table.add_column("Verdict", no_wrap=True)
        table.add_column("Time", justify="right", no_wrap=True)
        table.add_column("Checks run", overflow="fold", max_width=34)
        for r in result.rows:
            verdict = _VERDICT_STYLE[r["verdict"]]
            if r["error"]:
                verdict += f" ({_ERROR_LABEL[r['error']]})"
            checks = ", ".join(r["checks"]) if r["checks"] else "-"
            table.add_row(escape(r["name"]), verdict, f"{r['elapsed']:.2f}s", escape(checks))
        self.console.print(table)

    def _details(self, result) -> None:
        for r in result.rows:
            if r["verdict"] == "fail":
                self._section(r, "red", "FAIL")
            elif r["verdict"] == "skip":
                self._section(r, "yellow", "SKIP")
            elif self.verbose and r["text"]:
                self._section(r, "green", "PASS")
            elif r["report"] and any(f["severity"] == "warning" for f in r["report"]["findings"]):
                warnings = [f for f in r["report"]["findings"] if f["severity"] == "warning"]
                self.console.print(f"[yellow]warnings[/yellow] {escape(r['name'])}:")
                for f in warnings:
                    self.console.print(f"  {escape(f['code'])}: {escape(f['message'])}")
                    if f.get("hint"):
                        self.console.print(f"    fix: {escape(f['hint'])}")

    def _section(self, r: dict, colour: str, word: str) -> None:
        self.console.rule(f"[{colour}]{word}[/{colour}] {escape(r['name'])}", align="left")
        if r["inputs"]:
            self.console.print(f"inputs: {escape(r['inputs'])}")
        if r["reason"]:
            self.console.print(escape(r["reason"]))
        if r["text"]:
            self.console.print(escape(r["text"]))


def to_document(result, targets: list[str]) -> dict:
    """The JSON document for ``--format json`` (see the module docstring)."""
    summary = dict(result.counts(), exit_code=result.exit_code(),
                   elapsed=round(result.elapsed, 3), usage_errors=list(result.usage_errors))
    results = [{k: v for k, v in r.items() if not k.startswith("_") and k != "text"}
               for r in result.rows]
    return {"gradsmith": __version__, "targets": list(targets), "summary": summary,
            "results": results}
