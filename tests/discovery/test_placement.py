"""Where synthesised inputs are placed: GRADSMITH_DEVICE / ``check --device``."""

import pytest
import torch

from gradsmith._errors import GradsmithError
from gradsmith.discovery import placement


@pytest.mark.parametrize("text", ["auto", "cpu", "cuda", "cuda:1", " CUDA "])
def test_parse_accepts_devices(text):
    assert placement.parse(text) == text.strip().lower()


@pytest.mark.parametrize("text", ["gpu", "cuda:x", "mps", ""])
def test_parse_names_argument_value_and_fix(text):
    with pytest.raises(GradsmithError) as info:
        placement.parse(text, "--device")
    assert "--device" in str(info.value) and repr(text) in str(info.value)
    assert "--device cuda" in str(info.value)


def test_auto_is_cpu_without_native_kernels(monkeypatch):
    monkeypatch.delenv(placement.ENV, raising=False)
    monkeypatch.setattr(placement, "_user_kernels", lambda: False)  # whatever else is loaded
    x = torch.randn(3, requires_grad=True)
    args, parts = placement.place([x, 2.0], ["x: float64 (3,)"])
    assert args[0] is x and parts == ["x: float64 (3,)"]  # untouched on the CPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(placement.ENV, "cuda")
    with pytest.raises(GradsmithError, match="no CUDA GPU is visible.*--device cpu"):
        placement.place([torch.ones(2)], [])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_moves_tensors_and_keeps_requires_grad(monkeypatch):
    monkeypatch.setenv(placement.ENV, "cuda")
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    i = torch.arange(3)
    args, parts = placement.place([x, i, 0.5], [])
    assert args[0].is_cuda and args[0].is_leaf and args[0].requires_grad
    assert args[1].is_cuda and not args[1].requires_grad and args[2] == 0.5
    assert torch.equal(args[0].cpu(), x.detach()) and parts[-1].startswith("on cuda")


def test_check_device_option_rejects_a_bad_value(capsys):
    from gradsmith.cli import main

    assert main(["check", "--device", "gpu", "x.py"]) == 2
    err = capsys.readouterr().err
    assert "--device must be auto, cpu, cuda or cuda:N, got 'gpu'" in err
