"""An object argument whose method forward calls by keyword only (``noiser._sample_noise(
epsilon=e, bounds=b, image=a)``) gets a plain function that returns the array passed, so the
Function is checked (issue 18, corpus 13c held-out: bandlimited-cnns' correct additive-noise
NoiseFunction was a skip, its invented method taking one positional argument). Reduced cases,
written here; the planted wrong backward FAILs."""

import numpy as np
import torch
from source_cases import check_rows, error_codes, load_source

SOURCE = '''
import numpy as np
import torch


class AddSampled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, image, sampler, level):
        N, C, H, W = image.shape
        noise = sampler.draw(scale=level, like=np.zeros((N, C, H, W)))
        return image + torch.from_numpy(noise).to(image.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        return {grad}, None, None
'''
RIGHT = {"grad": "grad_output.clone()"}
WRONG = {"grad": "2 * grad_output"}  # planted: the identity's gradient doubled


class _Gaussian:
    def draw(self, scale, like):
        return np.random.default_rng(0).normal(0.0, scale, like.shape)


def test_the_reduced_backward_is_autograd_of_the_same_forward(tmp_path):
    path = tmp_path / "keyword_case.py"
    path.write_text(SOURCE.format(**RIGHT))
    module = load_source(path, "keyword_case")
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(2, 3, 4, 4, dtype=torch.float64, generator=gen)
    (got,) = torch.autograd.grad(module.AddSampled.apply(x, _Gaussian(), 0.1), x, g)
    noise = torch.from_numpy(_Gaussian().draw(0.1, np.zeros((2, 3, 4, 4))))
    (want,) = torch.autograd.grad(x + noise, x, g)
    torch.testing.assert_close(got, want)


def test_a_keyword_called_method_is_given_and_the_planted_wrong_backward_fails(tmp_path):
    row = check_rows(tmp_path / "keyword_right.py", SOURCE.format(**RIGHT))["AddSampled"]
    assert row["verdict"] == "pass", (row["reason"], row["report"]["findings"])
    assert "sampler=namespace(draw=identity)" in row["inputs"], row["inputs"]
    row = check_rows(tmp_path / "keyword_wrong.py", SOURCE.format(**WRONG))["AddSampled"]
    assert row["verdict"] == "fail", row["reason"]
    # forward is an identity in image: a wrong backward is a mismatch, or the undeclared
    # modification of the gradient gradsmith calls it (both errors)
    assert error_codes(row) & {"gradient-mismatch", "undeclared-estimator"}, error_codes(row)
