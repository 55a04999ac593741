"""What a finding code means, from the package's own table (:mod:`gradsmith.checker.codes`).

``gradsmith check --explain CODE`` prints :func:`explain`; docs/check.md's "Finding codes" table
is :func:`table`, written there by ``python -m gradsmith.checker.code_docs docs/check.md`` (a
test fails when it is stale).
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from gradsmith._errors import GradsmithUsageError
from gradsmith.checker.codes import COMMAND_ROWS, ROWS, Code

#: The table's header in docs/check.md; the table runs from it to the next blank line.
HEADER = "| code | severity | check | cause | fix |\n|---|---|---|---|---|\n"


def _all() -> dict[str, Code]:
    return {**ROWS, **COMMAND_ROWS}


def lookup(code: str) -> Code | None:
    """The row of finding ``code`` (the checker's or the command's), or None."""
    return _all().get(code)


def help_text(code: str) -> str:
    """One paragraph for a finding code: cause, fix and the command that explains it (SARIF's
    rule help); for what is not a code (a row's ``timeout``, ``import``) a pointer to the
    result's message."""
    row = lookup(code)
    if row is None:
        return f"the Function could not be checked ({code}); the result's message says why"
    return (f"{row.cause}. Fix: {row.fix}. (`gradsmith check --explain {code}` prints this "
            "with the code's severity and check)")


def _severity(row: Code) -> str:
    return f"{row.severity} ({row.severity_note})" if row.severity_note else row.severity


def table() -> str:
    """The Markdown table of every code (checker's, then the command's), one row per code."""
    return HEADER + "".join(
        f"| `{code}` | {_severity(row)} | {row.check} | {row.cause} | {row.fix} |\n"
        for code, row in _all().items())


def explain(code: str) -> str:
    """The severity, check, cause and fix of finding ``code`` (``gradsmith check --explain``).

    ``"all"`` lists every code with its severity and check.

    Raises:
        GradsmithUsageError: ``code`` is not a finding code; close matches are suggested.

    Example:
        >>> print(explain("kink"))
        kink: info, reported by the gradients check
        <BLANKLINE>
        Cause: the input sits on a non-differentiable point and backward gives a valid subgradient
        <BLANKLINE>
        Fix: nothing; move the example off the kink to check there
    """
    rows = _all()
    key = code.strip().lower()
    if key == "all":
        width = max(map(len, rows))
        return "\n".join(f"{c:<{width}}  {r.severity:<7}  {r.check}" for c, r in rows.items())
    row = rows.get(key)
    if row is None:
        close = difflib.get_close_matches(key, rows, n=3, cutoff=0.6)
        guess = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise GradsmithUsageError(
            f"check: --explain got {code!r}, which is not a finding code; {guess}give a code "
            "such as gradient-mismatch (`gradsmith check --explain all` lists them all)")
    plural = "s" if "," in row.check else ""
    where = "any check" if row.check == "any" else f"the {row.check} check{plural}"
    return "\n".join([
        f"{key}: {_severity(row)}, reported by {where}", "",
        f"Cause: {row.cause}", "", f"Fix: {row.fix}"])


def replace_table(text: str) -> str:
    """``text`` (docs/check.md) with its finding-code table replaced by :func:`table`.

    Raises:
        GradsmithUsageError: ``text`` has no such table.
    """
    start = text.find(HEADER)
    if start < 0:
        raise GradsmithUsageError(f"no finding-code table (a line {HEADER.splitlines()[0]!r}) "
                                  "in the text; add that header where the table goes")
    end = text.find("\n\n", start)
    end = len(text) if end < 0 else end + 1
    return text[:start] + table() + text[end:]


def main(argv: list[str] | None = None) -> int:
    """Print the table, or with a path rewrite that file's table in place."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stdout.write(table())
        return 0
    path = Path(args[0])
    path.write_text(replace_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
