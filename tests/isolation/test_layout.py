"""Layout (issue 12): the code that runs user code has one home, ``gradsmith.isolation``, the
command line one package, ``gradsmith.cli``, and the layering reads from the folder names: data
flows from the command line to the library, never back. Read from the source with ``ast``."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import gradsmith

ROOT = Path(gradsmith.__file__).parent
# Start processes, but never run user code: they compile the native kernels of two ops.
NATIVE_BUILDERS = {"ops._native_build", "ops._pav_native"}
PROCESS_MODULES = {"subprocess", "multiprocessing", "pty",
                   "concurrent.futures.ProcessPoolExecutor"}
PROCESS_CALLS = {"fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "popen", "execv",
                 "execve", "execvp", "spawnv"}


@functools.cache  # parsed once for the three tests that read it (1.5 CPU-s each); only read
def _modules() -> dict[str, ast.Module]:
    """Every module of the package, by dotted name relative to ``gradsmith``."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = ast.parse(path.read_text(), str(path))
    return found


def _imported(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _starts_processes(tree: ast.Module) -> bool:
    if any(n.split(".")[0] in PROCESS_MODULES or n in PROCESS_MODULES
           for n in _imported(tree)):
        return True
    return any(isinstance(node, ast.Attribute) and node.attr in PROCESS_CALLS
               and isinstance(node.value, ast.Name) and node.value.id == "os"
               for node in ast.walk(tree))


def test_only_the_isolation_package_starts_processes():
    modules = _modules()
    starters = {name for name, tree in modules.items() if _starts_processes(tree)}
    assert {"isolation.pool", "isolation.sandbox"} <= starters  # the probe itself works
    outside = {n for n in starters - NATIVE_BUILDERS if not n.startswith("isolation")}
    assert not outside, f"modules outside gradsmith.isolation start processes: {outside}"


def test_the_old_loose_modules_are_gone():
    loose = {p.name for p in ROOT.iterdir()}
    assert not loose & {"_checkrun.py", "_isolate.py", "_worker.py", "_runner.py", "cli.py",
                        "_cli"}
    assert (ROOT / "isolation" / "__init__.py").is_file()
    assert (ROOT / "cli" / "__init__.py").is_file()


def test_data_flows_from_the_command_line_to_the_library():
    modules = _modules()
    for name, tree in modules.items():
        imported = _imported(tree)
        if not name.startswith("cli") and name != "__main__":
            assert not {i for i in imported if i.startswith("gradsmith.cli")}, (
                f"gradsmith.{name} imports the command line")
        if name.split(".")[0] in ("checker", "discovery", "linter", "ops", "repro"):
            assert not {i for i in imported if i.startswith("gradsmith.isolation")}, (
                f"gradsmith.{name} imports gradsmith.isolation: the library below it must not")


# The runner of user code knows nothing of its users (issue 20): they hand it tasks by the
# dotted name of the module doing the work (gradsmith.discovery.task, gradsmith.checkrun.task,
# gradsmith.bench.task). Nothing under isolation/ imports any other part of gradsmith than
# these and the standard-library-only leaves: the verifier, discovery and the repro capture
# are the users' business. (``_requires`` locates optional packages such as NumPy for
# ``_triton`` without importing them; it imports nothing of gradsmith.)
ALLOWED = ("gradsmith.isolation", "gradsmith._errors", "gradsmith._triton", "gradsmith._requires")
USERS = ("gradsmith.bench", "gradsmith.cli", "gradsmith.pytest_plugin", "gradsmith.checkrun",
         "gradsmith.checker", "gradsmith.discovery", "gradsmith.repro")


def _foreign(names) -> set[str]:
    return {n for n in names
            if (n == "gradsmith" or n.startswith("gradsmith.")) and not n.startswith(ALLOWED)}


def test_the_isolation_package_imports_none_of_its_users():
    modules = {n: t for n, t in _modules().items() if n.startswith("isolation")}
    assert {"isolation.pool", "isolation.sandbox", "isolation.worker", "isolation.task",
            "isolation.processes", "isolation.protocol", "isolation.tasklog"} <= set(modules)
    assert _foreign({"gradsmith.checker.deploy", "gradsmith._triton", "gradsmith"}) == {
        "gradsmith.checker.deploy", "gradsmith"}  # the probe itself works
    for name, tree in modules.items():  # lazy imports inside functions included
        foreign = _foreign(_imported(tree))
        assert not foreign, f"gradsmith.{name} imports {sorted(foreign)}"


def test_the_leaves_isolation_may_import_import_nothing_else_of_gradsmith():
    modules = _modules()
    for leaf in ("_errors", "_requires"):
        assert not _foreign(_imported(modules[leaf])), leaf


def test_importing_the_isolation_package_imports_no_user_of_it():
    code = ("import pkgutil, importlib, sys, gradsmith.isolation as iso\n"
            "for m in pkgutil.iter_modules(iso.__path__):\n"
            "    importlib.import_module('gradsmith.isolation.' + m.name)\n"
            "print('\\n'.join(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert "gradsmith.isolation.worker" in loaded and "gradsmith.isolation.task" in loaded
    users = [m for m in loaded if m.startswith(USERS)]
    assert not users, f"importing gradsmith.isolation imported {users}"
    assert not _foreign(loaded) - {"gradsmith"}, _foreign(loaded)


def test_the_worker_server_imports_the_task_modules_it_is_told_of(tmp_path, monkeypatch):
    # The runner is told the modules its tasks use (the check session's: the verifier and its
    # tasks' kinds) and imports them once, before its first task, so every fork inherits them:
    # a user file that says, while it is imported, whether the verifier was there.
    from gradsmith.checkrun.session import WORKER_MODULES
    from gradsmith.discovery import resolve_targets
    from gradsmith.discovery import task as list_task
    from gradsmith.isolation.pool import WorkerPool

    (tmp_path / "probe.py").write_text(
        "import sys\nfrom torch.autograd import Function\n"
        "raise ImportError(f\"verifier there: {'gradsmith.checker' in sys.modules}\")\n")
    monkeypatch.chdir(tmp_path)
    (source,) = resolve_targets(["probe.py"])
    with WorkerPool(jobs=1, timeout=120, modules=WORKER_MODULES) as pool:
        (outcome,) = pool.run([(list_task.KIND, source)])
    assert outcome.kind == "ok", outcome
    assert "verifier there: True" in outcome.value["import"], outcome.value


def test_a_bench_task_is_handed_to_the_worker_by_its_module(tmp_path):
    # gradsmith bench on a Function raising KeyboardInterrupt: the worker imports the task's
    # module (gradsmith.bench.task) and asks it for the result of that ending.
    from gradsmith.bench import task as bench_task
    from gradsmith.discovery import list_candidates, resolve_targets
    from gradsmith.isolation.pool import WorkerPool

    assert bench_task.KIND == "gradsmith.bench.task"
    (tmp_path / "ki.py").write_text(
        "import torch\nfrom torch.autograd import Function\nimport gradsmith\n\n"
        "@gradsmith.example(lambda: (torch.ones(3, requires_grad=True),))\n"
        "class Interrupts(Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n"
        "        raise KeyboardInterrupt('stop')\n\n"
        "    @staticmethod\n    def backward(ctx, grad):\n        return grad\n")
    (source,) = resolve_targets([str(tmp_path / "ki.py")], cwd=tmp_path)
    (candidate,) = list_candidates(source).candidates
    options = {"repeat": 1, "warmup": 0, "modes": ["eager"]}
    with WorkerPool(jobs=1, timeout=120) as pool:
        (outcome,) = pool.run([(bench_task.KIND, candidate, 0, options)])
    assert outcome.kind == "ok", outcome.value
    (row,) = outcome.value
    assert row["op"] == candidate.ref.label
    assert "the Function raised KeyboardInterrupt: stop at " in row["error"]
