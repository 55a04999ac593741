"""Dogfood: the part-1 op modules are clean under ``gradsmith lint``."""

from __future__ import annotations

from pathlib import Path

import gradsmith

OPS = Path(gradsmith.__file__).resolve().parent / "ops"
PART1 = ["_activations.py", "_piecewise.py", "_estimators.py", "_reversal.py", "_gumbel.py",
         "_fused.py", "_bitmask.py", "_reductions.py", "_common.py", "_validate.py"]


def test_part1_op_modules_have_no_lint_findings():
    findings = gradsmith.lint([str(OPS / name) for name in PART1])
    assert findings == [], "\n".join(map(str, findings))
