"""Errors raised by gradsmith's public entry points."""

from __future__ import annotations


class GradsmithError(ValueError):
    """Bad input to a gradsmith API: says what was expected, what was received, and the fix.

    Subclasses ``ValueError`` so that code catching the usual argument errors still works.
    """


class GradsmithUsageError(GradsmithError):
    """A command-line or target-resolution error (the CLI maps it to exit code 2)."""
