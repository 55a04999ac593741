"""GS206 on a forward that returns its ``*inputs`` as they came (a DDP-style sink, issue 19,
lint corpus 8), fixtures/sink_inputs.py on CPU: an in-place change of any returned tensor
then raises, even of an input that needs no gradient; the cloning twin (torch's own DDP
sink) and a forward that rebinds ``inputs`` are silent and run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gradsmith.linter import lint

FIXTURE = Path(__file__).parent / "fixtures" / "sink_inputs.py"


@pytest.fixture(scope="module")
def mod(load_fixture):
    return load_fixture(FIXTURE, "sink_inputs_fixture")


def test_returned_varargs_are_gs206_and_an_inplace_change_raises(mod):
    lines = FIXTURE.read_text().splitlines()
    marked = [i for i, line in enumerate(lines, 1) if line.rstrip().endswith("# GS206")]
    assert [(f.line, f.severity) for f in lint(FIXTURE, config=False) if f.code == "GS206"] \
        == [(line, "info") for line in marked]  # only Sink
    torch.manual_seed(0)
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    image = torch.rand(3, dtype=torch.float64)  # a model input with no gradient
    out = mod.Sink.apply([], x, image)
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
        out[1].div_(255)  # `x /= 255` in the wrapped model
    for fn in (mod.SinkCloned, mod.SinkRebound):
        state = []
        y, img = fn.apply(state, x, image)
        img.div_(255)
        (y * img).sum().backward()
        torch.testing.assert_close(x.grad, image / 255)  # by hand: d/dx sum(x * image/255)
        x.grad = None
