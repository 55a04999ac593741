"""What an earlier input set already reported, so a further set skips explaining it again.

A Function checked on several input sets (the synthesised variants of ``gradsmith check``)
keeps each further set's findings only where the first sets had none of the same code on the
same input (:func:`gradsmith.checkrun.sets.merge`). Explaining such a finding again (the
declaration an undeclared estimator is given, fitted and verified against backward; the
Jacobian block around a gradient mismatch) costs hundreds of forwards and is thrown away:
on corpus 3's development half the declarations alone were a third of the eager checks'
seconds. Only the explanation is skipped: every comparison still runs, so a further set
finds what the first did not (a new code, or the same code on another input) as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_reported: ContextVar[frozenset[tuple[str, str | None]]] = ContextVar(
    "gradsmith_already_reported", default=frozenset())


@contextmanager
def already(pairs: Iterable[tuple[str, str | None]]) -> Iterator[None]:
    """Inside the block, ``(code, input)`` pairs in ``pairs`` count as already reported."""
    token = _reported.set(frozenset(pairs))
    try:
        yield
    finally:
        _reported.reset(token)


def known(code: str, label: str | None) -> bool:
    """True when an earlier input set already reported ``code`` on input ``label``: a finding
    this check would add with them is dropped at the merge, so its explanation is not needed."""
    return (code, label) in _reported.get()
