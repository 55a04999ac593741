"""The parsed source of a function, class or module, once per object.

Synthesis reads the same ``forward``/``backward`` for many facts (hints, contract, flags, uses,
stated shapes); each read used to fetch and parse the source again. The trees are only read,
never changed, so one parse serves them all.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from typing import Any


def parse(obj: Any) -> ast.AST | None:
    """``obj``'s source as an AST (dedented), or ``None`` when it has none that parses."""
    try:
        return _parse(obj)
    except TypeError:  # unhashable: parse it uncached
        return _parse.__wrapped__(obj)


@functools.lru_cache(maxsize=512)
def _parse(obj: Any) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
