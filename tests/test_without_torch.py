"""torch is optional: lint, its flake8 plugin and the CLI's parsing run without it; check, bench
and the op catalog say in one line what to install.

Each test runs a fresh interpreter in which ``import torch`` fails as if torch were not
installed (``sys.modules["torch"] = None``), so an accidental torch import anywhere on the
lint path fails the test. The real installs (no torch at all, a pre-commit hook environment)
are exercised by ``.ci/install-smoke``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CPU_INDEX = "https://download.pytorch.org/whl/cpu"

BAD_FUNCTION = textwrap.dedent("""\
    import torch

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2
    """)


def _run_without_torch(code: str, cwd, *args: str) -> subprocess.CompletedProcess:
    prelude = "import sys\nsys.modules['torch'] = None  # import torch raises ImportError\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def _cli(cwd, *args: str) -> subprocess.CompletedProcess:
    return _run_without_torch("from gradsmith.cli import main\nraise SystemExit(main(sys.argv[1:]))",
                              cwd, *args)


def test_lint_runs_and_finds_without_torch(tmp_path):
    (tmp_path / "ops.py").write_text(BAD_FUNCTION)
    proc = _cli(tmp_path, "lint", "ops.py", "--format", "json")
    assert proc.returncode == 1, proc.stderr  # findings, not a crash
    assert '"GS101"' in proc.stdout, proc.stdout


def test_lint_leaves_torch_unimported(tmp_path):
    (tmp_path / "ops.py").write_text(BAD_FUNCTION)
    proc = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom gradsmith.cli import main\nmain(['lint', 'ops.py'])\n"
                               "print('torch' in sys.modules)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "False", proc.stdout + proc.stderr


def test_flake8_plugin_without_torch(tmp_path):
    (tmp_path / "ops.py").write_text(BAD_FUNCTION)
    proc = _run_without_torch("""
        import ast
        from gradsmith.linter.flake8 import Plugin
        src = open('ops.py').read()
        codes = sorted({r[2].split()[0] for r in Plugin(ast.parse(src), 'ops.py',
                                                        src.splitlines(True)).run()})
        print(' '.join(codes))
        """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "GS101" in proc.stdout.split(), proc.stdout


@pytest.mark.parametrize("command", [["check"], ["check", "ops.py"], ["bench", "--list"]])
def test_torch_commands_say_in_one_line_what_to_install(command, tmp_path):
    (tmp_path / "ops.py").write_text(BAD_FUNCTION)
    proc = _cli(tmp_path, *command)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"gradsmith {command[0]} needs PyTorch" in lines[0]
    assert f"pip install torch --index-url {CPU_INDEX}" in lines[0]


def test_help_works_without_torch(tmp_path):
    proc = _cli(tmp_path, "check", "--help")
    assert proc.returncode == 0 and "TARGET" in proc.stdout, proc.stderr


@pytest.mark.parametrize("module", ["gradsmith.functional", "gradsmith.nn", "gradsmith.bench"])
def test_torch_modules_raise_import_error_with_the_fix(module, tmp_path):
    proc = _run_without_torch(f"""
        try:
            import {module}
        except ImportError as exc:
            print(type(exc).__name__, exc.name, '|', exc)
        """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    kind, name, _, message = proc.stdout.strip().split(" ", 3)
    assert (kind, name) == ("TorchMissingError", "torch")
    assert "needs PyTorch (torch>=2.13.0)" in message and CPU_INDEX in message


def test_lazy_check_attribute_raises_the_same_error(tmp_path):
    proc = _run_without_torch("""
        import gradsmith
        print(gradsmith.lint.__name__)  # the linter is there
        try:
            gradsmith.check
        except ImportError as exc:
            print(exc)
        """, tmp_path)
    first, second = proc.stdout.strip().splitlines()
    assert first == "lint"
    assert second.startswith("the verifier (gradsmith.check) needs PyTorch")


def test_pytest_plugin_is_inert_without_torch_and_explains_with_gradsmith(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_ok():\n    assert True\n")
    (tmp_path / "ops.py").write_text(BAD_FUNCTION)
    run = "import pytest\nraise SystemExit(pytest.main(sys.argv[1:]))"
    plain = _run_without_torch(run, tmp_path, "-q", "-p", "no:cacheprovider", "test_plain.py")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    asked = _run_without_torch(run, tmp_path, "-q", "-p", "no:cacheprovider",
                               "--gradsmith", "ops.py", "test_plain.py")
    assert asked.returncode == 4, asked.stdout + asked.stderr  # pytest's usage error
    assert "--gradsmith needs PyTorch" in asked.stderr and CPU_INDEX in asked.stderr
