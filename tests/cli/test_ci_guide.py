"""The CI guide (docs/ci.md) and the README's pre-commit snippet work as written (issue 21: the
snippet named a placeholder repository and a tag that does not exist). .ci/install-smoke runs
the snippet under pre-commit itself; these tests run what it and the workflow execute."""

from __future__ import annotations

import runpy
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
snippet = runpy.run_path(str(ROOT / ".ci" / "readme_snippet.py"))["snippet"]
BIN = Path(sys.executable).parent

CORRECT = '''
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad
'''
# In-place on forward's input (GS101 for the linter) and a gradient off by a factor.
BROKEN = '''
import torch


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 3
'''


def _hook(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.strip().lstrip("- ").partition(":")
                                                 for line in text.splitlines()) if v.strip()}


def test_readme_and_guide_share_one_pre_commit_snippet_that_needs_no_placeholder():
    readme = snippet(ROOT / "README.md", "# .pre-commit-config.yaml")
    assert readme == snippet(ROOT / "docs" / "ci.md", "# .pre-commit-config.yaml")
    assert "OWNER" not in readme and "rev:" not in readme  # nothing to fill in
    hook = _hook(readme)
    assert (hook["repo"], hook["id"], hook["language"]) == ("local", "gradsmith-lint", "system")


def test_the_snippets_hook_command_lints_like_pre_commit_runs_it(tmp_path):
    hook = _hook(snippet(ROOT / "README.md", "# .pre-commit-config.yaml"))
    (tmp_path / "ops.py").write_text(BROKEN)
    command = shlex.split(hook["entry"])
    done = subprocess.run([str(BIN / command[0]), *command[1:], "ops.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "GS101" in done.stdout, done.stdout + done.stderr


def _workflow_commands() -> list[list[str]]:
    flow = snippet(ROOT / "docs" / "ci.md", "# .github/workflows/gradsmith.yml")
    runs = [line.split("- run:", 1)[1].strip() for line in flow.splitlines()
            if line.strip().startswith("- run: gradsmith ")]
    assert len(runs) == 2
    return [shlex.split(r) for r in runs]


def _run(tmp_path: Path, source: str) -> list[subprocess.CompletedProcess]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ops.py").write_text(textwrap.dedent(source))
    return [subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=tmp_path, capture_output=True,
                           text=True, timeout=900) for argv in _workflow_commands()]


def test_workflow_commands_pass_a_correct_function(tmp_path):
    for done in _run(tmp_path, CORRECT):
        assert done.returncode == 0, done.stdout + done.stderr


def test_workflow_commands_annotate_and_fail_a_broken_one(tmp_path):
    lint, check = _run(tmp_path, BROKEN)
    assert lint.returncode == 1 and "::error file=src/ops.py" in lint.stdout
    assert "GS101" in lint.stdout
    assert check.returncode == 1, check.stdout + check.stderr
    errors = [ln for ln in check.stdout.splitlines() if ln.startswith("::error ")]
    line = BROKEN.splitlines().index("class Double(torch.autograd.Function):") + 1
    assert errors and all(f"file=src/ops.py,line={line}," in ln for ln in errors)
    assert any("title=gradient-mismatch" in ln or "title=input-mutated" in ln for ln in errors)
