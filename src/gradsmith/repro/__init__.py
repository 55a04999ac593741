"""Standalone reproduction scripts for failing checks (``gradsmith check --repro DIR``).

A failing row carries a ``repro`` record (:mod:`gradsmith.repro.capture`): the seed, where the
Function lives, and every set of inputs it was checked on, with exact values. From it,
:func:`write_scripts` writes one script per error finding that imports the user's Function and
plain PyTorch only (never gradsmith), recomputes what the check compared, prints the same
numbers and ends with ``REPRODUCED`` (exit 0) or ``NOT REPRODUCED`` (exit 3).
"""

from gradsmith.repro.capture import capture_args, capture_value
from gradsmith.repro.script import render_script, write_scripts

__all__ = ["capture_args", "capture_value", "render_script", "write_scripts"]
