"""NumPy is not a dependency (torch 2.13 does not require it either): the main job, the
embedded default of ``gradsmith check``, runs without it. ``.ci/install-smoke`` checks the
whole default run (deployment checks included) in a real venv without NumPy; this quicker
test (``--no-compat``) catches a new NumPy use in gradsmith's own code early."""

from __future__ import annotations

import json
import subprocess
import sys


def test_embedded_default_runs_without_numpy(tmp_path):
    code = ("import sys\nsys.modules['numpy'] = None  # import numpy raises ImportError\n"
            "from gradsmith.cli import main\n"
            "raise SystemExit(main(['check', '--no-isolate', '--no-compat', '--format', "
            "'json']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)["summary"]
    assert summary["failed"] == 0 and summary["passed"] > 50, summary
