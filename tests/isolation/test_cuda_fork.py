"""The worker server forks every task, so it must never initialise CUDA: a CUDA context (or
the CUDA runtime's device query) in the server makes every fork fail with "Cannot re-initialize
CUDA in forked subprocess". Seen on an H200: every Function of two Triton libraries failed so."""

from __future__ import annotations

import torch

# The Function's forward records what the task process sees.
SEES = """
cuda = torch.cuda.is_available()

@gradsmith.example(_x)
class Sees(Function):
    @staticmethod
    def forward(ctx, x):
        with open(os.environ["GRADSMITH_TEST_PIDS"], "a") as handle:
            handle.write(f"{os.getpid()} nvml={os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK')}"
                         f" cuda={torch.zeros(1, device='cuda').device.type if cuda else '-'}\\n")
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_tasks_see_an_nvml_device_query_and_can_use_the_gpu(runner, write):
    write("sees.py", SEES)
    code, doc, err = runner.check("sees.py", "--jobs", "1", "--timeout", "60")
    assert [r["verdict"] for r in doc["results"]] == ["pass"], err
    seen = set(runner.recorded().values())
    # on a GPU machine the task allocated on the GPU (a poisoned fork raises instead)
    assert seen == {f"nvml=1 cuda={'cuda' if torch.cuda.is_available() else '-'}"}, seen


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


def test_warm_up_is_skipped_where_a_gpu_is_visible(monkeypatch):
    from gradsmith.checkrun import task

    ran = []
    monkeypatch.setattr(task, "_check_a_tiny_function", lambda **kw: ran.append(kw))
    monkeypatch.setattr(task, "_WARMED", set())
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    task.warm_up([(None, None, {"compat": True})])
    assert ran == []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    task.warm_up([(None, None, {"compat": True})])
    assert ran == [{"deploy": True, "onnx": False}]
