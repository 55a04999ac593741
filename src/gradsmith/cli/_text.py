"""Text from user code on the terminal: shown, never obeyed (private).

An exception message, a printed line or a file name can hold rich markup (``[/]``) and
terminal control sequences (``ESC[2J`` clears the screen, ``ESC[1A`` moves the cursor up over
a FAIL line, ``ESC]52;...`` writes the clipboard, ``ESC]0;...`` retitles the window).
:func:`escape` neutralises both in report text, which keeps its own line breaks;
:func:`one_line` and :func:`escape_line` also show line breaks as ``\\n``, for what must stay
on one line (a Function, example or file name): a name cannot forge a summary line in a pipe.
Every printer of ``gradsmith check`` goes through these.
"""

from __future__ import annotations

from rich.markup import escape as _escape_markup

# C0 and C1 control characters other than tab and newline, shown as \\xNN.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))
            if c not in (0x09, 0x0A)}
# What one line also shows instead of obeying: line breaks, tab, and the Unicode line and
# paragraph separators and bidirectional overrides, which reorder what a terminal shows.
_ONE_LINE = {**_CONTROL, 0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r",
             **{c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F),
                                            *range(0x2066, 0x206A), 0x200E, 0x200F)}}


def escape(text: str) -> str:
    r"""``text`` for ``Console.print``: markup escaped, control characters made visible.

    Example:
        >>> print(escape("[red]x\x1b[2J"))
        \[red]x\x1b[2J
    """
    return _escape_markup(text.translate(_CONTROL))


def one_line(text: str) -> str:
    r"""``text`` on one line, every control character and line break shown, not obeyed
    (plain text, for ``print``).

    Example:
        >>> print(one_line("ex\x1b]52;c;aGk=\x07\n1 passed"))
        ex\x1b]52;c;aGk=\x07\n1 passed
    """
    return str(text).translate(_ONE_LINE)


def escape_line(text: str) -> str:
    r""":func:`one_line` with rich markup escaped, for ``Console.print``.

    Example:
        >>> print(escape_line("F[bold]\n0 failed"))
        F\[bold]\n0 failed
    """
    return _escape_markup(one_line(text))
