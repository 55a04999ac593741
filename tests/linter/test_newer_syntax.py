"""Syntax of a newer Python than the one running gradsmith (PEP 695 type parameters, ``type``
statements, PEP 758 excepts, PEP 701 f-strings) is GS004, a warning that names the version to
run under, not GS001: the file is valid for its project (lint corpus 7: a project written for
Python 3.12 got 85 false syntax errors). A real syntax error stays GS001, an error. The reference
is the newer interpreter itself, where one is installed (pyenv), else the documented grammar."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradsmith.linter import lint

NEWER = {
    "generic_class.py": ((3, 12), "class Box[T]:\n    def get(self) -> T: ...\n"),
    "generic_def.py": ((3, 12), "def first[T](xs: list[T]) -> T:\n    return xs[0]\n"),
    "type_alias.py": ((3, 12), "type Pair = tuple[int, int]\n"),
    "fstring.py": ((3, 12), 'name = "x"\ntext = f"{"<" + name + ">"}"\n'),
    "fstring_backslash.py": ((3, 12), 'keys = ["a"]\ntext = f"{"\\n * ".join(keys)}"\n'),
    "generic_lines.py": ((3, 12), "class Pair[\n    T,\n]:\n    pass\n"),
    "excepts.py": ((3, 14), "try:\n    pass\nexcept ValueError, TypeError:\n    pass\n"),
}


def _parses_under(version: tuple[int, int], path: Path) -> bool | None:
    """Whether that Python compiles the file; None when it is not installed."""
    pyenv = Path.home().glob(f".pyenv/versions/{version[0]}.{version[1]}.*/bin/python")
    exe = next((str(p) for p in pyenv), None)  # a real interpreter, not pyenv's shim
    exe = exe or shutil.which(f"python{version[0]}.{version[1]}")
    if exe is None:
        return None
    done = subprocess.run([exe, "-c", f"compile(open({str(path)!r}).read(), 'f', 'exec')"],
                          capture_output=True, timeout=60)
    return done.returncode == 0


@pytest.mark.parametrize("name", sorted(NEWER))
def test_newer_syntax_is_a_warning_naming_the_version(tmp_path, name):
    version, text = NEWER[name]
    if sys.version_info[:2] >= version:
        pytest.skip(f"Python {sys.version_info[:2]} parses {name}")
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SyntaxError):  # this interpreter rejects it ...
        compile(text, name, "exec")
    if (ok := _parses_under(version, path)) is not None:
        assert ok  # ... and the Python it names accepts it
    (f,) = lint(path, config=False)
    assert (f.code, f.severity) == ("GS004", "warning")
    assert f"Python {version[0]}.{version[1]} syntax" in f.message


def test_a_real_syntax_error_stays_gs001(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("class Box[:\n    pass\n")
    with pytest.raises(SyntaxError):
        compile(path.read_text(), "broken.py", "exec")
    (f,) = lint(path, config=False)
    assert (f.code, f.severity) == ("GS001", "error")
