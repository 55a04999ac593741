"""Test-suite helpers: assert that a custom Function's gradients are right."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def assert_gradients(fn: Any, *args: Any, require: str | Sequence[str] = (),
                     **kwargs: Any) -> None:
    """Run :func:`gradsmith.check` and raise ``AssertionError(str(report))`` if it failed.

    Args:
        fn: Function subclass, its ``.apply``, or a callable of tensors.
        *args: example inputs.
        require: names that must hold, as ``gradsmith check --require`` takes them:
            ``"second-order"`` (a ``double-backward-unsupported`` warning, a backward
            autograd cannot differentiate, then fails), or deployment columns (``"compile"``
            ...; with ``compat=True``, else they are ``required-not-checked``).
        **kwargs: forwarded to :func:`gradsmith.check` (``surrogate``, ``atol`` ...). Like
            it, the eager checks only (gradients, second order, mutation, ...) unless
            ``compat=True`` adds the deployment checks (compile, export, autocast, ...).

    Raises:
        AssertionError: with the readable report (findings and fixes; ``str(report)`` also
            lists the checks that did not run) when any error-level finding exists, or a
            warning of a required name. Under pytest the traceback ends at the caller's
            line: this helper's frame is hidden (``__tracebackhide__``), as pytest's own
            helpers do.
        GradsmithUsageError: ``require`` names something that cannot be required.

    Example:
        >>> import torch
        >>> from gradsmith.testing import assert_gradients
        >>> assert_gradients(torch.sin, torch.randn(3, dtype=torch.float64))
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's frame
    from gradsmith._check_policy import apply, split, validate_require
    from gradsmith.checker import check

    names = validate_require("require=", split("require=", require))
    report = check(fn, *args, **kwargs)
    if not names:
        if not report.passed:
            raise AssertionError(report.format(skipped=False))
        return
    # the same policy as gradsmith check --require, on the report's JSON form
    row = {"name": report.name, "verdict": "pass" if report.passed else "fail",
           "error": "incomplete" if report.verdict == "INCOMPLETE" else None,
           "report": report.to_dict()}
    apply([row], select=[], ignore=[], require=names)
    if row["verdict"] != "pass":
        raise AssertionError(row["_text_brief"])
