"""A truncated file in this machine's compile cache is the environment's failure (issue 18).

Corpus 9b's ``AttentionTorch`` (its backward ``@torch.compile``d) FAILed
``noncontiguous-mismatch`` with ``InductorError: ImportError: ... .main.so: file too short``: two
zero-byte libraries in the shared Inductor cache, left by compiles killed mid-write. Reduced
here: a backward that loads a library from the compile cache (as a compiled backward does) meets a
zero-byte one, a real ``dlopen`` failure. That is ``broken-compile-cache`` (INCOMPLETE, naming the
file to delete), never a defect of the Function; the same failure on a library outside the caches
(the user's own extension) stays the user's error, and a wrong gradient still fails.
"""

from __future__ import annotations

import ctypes
import json

import pytest
import torch

import gradsmith
from gradsmith.checker import environment

LIBRARY = {"path": ""}


def _load_kernel() -> None:
    ctypes.CDLL(LIBRARY["path"])  # raises OSError "<path>: file too short" on a zero-byte file


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        _load_kernel()
        return 2 * x * g


class SquareStridedKernel(torch.autograd.Function):
    """Loads its kernel only for a non-contiguous gradient: only the layout check meets it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if not (g.is_contiguous() and x.is_contiguous()):
            _load_kernel()
        return 2 * x * g


class CubeWrong(torch.autograd.Function):
    """x**3 with backward 2 * x * g: wrong whatever the cache holds."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@pytest.fixture
def truncated(tmp_path, monkeypatch):
    """A zero-byte library inside a fresh Inductor cache, as a killed compile leaves one."""
    cache = tmp_path / "inductor"
    (cache / "ab").mkdir(parents=True)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    lib = cache / "ab" / "cabc.main.so"
    lib.write_bytes(b"")
    monkeypatch.setitem(LIBRARY, "path", str(lib))
    return lib


def _x() -> torch.Tensor:
    return torch.randn(3, 4, dtype=torch.float64, requires_grad=True)


def test_the_loader_error_is_real_and_named(truncated):
    with pytest.raises(OSError, match="file too short"):
        _load_kernel()
    try:
        _load_kernel()
    except OSError as exc:
        assert environment.broken_artifact(exc) == str(truncated)


def test_a_truncated_cached_library_is_incomplete_not_a_backward_error(truncated):
    report = gradsmith.check(Square, _x())
    codes = {f.code: f for f in report.findings}
    assert not report.errors and report.incomplete
    assert "backward-error" not in codes
    found = codes["broken-compile-cache"]
    assert str(truncated) in found.message and f"delete {truncated}" in found.hint
    assert found.details["file"] == str(truncated)


def test_met_only_by_the_layout_check_it_is_still_the_environment(truncated):
    report = gradsmith.check(SquareStridedKernel, _x())
    codes = {f.code for f in report.findings}
    assert "noncontiguous-mismatch" not in codes and not report.errors
    assert "broken-compile-cache" in codes and report.incomplete


def test_the_users_own_library_stays_the_users_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    lib = tmp_path / "mine" / "myext.so"  # outside every compile cache
    lib.parent.mkdir()
    lib.write_bytes(b"")
    monkeypatch.setitem(LIBRARY, "path", str(lib))
    report = gradsmith.check(Square, _x())
    assert "backward-error" in {f.code for f in report.errors}
    assert "broken-compile-cache" not in {f.code for f in report.findings}


def test_a_wrong_gradient_still_fails_beside_a_broken_cache(truncated):
    report = gradsmith.check(CubeWrong, _x())
    assert "gradient-mismatch" in {f.code for f in report.errors}
    # an independent reference: autograd of the same expression
    x = _x()
    (want,) = torch.autograd.grad((x ** 3).sum(), x)
    (got,) = torch.autograd.grad(CubeWrong.apply(x).sum(), x)
    assert not torch.allclose(got, want)



FORWARD_LOADS = '''
import ctypes
import os

import torch


class SquareLoadsInForward(torch.autograd.Function):
    """Forward itself loads the broken kernel: no inputs can run it."""

    @staticmethod
    def forward(ctx, x):
        ctypes.CDLL(os.environ["BROKEN_KERNEL"])
        return x * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g
'''


def test_a_skip_it_causes_names_the_file_not_the_inputs(truncated, tmp_path, monkeypatch):
    from gradsmith.checkrun.session import run_check
    from gradsmith.discovery import Source

    monkeypatch.setenv("BROKEN_KERNEL", str(truncated))
    source = tmp_path / "broken_kernel_case.py"
    source.write_text(FORWARD_LOADS)
    result = run_check([Source("file", str(source), "broken_kernel_case.py")], isolate=False)
    (row,) = result.rows
    assert row["verdict"] != "pass"
    text = json.dumps(row)
    assert f"delete {truncated}" in text and "@gradsmith.example" not in text
