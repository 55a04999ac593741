"""GS221 on forward's inputs (fixtures/contig_inputs.py), run in Triton's interpreter on
CPU: a kernel that loads its input with row-major offsets of its own returns a wrong output
for a transposed input, and the right one once forward makes it contiguous or passes its
strides; a flat elementwise kernel writing into `empty_like(x)` reads it right. Outputs are compared with the plain expression ``x * 2``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

pytest.importorskip("triton", reason="needs triton: pip install 'gradsmith[triton]'")
pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")

FIXTURE = Path(__file__).parent / "fixtures" / "contig_inputs.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    from gradsmith._triton import interpreting, prepare

    if not prepare() and not interpreting() and not torch.cuda.is_available():
        pytest.skip("Triton kernels cannot run here (no interpreter, no GPU)")
    return load_fixture(FIXTURE, "contig_inputs_fixture")


@pytest.fixture(scope="module")
def found():
    return {(f.line, f.code) for f in lint(FIXTURE, config=False)}


def _transposed():
    torch.manual_seed(0)
    base = torch.randn(8, 4)
    return base.t()  # (4, 8), strides (1, 4): a view the caller made


def test_fixture_expectations(found, expected):
    want = {(line, code) for (_, line, code) in expected(FIXTURE)}
    assert want == {f for f in found if f[1] == "GS221"}


@pytest.mark.parametrize("name", ["RawInput", "RawThroughHelper"])
def test_dense_kernel_reads_a_transposed_input_wrong(mod, found, name):
    lines = FIXTURE.read_text().splitlines()
    start = lines.index(f"class {name}(_Double):")
    line = next(i for i, text in enumerate(lines[start:], start + 1) if "# GS221" in text)
    assert (line, "GS221") in found  # reported where forward hands the input over
    x = _transposed()
    fn = getattr(mod, name).apply
    assert not torch.allclose(fn(x), x * 2), "the dense kernel read the transposed input right"
    torch.testing.assert_close(fn(x.contiguous()), x * 2)  # right on a contiguous input


@pytest.mark.parametrize("name", ["ContiguousInput", "StridedInput", "FlatInput",
                                  "called_contiguous"])
def test_guarded_inputs_are_read_right_and_not_reported(mod, name):
    x = _transposed()
    fn = getattr(mod, name)
    torch.testing.assert_close(getattr(fn, "apply", fn)(x), x * 2)


def test_a_number_handed_to_the_kernel_is_not_an_input_it_indexes(mod, found):
    """`cols` fills the kernel's row length, not a pointer: not reported, and the output is
    right.
    (BlockInput, a block pointer given strides, is checked by the lint only: the pinned
    Triton's interpreter no longer runs block pointers.)"""
    x = _transposed()
    torch.testing.assert_close(mod.NumberInput.apply(x, x.shape[1]), x * 2)
    lines = FIXTURE.read_text().splitlines()
    for name in ("class NumberInput(_Double):", "class BlockInput(_Double):"):
        start = lines.index(name) + 1
        assert not {n for n, code in found if code == "GS221" and start <= n <= start + 10}
