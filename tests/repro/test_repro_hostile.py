"""``--repro`` scripts under hostile names and messages, and where they are written.

User text (an example name, an exception message) is embedded only as a literal or a comment:
a ``\"\"\"`` cannot end the docstring and inject code, a backslash cannot make the script a
SyntaxError. Same-named Functions in two packages get two scripts, and the count printed is
the number of files. A script finds the user's file relative to its own folder, so the pair
can be moved together. Every script starts with the marker line ``gradsmith check`` skips.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from gradsmith.cli import main as cli_main
from gradsmith.repro.script import MARKER

PAYLOAD = 'x\x1b[2J"""\nopen("PWNED", "w").write("ran")\n"""'  # and a clear screen

HOSTILE = f'''
import torch
import gradsmith
from torch.autograd import Function


@gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),),
                   name={PAYLOAD!r})
@gradsmith.example(lambda: (torch.randn(2, dtype=torch.float64, requires_grad=True),),
                   name="plain")
class Wrong(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x


@gradsmith.example(lambda: (torch.randn(3, dtype=torch.float64, requires_grad=True),))
class Raises(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        raise ValueError(r"cannot open C:\\new\\xyz \\N and \\u12 here" + ' """ ' + "'" * 3)
'''

SAME_NAME = '''
import torch
from torch.autograd import Function


class Wrong(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 2
'''


@pytest.fixture
def hostile(tmp_path: Path, capsys):
    (tmp_path / "hostile.py").write_text(textwrap.dedent(HOSTILE))
    out = tmp_path / "scripts"
    code = cli_main(["check", str(tmp_path / "hostile.py"), "--no-isolate", "--no-compat",
                     "--repro", str(out)])
    return code, capsys.readouterr().out, out


def test_user_text_in_a_script_is_a_literal_never_code(hostile, tmp_path: Path,
                                                     run_script) -> None:
    code, _, out = hostile
    assert code == 1
    scripts = sorted(out.glob("*.py"))
    assert len(scripts) == 3  # Wrong on both examples, Raises
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        compile(text, str(script), "exec")  # no SyntaxError from a backslash or a quote
        assert text.splitlines()[0] == MARKER
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    for script in scripts:
        done = run_script(script, run_dir, timeout=180)
        assert "REPRODUCED" in done.stdout, done.stdout + done.stderr
        assert done.returncode == 0, done.stdout + done.stderr
        assert "\x1b" not in done.stdout  # the name is printed with its escapes shown
    assert not any(run_dir.iterdir()) and not (out / "PWNED").exists()  # the payload never ran
    raises = next(s for s in scripts if "Raises" in s.name).read_text(encoding="utf-8")
    assert r"C:\\new\\xyz" in raises  # the message, shown with its escapes


def test_same_named_functions_in_two_packages_get_two_scripts(tmp_path: Path, capsys,
                                                            run_script) -> None:
    for package in ("pkg_a", "pkg_b"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "ops.py").write_text(SAME_NAME)
    out = tmp_path / "scripts"
    os.chdir(tmp_path)
    code = cli_main(["check", "pkg_a/ops.py", "pkg_b/ops.py", "--no-isolate", "--no-compat",
                     "--repro", str(out)])
    assert code == 1
    said = re.search(r"(\d+) repro script\(s\) written", capsys.readouterr().out)
    files = sorted(out.glob("*.py"))
    assert said and int(said.group(1)) == len(files) == 2
    assert len({f.read_text() for f in files}) == 2  # one per package, neither overwritten
    for f in files:
        done = run_script(f, tmp_path, timeout=180)
        assert done.returncode == 0 and "REPRODUCED" in done.stdout, done.stdout + done.stderr


def test_a_script_moved_with_the_code_still_finds_it(hostile, tmp_path: Path,
                                                    run_script) -> None:
    _, _, out = hostile
    moved = tmp_path / "elsewhere" / "project"
    moved.parent.mkdir()
    shutil.copytree(tmp_path, moved, ignore=shutil.ignore_patterns("elsewhere"))
    (tmp_path / "hostile.py").unlink()  # the absolute path written into the script is gone
    script = next((moved / "scripts").glob("*Wrong*plain*.py"))
    done = run_script(script, moved.parent, timeout=180)
    assert done.returncode == 0 and "REPRODUCED" in done.stdout, done.stdout + done.stderr
