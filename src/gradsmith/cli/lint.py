"""``gradsmith lint``: arguments and output; the analysis lives in :mod:`gradsmith.linter`."""

from __future__ import annotations

import argparse
import sys

from gradsmith._errors import GradsmithError
from gradsmith.cli import usage_error
from gradsmith.cli._text import one_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``gradsmith lint``."""
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories to lint (default: the current directory)")
    parser.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text",
                        help="output format (default: text)")
    parser.add_argument("--fix", action="store_true", help="apply safe fixes to the files")
    parser.add_argument("--diff", action="store_true",
                        help="print the safe fixes as a unified diff and change nothing "
                             "(also with --fix, as in ruff)")
    parser.add_argument("--explain", default=None, metavar="CODE",
                        help="print what a rule finds, why it matters and the fix (e.g. GS101)")
    parser.add_argument("--select", default=None, metavar="CODES",
                        help="comma-separated codes or prefixes to report (e.g. GS1,GS203)")
    parser.add_argument("--ignore", default=None, metavar="CODES",
                        help="comma-separated codes or prefixes to drop")
    parser.add_argument("--config", default=None, metavar="PYPROJECT",
                        help="pyproject.toml with [tool.gradsmith.lint] (default: nearest)")
    parser.add_argument("--statistics", action="store_true",
                        help="print how many findings of each code instead of the findings "
                             "(text or json)")
    parser.add_argument("--exit-zero", action="store_true",
                        help="exit 0 even with error-level findings (2 still means a usage "
                             "error or a file --fix could not write)")


def run(args: argparse.Namespace) -> int:
    """Lint, print, and return 0 (no error-level finding), 1 (errors) or 2 (usage error)."""
    from dataclasses import replace

    from gradsmith import __version__
    from gradsmith.linter import fix, lint
    from gradsmith.linter._formats import render, statistics

    if args.explain is not None:
        from gradsmith.linter.docs import explain

        try:
            print(explain(args.explain))
        except GradsmithError as exc:
            print(usage_error("lint", str(exc)), file=sys.stderr)
            return 2
        return 0
    if args.statistics and args.format not in ("text", "json"):
        print(f"gradsmith lint: error: --statistics prints text or json, got --format "
              f"{args.format}; drop one of them", file=sys.stderr)
        return 2
    paths = args.paths or ["."]  # as ruff and flake8: the current directory
    failed: dict[str, str] = {}
    try:
        _validate(paths)
        if args.fix or args.diff:
            result = fix(paths, args.select, args.ignore, config=args.config)
            findings = result.findings
            if args.diff:  # a preview, even with --fix (as in ruff)
                sys.stdout.write("".join(result.diffs[p] for p in sorted(result.diffs)))
            else:
                failed = _write(result)
                if failed:  # what is on disk now, not what the fixes would have left
                    findings = lint(paths, args.select, args.ignore, config=args.config)
                else:  # what is left was tried and dropped: not offered as fixable again
                    findings = [replace(f, fix=()) for f in findings]
        else:
            findings = lint(paths, args.select, args.ignore, config=args.config)
    except GradsmithError as exc:
        print(usage_error("lint", str(exc)), file=sys.stderr)
        return 2
    if not args.diff or args.format != "text":
        if args.statistics:
            out = statistics(findings, args.format)
        else:
            out = render(_shown(findings) if args.format == "text" else findings,
                         args.format, __version__)
        if out:
            print(out)
    if failed:
        return 2
    errors = any(f.severity == "error" for f in findings)
    return 1 if errors and not args.exit_zero else 0


def _shown(findings: list) -> list:
    """Findings whose file names and quoted source show control characters and line breaks
    instead of obeying them: a file named ``x\\n0 findings...`` cannot forge the summary."""
    from dataclasses import replace

    return [replace(f, path=one_line(f.path), message=one_line(f.message)) for f in findings]


def _write(result) -> dict[str, str]:
    """Write the fixed files; one line on stderr per file not written, then a summary."""
    failed = result.write()
    for path, reason in failed.items():
        print(f"gradsmith lint: error: {one_line(path)}: {reason}", file=sys.stderr)
    written = [p for p in result.data if p not in failed]
    print(f"fixed {sum(result.counts[p] for p in written)} finding(s) in {len(written)} file(s)",
          file=sys.stderr)
    return failed


def _validate(paths: list[str]) -> None:
    """Every named path must be followable, and a named file must be Python source."""
    from pathlib import Path

    from gradsmith.discovery.targets import link_problem, special_file

    for raw in paths:
        path = Path(raw)
        problem = link_problem(path) or special_file(path)
        if problem:
            raise GradsmithError(problem)
        if path.is_file() and not _is_python(path):
            raise GradsmithError(
                f"{raw} is not a Python file (no .py/.pyi suffix and no python #! line); pass "
                "Python files or directories")


def _is_python(path) -> bool:
    if path.suffix in (".py", ".pyi"):
        return True
    try:
        with open(path, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return True  # unreadable: the linter reports it (GS002)
    return first.startswith(b"#!") and b"python" in first
