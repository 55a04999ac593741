"""An FFT length is tried below the signal's length (issue 18, corpus 5: a modulation spectrum).

``forward(ctx, y, n, norm)`` returns ``|rfft(y, n, axis=0, norm)|^2`` through a helper; the
function users call states ``n=64, norm=None``. Synthesis skipped (``norm`` invented as 1.5,
which numpy rejects: a ``None`` default was not read). With the stated values it would only
run ``n`` far above the synthesised length, where the transform pads: a backward that gives
every frame ``t < T`` a gradient, right only when ``T <= n``, would PASS. Now a parameter
passed as an FFT's ``n`` gets a variant one below the signal's length along the transformed
axis, where ``rfft`` crops, and the frames it drops must get no gradient. Reduced case
written here; gradients compared with autograd of ``torch.fft.rfft(y, n, dim=0).abs() ** 2``.
"""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

from gradsmith.checkrun.session import run_check
from gradsmith.discovery import Source, Synthesized, synthesize

FUNCTIONS = '''
import numpy as np
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


def _power(x, n, norm):
    return np.abs(np.fft.rfft(x, n=n, axis=0, norm=norm)) ** 2


def _grad(y, n, norm, g, frames):
    """d|S_k|^2/dy_t = 2 (Re S_k cos(w k t) - Im S_k sin(w k t)), for the first `frames`."""
    s = np.fft.rfft(y, n=n, axis=0, norm=norm)
    c = 2.0 / np.sqrt(n) if norm == "ortho" else 2.0
    kt = 2 * np.pi / n * np.arange(n // 2 + 1)[:, None] * np.arange(y.shape[0])
    out = np.zeros_like(y)
    for d in range(y.shape[1]):
        rows = c * (s.real[:, d:d + 1] * np.cos(kt) - s.imag[:, d:d + 1] * np.sin(kt))
        out[:frames, d] = (g[:, d] @ rows)[:frames]
    return out


class Spectrum(Function):
    @staticmethod
    def forward(ctx, y, n, norm):
        ctx.n = n
        ctx.norm = norm
        ctx.save_for_backward(y)
        return torch.from_numpy(_power(y.detach().numpy(), n, norm))

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        frames = min(y.shape[0], ctx.n)                    # rfft keeps the first n frames
        return torch.from_numpy(_grad(y.numpy(), ctx.n, ctx.norm, g.numpy(), frames)), \\
            None, None


class SpectrumEveryFrame(Function):
    @staticmethod
    def forward(ctx, y, n, norm):
        ctx.n = n
        ctx.norm = norm
        ctx.save_for_backward(y)
        return torch.from_numpy(_power(y.detach().numpy(), n, norm))

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        frames = y.shape[0]                                # planted: cropped frames too
        return torch.from_numpy(_grad(y.numpy(), ctx.n, ctx.norm, g.numpy(), frames)), \\
            None, None


def spectrum(y, n=64, norm=None):
    return Spectrum.apply(y, n, norm)


def spectrum_every_frame(y, n=64, norm=None):
    return SpectrumEveryFrame.apply(y, n, norm)
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("fft") / "fft_ops.py"
    path.write_text(textwrap.dedent(FUNCTIONS))
    result = run_check([Source("file", str(path), "fft_ops.py")], isolate=False)
    spec = importlib.util.spec_from_file_location("fft_ops", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded, {r["name"].split("::")[1]: r for r in result.rows}


def test_the_correct_spectrum_passes_padded_and_cropped(module):
    loaded, rows = module
    assert rows["Spectrum"]["verdict"] == "pass", rows["Spectrum"]["text"]
    found = synthesize(loaded.Spectrum)
    assert isinstance(found, Synthesized) and found.args[1:] == (64, None)
    crop = [v for v in found.variants if "the transform crops it" in v.change]
    assert len(crop) == 1
    y, n, norm = crop[0].args
    assert n == y.shape[0] - 1
    y = y.detach().clone().requires_grad_()
    g = torch.randn(n // 2 + 1, y.shape[1], dtype=y.dtype,
                    generator=torch.Generator().manual_seed(0))
    got = torch.autograd.grad(loaded.Spectrum.apply(y, n, norm), y, g)[0]
    expected = torch.autograd.grad(torch.fft.rfft(y, n=n, dim=0).abs() ** 2, y, g)[0]
    torch.testing.assert_close(got, expected)
    assert expected[n:].abs().max() == 0  # the cropped frames: no gradient


def test_a_backward_that_gives_cropped_frames_a_gradient_fails(module):
    _, rows = module
    row = rows["SpectrumEveryFrame"]
    assert row["verdict"] == "fail", row["text"]
    assert "the transform crops it" in row["text"]


def test_a_helper_of_the_same_project_is_followed_when_the_file_is_imported_on_its_own():
    # The corpus runner imported modspec.py under a name of its own (an installed copy of its
    # package came first on sys.path), so "same top-level package" by module name failed and
    # the FFT length inside nnmnkwii.preprocessing went unseen; a folder of the file's path
    # names the package.
    from gradsmith.discovery.callees import _same_package

    scope = {"__file__": "/src/proj/specpkg/autograd/_impl/ops.py"}
    assert _same_package("specpkg.preprocessing.spectrum", "gradsmith_target_ops_1a2b", scope)
    assert not _same_package("numpy.fft", "gradsmith_target_ops_1a2b", scope)
    assert not _same_package("specpkg", "gradsmith_target_ops_1a2b", scope)  # not a module of it
    assert _same_package("specpkg.helpers", "specpkg.ops", {})
    assert not _same_package("otherpkg.helpers", "specpkg.ops", scope)
    inside_torch = {"__file__": "/home/u/torch/experiments/ops.py"}  # a folder named torch
    assert not _same_package("torch.nn.functional", "gradsmith_target_ops_1a2b", inside_torch)
