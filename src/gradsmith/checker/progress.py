"""Who wants to know, while :func:`gradsmith.check` runs, which property check it is on.

The isolation worker listens, and streams each check's findings to ``gradsmith check`` as soon
as it finishes, so a Function that runs out of time keeps the findings of the checks that
finished and the row can say which check was running.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: ``listener(name, report)``: check ``name`` starts now and every earlier one has finished,
#: its findings already in ``report``; ``name`` is ``None`` once the last check finished.
Listener = Callable[[Any, Any], None]
_listener: ContextVar[Listener | None] = ContextVar("gradsmith_check_progress", default=None)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call ``listener`` at every check boundary of the ``check`` calls inside the block."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def notify(name: str | None, report: Any) -> None:
    """Called by the engine before each check (``name``) and after the last (``None``)."""
    listener = _listener.get()
    if listener is not None:
        listener(name, report)
