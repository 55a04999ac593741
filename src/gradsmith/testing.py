"""Test-suite helpers: assert that a custom Function's gradients are right."""

from __future__ import annotations

from typing import Any


def assert_gradients(fn: Any, *args: Any, **kwargs: Any) -> None:
    """Run :func:`gradsmith.check` and raise ``AssertionError(str(report))`` if it failed.

    Args:
        fn: Function subclass, its ``.apply``, or a callable of tensors.
        *args: example inputs.
        **kwargs: forwarded to :func:`gradsmith.check` (``surrogate``, ``atol`` ...). Like
            it, the eager checks only (gradients, second order, mutation, ...) unless
            ``compat=True`` adds the deployment checks (compile, export, autocast, ...).

    Raises:
        AssertionError: with the readable report (findings and fixes; ``str(report)`` also
            lists the checks that did not run) when any error-level finding exists. Under
            pytest the traceback ends at the caller's line: this helper's frame is hidden
            (``__tracebackhide__``), as pytest's own helpers do.

    Example:
        >>> import torch
        >>> from gradsmith.testing import assert_gradients
        >>> assert_gradients(torch.sin, torch.randn(3, dtype=torch.float64))
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's frame
    from gradsmith.checker import check

    report = check(fn, *args, **kwargs)
    if not report.passed:
        raise AssertionError(report.format(skipped=False))
