"""The repro tests' script runner (``conftest.run_script``) runs a script as a fresh
``python SCRIPT`` does: same status, output, argv, path, working directory and ``__main__``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SHOWS_ITS_PROCESS = textwrap.dedent('''
    import os, sys
    print("argv", sys.argv)
    print("path0", sys.path[0])
    print("cwd", os.getcwd())
    print("name", __name__, "main", sys.modules["__main__"].__dict__.get("MARK"))
    print("stdin", repr(sys.stdin.read()))
    print("gradsmith-loaded", "gradsmith" in sys.modules)
    MARK = 1
    print("to stderr", file=sys.stderr)
    sys.exit(3)
''')


def test_the_runner_matches_a_fresh_interpreter(run_script, tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "cwd").mkdir()
    script = tmp_path / "code" / "shows.py"
    script.write_text(SHOWS_ITS_PROCESS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    fresh = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, cwd=tmp_path / "cwd", env=env,
                           timeout=60)
    forked = run_script(script, cwd=tmp_path / "cwd")
    assert fresh.returncode == 3 and "argv" in fresh.stdout, fresh.stderr
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_blocked_gradsmith_import_fails_the_script(run_script, tmp_path):
    script = tmp_path / "imports.py"
    script.write_text("import gradsmith\nprint('imported')\n")
    done = run_script(script, block=True)
    assert done.returncode == 1 and "imported" not in done.stdout
    assert "ModuleNotFoundError" in done.stderr and "gradsmith" in done.stderr
    assert run_script(script).stdout == "imported\n"  # without block it is importable
