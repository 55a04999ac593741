"""A skip's reason comes from the plan built from what the code states, not from the last
fallback (issue 18, corpus 8a: physicsnemo's ``_SobolevDisplacement`` printed a decorator with
random tensors for ``length_scale: float`` and ``max_iterations: int``; DifferentiableSVD's
``Power`` showed a fallback's ``'float' object has no attribute 'data'`` instead of forward's
shape error). Reduced case written here.
"""

from __future__ import annotations

import torch
from torch.autograd import Function

from gradsmith.discovery import NoInputs, synthesize


class Smooth(Function):
    @staticmethod
    def forward(ctx, volume: torch.Tensor, length_scale: float, max_iterations: int):
        if volume.dim() != 5:
            raise ValueError("volume must be (batch, channel, depth, height, width)")
        return volume * length_scale

    @staticmethod
    def backward(ctx, g):
        return g, None, None


def test_the_skip_decorator_gives_annotated_numbers_as_numbers_and_the_first_plans_error():
    found = synthesize(Smooth)
    assert isinstance(found, NoInputs)
    assert "(first: ValueError: volume must be (batch, channel" in found.reason
    line = found.reason.split("`")[1]
    body = line[len("@gradsmith.example("):line.index("))  #") + 1]
    made = eval(body, {"torch": torch})()  # noqa: S307 - our own text
    assert isinstance(made[0], torch.Tensor)
    assert type(made[1]) is float and type(made[2]) is int  # as the annotations say
