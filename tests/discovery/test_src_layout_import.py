"""A file of a regular package under a src/ layout is imported from its own ``src/``, even when
another copy of the package (an installed release) comes earlier on ``sys.path`` (corpus 9a:
tad-mctc's ``src/tad_mctc/storch/linalg.py`` resolved to the installed ``tad_mctc``, was then
imported alone and reported "attempted relative import with no known parent package").
Reduced cases written here; a wrong backward in the imported file still fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from source_cases import assert_clip_checked, write

from gradsmith.discovery.collect import load_module

PACKAGE = "gs_srclayout_pkg"  # unique: a package another test left in sys.modules cannot shadow it
CLIP = """
    import torch

    from ..limits import LIMIT


    class Clip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(-LIMIT, LIMIT)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ((x >= -LIMIT) & (x <= LIMIT)).to(x.dtype) * FACTOR
"""


@pytest.fixture(autouse=True)
def _forget(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def _package(root: Path, limit: str, factor: str) -> str:
    """``root/PACKAGE/ops/clip.py``, importing ``LIMIT`` two levels up; returns its path."""
    write(root / PACKAGE / "__init__.py", "")
    write(root / PACKAGE / "limits.py", f"LIMIT = {limit}\n")
    write(root / PACKAGE / "ops" / "__init__.py", "")
    return write(root / PACKAGE / "ops" / "clip.py", CLIP.replace("FACTOR", factor))


@pytest.mark.parametrize("factor", ["1", "2"])
def test_a_src_layout_file_is_imported_from_its_own_src_not_an_installed_copy(
        tmp_path, capsys, monkeypatch, factor):
    # an installed release (another LIMIT) comes first; the project's src/ is on the path after it
    _package(tmp_path / "site-packages", "5.0", "1")
    path = _package(tmp_path / "proj" / "src", "1.0", factor)
    sys.path.insert(0, str(tmp_path / "site-packages"))
    sys.path.append(str(tmp_path / "proj" / "src"))
    module = load_module("file", path)
    assert Path(module.__file__).resolve() == Path(path).resolve()
    assert module.__name__ == f"{PACKAGE}.ops.clip"
    assert module.LIMIT == 1.0  # its own package's limits.py, not the installed one's
    assert_clip_checked(tmp_path, capsys, monkeypatch, path, factor)
