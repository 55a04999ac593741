"""``gradsmith bench`` without NumPy (not a dependency) does not open with torch's "Failed to
initialize NumPy" warning (issue 21); see tests/test_without_numpy.py for ``check``."""

from __future__ import annotations

import subprocess
import sys


def test_bench_starts_without_the_numpy_warning(tmp_path):
    code = ("import sys\nsys.modules['numpy'] = None  # import numpy raises ImportError\n"
            "from gradsmith.cli import main\n"
            "raise SystemExit(main(['bench', '--list']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "clipped_relu" in proc.stdout  # it listed the catalog: torch was imported
    assert "NumPy" not in proc.stderr, proc.stderr
