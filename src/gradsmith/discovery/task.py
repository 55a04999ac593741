"""Listing a target's candidates as a task for the isolated worker (``gradsmith check`` and
``gradsmith bench`` import user code only there).

A task ``(KIND, source)`` makes the worker (:mod:`gradsmith.isolation`) import this module in
the task process and call :func:`run`; see :func:`gradsmith.isolation.task.task_module`.
"""

from __future__ import annotations

from gradsmith._errors import GradsmithUsageError
from gradsmith.discovery.collect import TargetImportError, list_candidates
from gradsmith.discovery.targets import Source

#: The kind of a listing task: ``(KIND, source)``.
KIND = __name__
#: Listing a target is importing it: the worker gives it the start-up limit
#: (``--startup-timeout``), not a Function's ``--timeout``.
IMPORTS_FIRST = True


def run(source: Source) -> dict:
    """List a source's candidates as ``{"candidates", "errors"}`` or ``{"usage"|"import": msg}``."""
    try:
        listing = list_candidates(source)
    except GradsmithUsageError as exc:
        return {"usage": str(exc)}
    except TargetImportError as exc:
        return {"import": str(exc)}
    return {"candidates": listing.candidates, "errors": listing.errors}


def raised(what: str, source: Source, progress: dict) -> dict:
    """Importing the source raised ``what``, a ``BaseException`` that is not an ``Exception``."""
    return {"import": what}
