"""Layout (issue 12): the code that runs user code has one home, ``gradsmith.isolation``, the
command line one package, ``gradsmith.cli``, and the layering reads from the folder names: data
flows from the command line to the library, never back. Read from the source with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

import gradsmith

ROOT = Path(gradsmith.__file__).parent
# Start processes, but never run user code: they compile the native kernels of two ops.
NATIVE_BUILDERS = {"ops._native_build", "ops._pav_native"}
PROCESS_MODULES = {"subprocess", "multiprocessing", "pty",
                   "concurrent.futures.ProcessPoolExecutor"}
PROCESS_CALLS = {"fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "popen", "execv",
                 "execve", "execvp", "spawnv"}


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
