"""Render a ``gradsmith check`` run: rich table and failure details, or a JSON document.

JSON document (``--format json``), one object on stdout::

    {"gradsmith": "<version>", "targets": [...],
     "summary": {"passed": n, "failed": n, "skipped": n, "import_errors": n,
                 "exit_code": 0|1|2, "elapsed": seconds, "usage_errors": [...]},
     "results": [{"name", "target", "file", "line", "verdict", "error", "reason", "inputs",
                  "elapsed", "checks", "report", "repro"}, ...]}

``file`` and ``line`` say where each Function (or function) is defined: relative to the working
directory when it is under it, else absolute; ``null`` when unknown (a target that failed to
import).

``report`` is :meth:`gradsmith.Report.to_dict` (``None`` for skipped, crashed or timed-out rows).
``repro`` (failing checked rows only, else ``None``): ``seed``, ``source`` (where the Function
lives) and ``sets``, every input set checked with its exact values (see :mod:`gradsmith.repro`).
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gradsmith import __version__
from gradsmith.cli._compat_output import render_compat
from gradsmith.cli._findings_text import function_text, hidden_infos, shared_warnings
from gradsmith.cli._text import escape, escape_line, one_line

_VERDICT_STYLE = {"pass": "[green]PASS[/green]", "fail": "[bold red]FAIL[/bold red]",
                  "skip": "[yellow]SKIP[/yellow]"}
# Piped output is not wrapped; tables still need a width to lay out in: wide enough never to
# fold a cell (they shrink to their content).
_PIPE_WIDTH = 1000
# Width of the "── FAIL name ───" heading lines when piped (on a terminal: rich's full rule).
_PIPE_RULE = 100
_ERROR_LABEL = {"crash": "crashed", "timeout": "timed out", "import": "import error",
                "exception": "error", "incomplete": "incomplete"}


class Output:
    """Progress bar (text format on a terminal only) and the final rendering."""

    def __init__(self, fmt: str, verbose: bool = False, quiet: bool = False) -> None:
        self.fmt = fmt
        self.verbose = verbose
        self.quiet = quiet and not verbose  # failures and the summary line only
        # On a terminal rich wraps to its width. Piped (CI logs, files) nothing is wrapped:
        # a long line stays one line, so tokens like `x[2, 2]` never split and grep works.
        # Decided by isatty, not rich's is_terminal, which FORCE_COLOR turns on in CI.
        self.tty = sys.stdout.isatty()
        self.console = Console(file=sys.stdout, highlight=False, soft_wrap=not self.tty,
                               width=None if self.tty else _PIPE_WIDTH)
        self._progress = None
        self._task = None
        self._started = time.monotonic()
        self._said_slow = False

    def status(self, text: str) -> None:
        """Say what is going on: a live line on a terminal (text format); elsewhere one line on
        stderr if no check has finished after 10 s, so a slow start is not silent."""
        if self.fmt == "text" and self.console.is_terminal:
            self._live().update(self._task, description=escape_line(text))
        elif not self._said_slow and time.monotonic() - self._started >= 10:
            self._said_slow = True
            print(f"gradsmith check: still working: {one_line(text)}", file=sys.stderr,
                  flush=True)

    def progress(self, done: int, total: int, row: dict) -> None:
        """Advance the progress bar (text format on a terminal only)."""
        self._said_slow = True  # results are coming: no "still working" line any more
        if self.fmt != "text" or not self.console.is_terminal:
            return
        self._live().update(self._task, total=total, completed=done,
                            description=escape_line(row["name"]))

    def eager(self, name: str, snap: dict) -> None:
        """On a terminal, print a Function's failure as soon as its eager checks find it,
        while its deployment checks (or other input sets) still run."""
        if self.fmt != "text" or not self.console.is_terminal:
            return
        errors = [f for f in snap["findings"]
                  if f["severity"] == "error" or f["details"].get("incomplete")]
        if not errors:
            return  # a pass is said once, in the table: the progress bar shows it went by
        verdict = _VERDICT_STYLE["fail" if errors else "pass"]
        codes = ", ".join(dict.fromkeys(f["code"] for f in errors))
        self._live()
        then = f"; {snap['following']} follow..." if snap.get("following") else ""
        self.console.print(f"{verdict} {escape_line(name)} [dim]eager checks{': ' if codes else ''}"
                           f"{escape(codes)}{escape(then)}[/dim]")

    def _live(self):
        if self._progress is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
            )

            self._progress = Progress(SpinnerColumn(), TextColumn("gradsmith check"),
                                      BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.description}"), console=self.console,
                                      transient=True)
            self._progress.start()
            self._task = self._progress.add_task("", total=None)
        return self._progress

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
        if not self.quiet:
            self._table(result)
        self._details(result)
        if not self.quiet:
            self._passing_warnings(result)
            render_compat(self.console, result, self.verbose)
        counts = result.counts()
        summary = (f"{counts['passed']} passed, {counts['failed']} failed, "
                   f"{counts['skipped']} skipped in {result.elapsed:.1f} s")
        colour = {0: "green", 1: "red", 2: "red"}[result.exit_code()]
        self.console.print(f"[{colour}]{summary}[/{colour}]")

    def _table(self, result) -> None:
        """One line per Function (``-v`` adds the checks that ran)."""
        if not result.rows:
            return
        table = Table(title="gradsmith check", title_justify="left")
        table.add_column("Function", overflow="fold")
        table.add_column("Verdict", no_wrap=True)
        table.add_column("Inputs", no_wrap=self.tty, overflow="ellipsis" if self.tty else "fold",
                         max_width=44 if self.tty else None)
        table.add_column("Time", justify="right", no_wrap=True)
        if self.verbose:  # piped: one line per row (greppable); on a terminal it wraps
            table.add_column("Checks run", overflow="fold", max_width=34 if self.tty else None)
        for r in result.rows:
            verdict = _VERDICT_STYLE[r["verdict"]]
            if r["error"]:
                verdict += f" ({_ERROR_LABEL.get(r['error'], r['error'])})"
            elif r["verdict"] == "pass" and _warnings(r):
                verdict += f" [yellow]({_plural(len(_warnings(r)), 'warning')})[/yellow]"
            cells = [escape_line(r["name"]), verdict,
                     escape_line(inputs_cell(r.get("inputs")) + symmetric_note(r)),
                     f"{r['elapsed']:.2f}s"]
            if self.verbose:
                cells.append(escape(", ".join(r["checks"]) if r["checks"] else "-"))
            table.add_row(*cells)
        self.console.print(table)

    def _details(self, result) -> None:
        for r in result.rows:
            if r["verdict"] == "fail":
                self._section(r, "red", "FAIL")
            elif r["verdict"] == "skip":
                self._section(r, "yellow", "SKIP")
            elif self.verbose and r["text"]:
                self._section(r, "green", "PASS")

    def _passing_warnings(self, result) -> None:
        """Warnings of passing Functions (with ``-v`` they are in each one's report)."""
        if self.verbose:
            return
        rows = [(one_line(r["name"]), _warnings(r)) for r in result.rows
                if r["verdict"] == "pass" and _warnings(r)]
        if rows:
            self.console.print("[yellow]warnings of passing Functions:[/yellow]")
            self._text(shared_warnings(rows))

    def _section(self, r: dict, colour: str, word: str) -> None:
        """A failing (or skipped) Function: its root cause first, repeats merged; ``-v``
        prints its whole report instead."""
        title = f"[{colour}]{word}[/{colour}] {escape_line(r['name'])}"
        if self.tty:
            self.console.rule(title, align="left")
        else:
            plain = f"── {word} {one_line(r['name'])} "
            self.console.print(f"── {title} " + "─" * max(3, _PIPE_RULE - len(plain)))
        if r["reason"]:
            self._text(_name_on_one_line(r["reason"], r["name"]))
        report = r.get("report")
        if report and not self.verbose:
            findings = report["findings"]
            if findings:
                self._text(function_text(findings))
            infos = hidden_infos(findings)
            if report.get("ignored"):
                self._text(f"  ignored (--select/--ignore): {', '.join(report['ignored'])}")
            if infos:
                self.console.print(f"  [dim]+{_plural(infos, 'info finding')}: -v[/dim]")
        else:
            text = r["text"] if self.verbose else r.get("_text_brief", r["text"])
            if text:
                self._text(_name_on_one_line(text, r["name"]))
        if r["inputs"]:
            self.console.print(f"inputs: {escape_line(r['inputs'])}")
        if r.get("repro"):
            self.console.print(f"seed: {r['repro']['seed']}; exact input values: --format json "
                               "(results[].repro), or --repro DIR for plain-PyTorch scripts")

    def _text(self, text: str) -> None:
        """Print plain report text: piped as it is; on a terminal wrapped to its width."""
        if not self.tty:
            self.console.print(escape(text))
            return
        width = max(40, self.console.width)
        self.console.print(escape("\n".join(wrap_line(line, width)
                                             for line in text.splitlines())), soft_wrap=True)


def _warnings(r: dict) -> list[dict]:
    return [f for f in (r.get("report") or {}).get("findings", []) if f["severity"] == "warning"]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _name_on_one_line(text: str, name: str) -> str:
    """Report ``text`` with the row's name shown on one line wherever it appears (the report's
    heading names it: a line break in an example or file name must not start a line there)."""
    return text.replace(name, one_line(name)) if name and one_line(name) != name else text


# An index or a short bracketed list (`x[2, 2]`, `[weight]`): never split across lines.
_BRACKETED = re.compile(r"\[[^\[\]\n]{0,30}\]")


def wrap_line(line: str, width: int) -> str:
    """Wrap one line of report text for a terminal of ``width`` columns.

    Continuation lines are indented 4 more than the line itself (a hanging indent, so each
    finding reads as one block), breaks fall only between words, and a bracketed index such
    as ``x[2, 2]`` is kept whole.

    Example:
        >>> print(wrap_line("  ERROR at x[0, 1], x[2, 2] and 3 more", 24))
          ERROR at x[0, 1],
              x[2, 2] and 3 more
    """
    indent = len(line) - len(line.lstrip(" "))
    glued = _BRACKETED.sub(lambda m: m.group(0).replace(" ", "\x00"), line.strip(" "))
    lines = textwrap.wrap(glued, width, initial_indent=" " * indent,
                          subsequent_indent=" " * (indent + 4), break_long_words=False,
                          break_on_hyphens=False) or [""]
    return "\n".join(lines).replace("\x00", " ")


def inputs_cell(inputs: str | None) -> str:
    """The table's short 'which inputs' cell: the example, or the synthesised sets.

    Example:
        >>> inputs_cell("synthesised: x: float64 (3, 4), beta=1.0; also: beta=1.5; other shapes")
        'synthesised x (3, 4), beta=1.0 +2 sets'
    """
    if not inputs:
        return "-"
    if not inputs.startswith("synthesised: "):
        return inputs
    first, _, rest = inputs[len("synthesised: "):].partition("; also: ")
    first = first.replace(": float64 ", " ")
    more = len(rest.split("; ")) if rest else 0
    return f"synthesised {first}" + (f" +{more} sets" if more else "")


def symmetric_note(r: dict) -> str:
    """What the Inputs cell adds for inputs whose gradient was compared along symmetric
    directions (an eigh-style Function of a symmetric matrix: symmetric-directions)."""
    findings = (r.get("report") or {}).get("findings", [])
    names = dict.fromkeys(f["input"] for f in findings if f["code"] == "symmetric-directions")
    return f"; {', '.join(names)}: gradients along symmetric directions" if names else ""


def to_document(result, targets: list[str]) -> dict:
    """The JSON document for ``--format json`` (see the module docstring)."""
    summary = dict(result.counts(), exit_code=result.exit_code(),
                   elapsed=round(result.elapsed, 3), usage_errors=list(result.usage_errors))
    results = [{k: _relative(v) if k == "file" else v for k, v in r.items()
                if not k.startswith("_") and k != "text"} for r in result.rows]
    return {"gradsmith": __version__, "targets": list(targets), "summary": summary,
            "results": results}


def _relative(path: str | None) -> str | None:
    """A file under the working directory relative to it (like the targets), others absolute."""
    if path is None:
        return None
    resolved = Path(path)
    return str(resolved.relative_to(Path.cwd())) if resolved.is_relative_to(Path.cwd()) else path
