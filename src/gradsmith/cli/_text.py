"""Text from user code on the terminal: shown, never obeyed (private).

An exception message, a printed line or a file name can hold rich markup (``[/]``) and
terminal control sequences (``ESC[2J`` clears the screen, ``ESC[1A`` moves the cursor up over
a FAIL line, ``ESC]0;...`` retitles the window). :func:`escape` neutralises both.
"""

from __future__ import annotations

from rich.markup import escape as _escape_markup

# C0 and C1 control characters other than tab and newline, shown as \\xNN.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))
            if c not in (0x09, 0x0A)}


def escape(text: str) -> str:
    r"""``text`` for ``Console.print``: markup escaped, control characters made visible.

    Example:
        >>> print(escape("[red]x\x1b[2J"))
        \[red]x\x1b[2J
    """
    return _escape_markup(text.translate(_CONTROL))
