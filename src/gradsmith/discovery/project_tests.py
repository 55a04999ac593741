"""The project's tests as examples of a Function's call (private; see ``project_examples``).

Which files may hold tests (in ``tests/``-like folders or named ``test_*.py``/``*_test.py``,
shaped like test modules, not scripts), how to load one (under a private name, in a scratch
folder, within a deadline) and how to stop one that runs too long. Which tests to run is
:mod:`~gradsmith.discovery.ranked_tests`'s; nothing here records ``apply``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gradsmith.discovery.source import call_name

#: Seconds an example (or a test file's import) may run.
EXAMPLE_S = 2.0
_MAX_FILES = 4
_MAX_SCANNED = 300
_TEST_DIRS = ("tests", "test", "testing", "unittests")

Thunk = Callable[[], Any]


class TimedOut(BaseException):
    """An example ran past its time: stops it (a BaseException, like the recorder's)."""


@contextmanager
def in_scratch_folder() -> Iterator[None]:
    """The example runs in an empty temporary folder, removed after: a file it writes by a
    relative name (``torch.save(x, "out.pt")``) never replaces one of the user's."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="gradsmith-example-") as scratch:
        os.chdir(scratch)
        try:
            yield
        finally:
            os.chdir(here)


def mentions(text: str, names: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b", text) for n in names)


def test_candidates(roots: list[Path]) -> list[tuple[Path, Path]]:
    """Python files in the test folders of ``roots`` and test-named files beside them, each
    with the nearest root it lies under, nearest root first (conftests aside)."""
    candidates: list[tuple[Path, Path]] = []
    for root in roots:
        for sub in _TEST_DIRS:
            if (root / sub).is_dir():
                candidates += [(p, root) for p in sorted((root / sub).rglob("*.py"))
                               [:_MAX_SCANNED]]
        candidates += [(p, root) for p in sorted(root.glob("*.py"))
                       if p.name.startswith("test_") or p.stem.endswith("_test")]
    kept = dict.fromkeys(p for p, _ in candidates[:_MAX_SCANNED] if p.name != "conftest.py")
    first = {}
    for path, root in candidates:
        first.setdefault(path, root)
    return [(p, first[p]) for p in kept]


#: Calls a test module makes at import (set-up, not work).
_SETUP_CALLS = {"manual_seed", "seed", "set_default_dtype", "filterwarnings", "importorskip",
                "insert", "append", "use_deterministic_algorithms", "set_printoptions",
                "simplefilter"}


def _a_test_module(text: str) -> bool:
    """A module of tests, not a script named like one (``runtime_test.py`` timing loops at
    import): at top level only imports, definitions, assignments, ``if``/``try`` blocks and
    set-up calls (``torch.manual_seed(0)``); no loop, ``with`` or other call."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for stmt in tree.body:
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            return False
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            name = call_name(stmt.value)
            if name not in _SETUP_CALLS:
                return False
    return True


def _load(path: Path, root: Path) -> Any:
    """``path`` imported under a private name, with its folder and the root importable."""
    name = f"_gradsmith_example_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: dataclasses and pickling look it up
    for folder in (str(root), str(path.parent)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        with in_scratch_folder(), deadline(EXAMPLE_S):
            spec.loader.exec_module(module)
    except (Exception, TimedOut):  # noqa: BLE001 - a test file that cannot import: no example
        return None
    return module


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Stop the running example after ``seconds`` (main thread only: SIGALRM)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signum: int, frame: Any) -> None:
        if _importing(frame):
            return  # the timer fires again in 0.1 s: an import cut short leaves a broken module
        raise TimedOut

    old = signal.signal(signal.SIGALRM, stop)
    # raised again every 0.1 s: a bare ``except:`` in the project's code catches one
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _importing(frame: Any) -> bool:
    """Whether ``frame`` runs inside an import (importlib's bootstrap is on the stack): a
    TimedOut raised there can leave a half-initialised module in ``sys.modules`` (a package
    without its submodule attribute), which breaks every later import in the process."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False
