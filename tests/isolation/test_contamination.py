"""A verdict must not depend on what ran before it: user code that patches torch, Python or
gradsmith state (while being checked, or when imported) cannot make a later Function fail."""

from __future__ import annotations

# Each forward vandalises process-wide state a later check relies on, then returns correctly.
VANDALS = """
import random, math

class _Broken(Exception):
    pass

def _explode(*args, **kwargs):
    raise _Broken("patched by a previous Function")

@gradsmith.example(_x)
class PatchesAutogradGrad(Function):
    @staticmethod
    def forward(ctx, x):
        torch.autograd.grad = _explode
        torch.autograd.backward = _explode
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class PatchesTensorMethods(Function):
    @staticmethod
    def forward(ctx, x):
        torch.Tensor.__mul__ = lambda a, b: torch.zeros(())
        torch.Tensor.sum = _explode
        torch.exp = lambda t: t
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class ChangesGlobalModes(Function):
    @staticmethod
    def forward(ctx, x):
        torch.set_default_dtype(torch.float16)
        torch.set_grad_enabled(False)
        torch.autograd.set_detect_anomaly(True)
        torch.use_deterministic_algorithms(True)
        torch.set_printoptions(precision=1)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class BreaksImportsAndGradsmith(Function):
    @staticmethod
    def forward(ctx, x):
        import gradsmith.checker.numerics as numerics
        import gradsmith.checker.report as report
        for name in dir(numerics):
            if callable(getattr(numerics, name)) and not name.startswith("__"):
                setattr(numerics, name, _explode)
        report.Report.passed = property(lambda self: False)
        sys.modules["math"] = None
        sys.path.insert(0, "/nonexistent")
        math.pi = 3
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad
"""

# Patching at import time, in another file: listed first, its import must not leak either.
IMPORT_TIME_VANDAL = """
torch.autograd.grad = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("patched at import"))
torch.Tensor.backward = lambda *a, **k: None
"""


def test_functions_that_patch_state_do_not_change_later_verdicts(runner, write, procs):
    # --jobs 1: every task goes through the same worker, in this order (files sorted, then
    # definition order), so each correct Function runs after every vandal.
    write("a_vandals.py", VANDALS, procs.good.replace("Square", "SquareAfterVandals")
          .replace("class Exp", "class ExpAfterVandals"))
    write("b_import_vandal.py", IMPORT_TIME_VANDAL)
    write("c_good.py", procs.good)
    code, doc, err = runner.check(".", "--jobs", "1", "--timeout", "60")
    rows = {r["name"]: r for r in doc["results"]}
    good = ["a_vandals.py::SquareAfterVandals", "a_vandals.py::ExpAfterVandals",
            "c_good.py::Square", "c_good.py::Exp"]
    assert all(name in rows for name in good), (sorted(rows), err)
    assert {name: rows[name]["verdict"] for name in good} == dict.fromkeys(good, "pass"), (
        {name: rows[name]["text"] for name in good})



# Removes the folder gradsmith keeps the task logs in (found from the files its keeper, the
# parent, holds open) and puts a file in its place, then returns correctly: the server could
# not create the next task's log and died with it.
REMOVES_THE_LOGS = """
import shutil

def _log_folder():
    folder = f"/proc/{os.getppid()}/fd"
    logs = [os.readlink(f"{folder}/{fd}") for fd in os.listdir(folder) if int(fd) > 2]
    (log,) = [target for target in logs if target.endswith(".log")]
    return os.path.dirname(log)

@gradsmith.example(_x)
class RemovesTheLogFolder(Function):
    done = False

    @staticmethod
    def forward(ctx, x):
        if not RemovesTheLogFolder.done:
            RemovesTheLogFolder.done = True
            folder = _log_folder()
            shutil.rmtree(folder)
            open(folder, "w").close()
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
"""


def test_a_function_that_spoils_the_worker_files_does_not_fail_the_next(runner, write, procs):
    write("a_spoils.py", REMOVES_THE_LOGS)
    write("b_good.py", procs.good)
    code, doc, err = runner.check(".", "--jobs", "1", "--no-compat")
    verdicts = {r["name"]: (r["verdict"], r["reason"]) for r in doc["results"]}
    assert {name: v for name, (v, _) in verdicts.items()} == {
        "a_spoils.py::RemovesTheLogFolder": "pass", "b_good.py::Square": "pass",
        "b_good.py::Exp": "pass"}, verdicts
    assert code == 0
