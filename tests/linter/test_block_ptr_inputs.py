"""GS221 through a block pointer with computed strides (fixtures/block_ptr_inputs.py).

The pinned Triton interpreter no longer runs block pointers, so the harm is shown by hand:
what `tl.make_block_ptr(v + i_h * V, (T, V), (H * V, 1), ...)` addresses (element
``i_h * V + t * H * V + j`` of v's storage, from v's data pointer) is compared with the
head ``v[:, i_h]`` a caller means when v is a last-dim split of a projection, as
``torch.split(kv, [K, V], dim=-1)`` gives."""

from __future__ import annotations

from pathlib import Path

import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "block_ptr_inputs.py"


def _block_read(v: torch.Tensor, i_h: int) -> torch.Tensor:
    """The [T, V] block the kernel loads for head ``i_h``: offsets from v's first element
    with strides (H * V, 1), whatever v's real strides are."""
    T, H, V = v.shape
    return v.as_strided((T, V), (H * V, 1), v.storage_offset() + i_h * V)


def test_computed_block_strides_read_a_split_input_wrong_and_are_reported():
    torch.manual_seed(0)
    T, H, K, V = 6, 3, 2, 4
    kv = torch.randn(T, H, K + V)
    _, v = torch.split(kv, [K, V], dim=-1)  # strides (H*(K+V), K+V, 1), offset K
    assert not v.is_contiguous()
    assert not torch.equal(_block_read(v, 1), v[:, 1])  # the kernel reads other elements
    dense = v.contiguous()
    for i_h in range(H):  # on a dense input the same addresses are the head itself
        torch.testing.assert_close(_block_read(dense, i_h), dense[:, i_h])
    found = [(f.line, f.code, f.severity) for f in lint(FIXTURE, config=False)]
    lines = FIXTURE.read_text().splitlines()
    line = next(n for n, t in enumerate(lines, 1) if t.endswith("# GS221"))
    assert found == [(line, "GS221", "warning")]  # strides passed, or contiguous: silent
