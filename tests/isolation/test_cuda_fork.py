"""The worker server forks every task, so it must never initialise CUDA: a CUDA context (or
the CUDA runtime's device query) in the server makes every fork fail with "Cannot re-initialize
CUDA in forked subprocess". Seen on an H200: every Function of two Triton libraries failed so."""

from __future__ import annotations

import torch

# The Function's forward records what the task process sees.
SEES = """
@gradsmith.example(_x)
class Sees(Function):
    @staticmethod
    def forward(ctx, x):
        with open(os.environ["GRADSMITH_TEST_PIDS"], "a") as handle:
            handle.write(f"{os.getpid()} nvml={os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK')}"
                         f" init={torch.cuda.is_initialized()}\\n")
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_tasks_see_an_nvml_device_query_and_no_cuda_context(runner, write):
    write("sees.py", SEES)
    code, doc, err = runner.check("sees.py", "--jobs", "1", "--timeout", "60")
    assert [r["verdict"] for r in doc["results"]] == ["pass"], err
    seen = set(runner.recorded().values())
    assert seen == {"nvml=1 init=False"}, seen


def test_warm_up_never_asks_for_a_gpu(monkeypatch):
    from gradsmith import checker
    from gradsmith.checkrun import task

    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU machine
    real = torch.cuda.is_available

    def spy(*args, **kwargs):
        asked.append(torch.cuda.is_available())  # what the autocast check would see
        raise RuntimeError("stop here")

    monkeypatch.setattr(checker, "check", spy)
    task._check_a_tiny_function(deploy=True)
    assert asked == [False]
    assert torch.cuda.is_available is real  # restored afterwards
