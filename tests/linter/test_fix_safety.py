"""`lint --fix` changes exactly the intended tokens, and never loses or half-writes a file.

Each expected file is built independently of the linter: the original bytes with the one
intended replacement (or insertion) made by hand.
"""

from __future__ import annotations

import ast
import builtins
import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gradsmith._errors import GradsmithError
from gradsmith.cli import main
from gradsmith.linter import _run, fix, lint
from gradsmith.linter._source import split_lines

# backward reads the deprecated ctx.saved_variables (GS202, fixable); a string two lines above
# holds the same word, where a fix counted with str.splitlines() used to land.
BODY = (
    "class Fn(torch.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, x):\n"
    "        ctx.save_for_backward(x)\n"
    "        return x * 2\n"
    "\n"
    "    @staticmethod\n"
    "    def backward(ctx, g):\n"
    '        why = "saved_variables are deprecated"\n'
    "\n"
    "        (x,) = ctx.saved_variables\n"
    "        return g * 2 + 0 * x\n"
)
OLD, NEW = "ctx.saved_variables", "ctx.saved_tensors"
# Characters str.splitlines() breaks at and Python does not (\x0b is not allowed in source).
NOT_LINE_BREAKS = ["\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _with_breaks(char: str) -> str:
    """``char`` in a comment and a string (a form feed also as a line of its own, as pep8 has)."""
    own_line = f"{char}\n" if char == "\x0c" else ""
    return (f"import torch\n{own_line}# a note{char} with a break{char}\n"
            f"NOTE = 'keep{char}this'\n\n\n" + BODY)


@pytest.mark.parametrize("char", NOT_LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_BREAKS])
def test_fix_lands_on_the_intended_token(tmp_path, char, capsys):
    src = _with_breaks(char)
    assert src.count(OLD) == 1
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("utf-8"))
    assert main(["lint", "--fix", str(path)]) == 0
    assert path.read_bytes() == src.replace(OLD, NEW).encode("utf-8")
    assert "fixed 1 finding(s) in 1 file(s)" in capsys.readouterr().err


@pytest.mark.parametrize("char", ["\x0c", "\u2028"], ids=["formfeed", "U+2028"])
def test_positions_noqa_and_diff_use_pythons_lines(tmp_path, char, capsys):
    src = _with_breaks(char)
    node = next(n for n in ast.walk(ast.parse(src))
                if isinstance(n, ast.Attribute) and n.attr == "saved_variables")
    (finding,) = lint(source=src)
    assert (finding.code, finding.line) == ("GS202", node.lineno)
    # A noqa comment on the real line silences it.
    silenced = src.replace(OLD, OLD + "  # noqa: GS202")
    assert lint(source=silenced) == []
    # --diff shows exactly the one changed line, as it is in the file.
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("utf-8"))
    assert main(["lint", "--diff", str(path)]) == 0
    diff = capsys.readouterr().out.splitlines(keepends=False)
    changed = [d for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---")]
    line = src.split("\n")[node.lineno - 1]
    assert changed == [f"-{line}", f"+{line.replace(OLD, NEW)}"]
    assert path.read_bytes() == src.encode("utf-8")


def test_split_lines_matches_the_compiler():
    src = "a = 1\r\nb = '''x\ry\x0cz\u2028'''\rc = 2  # \x85\n\x0cd = 3\ne = '\x1c'"
    tree = ast.parse(src)
    lines = split_lines(src)
    for stmt in tree.body:
        assert lines[stmt.lineno - 1].lstrip("\x0c").startswith(stmt.targets[0].id)
    assert len(lines) == max(s.end_lineno for s in tree.body)


# -- encoding, BOM and line endings ----------------------------------------------------------

def _fix_file(path: Path) -> int:
    return main(["lint", "--fix", str(path)])


def test_latin1_file_is_written_back_in_latin1(tmp_path, capsys):
    src = "# -*- coding: latin-1 -*-\nimport torch\nLABEL = 'café, naïve'\n\n\n" + BODY
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("latin-1"))
    assert _fix_file(path) == 0
    assert path.read_bytes() == src.replace(OLD, NEW).encode("latin-1")


def test_utf8_bom_is_kept(tmp_path, capsys):
    src = "import torch\nLABEL = 'café'\n\n\n" + BODY
    path = tmp_path / "m.py"
    path.write_bytes(b"\xef\xbb\xbf" + src.encode("utf-8"))
    assert _fix_file(path) == 0
    assert path.read_bytes() == b"\xef\xbb\xbf" + src.replace(OLD, NEW).encode("utf-8")


# forward without @staticmethod (GS113): the fix inserts a line.
NO_STATICMETHOD = (
    "import torch\n\n\nclass Fn(torch.autograd.Function):\n"
    "    def forward(ctx, x):\n        return x * 2\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n"
)


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["CRLF", "CR"])
def test_inserted_line_ends_like_the_file(tmp_path, newline, capsys):
    src = NO_STATICMETHOD.replace("\n", newline)
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("utf-8"))
    assert _fix_file(path) == 0
    forward = f"    def forward(ctx, x):{newline}"
    expected = src.replace(forward, f"    @staticmethod{newline}{forward}")
    assert path.read_bytes() == expected.encode("utf-8")


# -- writing: whole-file replacement, failures leave the original -------------------------

def _big_file(tmp_path: Path) -> tuple[Path, bytes]:
    padding = "".join(f"# padding line {i:06d} {'.' * 40}\n" for i in range(4800))
    src = "import torch\n" + padding + "\n\n" + BODY
    path = tmp_path / "big.py"
    path.write_bytes(src.encode("utf-8"))
    assert len(src) > 250_000
    return path, src.encode("utf-8")


def _leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def test_full_disk_leaves_the_original_whole(tmp_path):
    """A file-size limit (as a full disk or quota) stops the write: nothing is truncated."""
    path, before = _big_file(tmp_path)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

    proc = subprocess.run(
        [sys.executable, "-m", "gradsmith", "lint", "--fix", str(path)],
        preexec_fn=limit, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert path.read_bytes() == before
    assert _leftovers(tmp_path, {"big.py"}) == []
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert errors == [f"gradsmith lint: error: {path}: cannot write it (File too large); "
                      "the file is unchanged"]


def test_enospc_on_sync_leaves_the_original(tmp_path, monkeypatch, capsys):
    path, before = _big_file(tmp_path)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    assert main(["lint", "--fix", str(path)]) == 2
    assert path.read_bytes() == before
    assert _leftovers(tmp_path, {"big.py"}) == []
    err = capsys.readouterr().err
    assert f"gradsmith lint: error: {path}: cannot write it (No space left on device)" in err
    assert "fixed 0 finding(s) in 0 file(s)" in err


def test_file_is_replaced_whole_with_its_mode(tmp_path, capsys):
    """A reader that opened the file before the fix reads the old file whole, not a mix;
    mode and owner are kept."""
    src = "import torch\n\n\n" + BODY
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("utf-8"))
    path.chmod(0o640)
    owner = (65534, 65534) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    os.chown(path, *owner)  # root fixing a user's file leaves it theirs
    with open(path, "rb") as reader:
        assert main(["lint", "--fix", str(path)]) == 0
        assert reader.read() == src.encode("utf-8")
    assert path.read_bytes() == src.replace(OLD, NEW).encode("utf-8")
    assert path.stat().st_mode & 0o7777 == 0o640
    assert (path.stat().st_uid, path.stat().st_gid) == owner
    assert _leftovers(tmp_path, {"m.py"}) == []


def test_symlink_stays_a_link(tmp_path, capsys):
    src = "import torch\n\n\n" + BODY
    target = tmp_path / "real.py"
    target.write_bytes(src.encode("utf-8"))
    link = tmp_path / "link.py"
    link.symlink_to(target.name)
    assert main(["lint", "--fix", str(link)]) == 0
    assert link.is_symlink()
    assert target.read_bytes() == src.replace(OLD, NEW).encode("utf-8")


def test_edit_saved_during_the_fix_is_kept(tmp_path, monkeypatch, capsys):
    """The user saves the file after it was read: the fix is refused, their text stays."""
    src = "import torch\n\n\n" + BODY
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("utf-8"))
    newer = (src + "\n\nUSER_LINE = 1\n").encode("utf-8")
    compute = _run.fix

    def fix_while_user_saves(raws, opts):
        result = compute(raws, opts)
        path.write_bytes(newer)
        return result

    monkeypatch.setattr(_run, "fix", fix_while_user_saves)
    assert main(["lint", "--fix", str(path)]) == 2
    assert path.read_bytes() == newer
    assert _leftovers(tmp_path, {"m.py"}) == []
    captured = capsys.readouterr()
    assert f"gradsmith lint: error: {path}: it changed on disk after it was read" in captured.err
    # The findings shown are those of the file as it is now (the user's, still unfixed).
    assert "GS202" in captured.out


def test_api_refuses_a_file_changed_during_the_fix(tmp_path, monkeypatch):
    src = "import torch\n\n\n" + BODY
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("utf-8"))
    newer = src.replace("return x * 2", "return x * 3").encode("utf-8")
    compute = _run.fix

    def fix_while_user_saves(raws, opts):
        result = compute(raws, opts)
        path.write_bytes(newer)
        return result

    monkeypatch.setattr(_run, "fix", fix_while_user_saves)
    with pytest.raises(GradsmithError, match=r"m\.py: it changed on disk after it was read"):
        fix(str(path), write=True)
    assert path.read_bytes() == newer


@pytest.fixture
def read_only(monkeypatch):
    """Deny writes under a folder as a non-root user would see them (tests run as root)."""
    denied: list[str] = []

    def inside(target) -> bool:
        return isinstance(target, (str, os.PathLike)) and any(
            os.path.abspath(os.fspath(target)).startswith(d) for d in denied)

    real_open, real_os_open, real_access = builtins.open, os.open, os.access

    def fake_open(file, mode="r", *args, **kwargs):
        if inside(file) and any(c in mode for c in "wax+"):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(file, flags, *args, **kwargs):
        if inside(file) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
        return real_os_open(file, flags, *args, **kwargs)

    def fake_access(file, mode, *args, **kwargs):
        if inside(file) and mode & os.W_OK:
            return False
        return real_access(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(os, "access", fake_access)
    return denied


def test_unwritable_file_is_one_line_and_exit_2(tmp_path, read_only, capsys):
    src = "import torch\n\n\n" + BODY
    path = tmp_path / "m.py"
    path.write_bytes(src.encode("utf-8"))
    read_only.append(str(tmp_path))
    assert main(["lint", "--fix", str(path)]) == 2
    assert path.read_bytes() == src.encode("utf-8")
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"gradsmith lint: error: {path}: cannot write it (")
    assert "Traceback" not in err


def test_link_and_target_named_together_are_fixed_once(tmp_path, capsys):
    src = "import torch\n\n\n" + BODY
    target = tmp_path / "real.py"
    target.write_bytes(src.encode("utf-8"))
    link = tmp_path / "link.py"
    link.symlink_to(target.name)
    assert main(["lint", "--fix", str(link), str(target)]) == 0
    assert link.is_symlink()
    assert target.read_bytes() == src.replace(OLD, NEW).encode("utf-8")
    assert "error" not in capsys.readouterr().err


def test_source_text_with_a_coding_line_is_not_garbled():
    src = "# -*- coding: latin-1 -*-\nimport torch\nLABEL = 'café'\n\n\n" + BODY
    assert fix(source=src).texts["<string>"] == src.replace(OLD, NEW)
    assert [f.code for f in lint(source=src)] == ["GS202"]
