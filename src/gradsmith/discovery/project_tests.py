"""The project's tests as examples of a Function's call (private; see ``project_examples``).

Which test files to read (those that name the Function or a caller, in ``tests/``-like
folders or named ``test_*.py``/``*_test.py``, shaped like test modules, not scripts), how to
load one (under a private name, in a scratch folder, within a deadline) and which of its tests
run without pytest: zero-argument ones, the first ``pytest.mark.parametrize`` set, the test
methods of ``unittest.TestCase`` and plain test classes. Nothing here records ``apply``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import signal
import sys
import tempfile
import threading
import unittest
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


def test_files(roots: list[Path], names: set[str]) -> list[Path]:
    """Test files in or under ``roots`` that name the Function or a caller, nearest first."""
    candidates: list[Path] = []
    for root in roots:
        for sub in _TEST_DIRS:
            if (root / sub).is_dir():
                candidates += sorted((root / sub).rglob("*.py"))[:_MAX_SCANNED]
        candidates += sorted(p for p in root.glob("*.py")
                             if p.name.startswith("test_") or p.stem.endswith("_test"))
    found: list[Path] = []
    for path in dict.fromkeys(candidates[:_MAX_SCANNED]):
        if path.name == "conftest.py":
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "def test" in text and mentions(text, names) and _a_test_module(text):
            found.append(path)
        if len(found) == _MAX_FILES:
            break
    return found


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


def tests_in(path: Path, names: set[str], root: Path) -> Iterator[tuple[Thunk, str]]:
    """The runnable tests of ``path`` that name the Function or a caller."""
    module = _load(path, root)
    if module is None:
        return
    where = path.relative_to(root)
    for name, obj in list(vars(module).items()):
        if inspect.isfunction(obj) and name.startswith("test") \
                and obj.__module__ == module.__name__ and mentions(_source(obj), names):
            thunk = _function_thunk(obj)
            if thunk is not None:
                yield thunk, f"`{name}` in {where}"
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for method_name, method in vars(obj).items():
                if method_name.startswith("test") and inspect.isfunction(method) \
                        and mentions(_source(method), names):
                    thunk = _method_thunk(obj, method_name, method)
                    if thunk is not None:
                        yield thunk, f"`{obj.__name__}.{method_name}` in {where}"


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


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _first_parameters(func: Any) -> dict[str, Any] | None:
    """Keyword arguments for every parameter of ``func`` without a default: its
    ``pytest.mark.parametrize`` marks' first value sets; None when some have no value."""
    needed = [p.name for p in inspect.signature(func).parameters.values()
              if p.default is inspect.Parameter.empty and p.name != "self"
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    given: dict[str, Any] = {}
    for mark in getattr(func, "pytestmark", []):
        if getattr(mark, "name", "") != "parametrize" or len(mark.args) < 2:
            continue
        keys, values = mark.args[0], list(mark.args[1])
        keys = [k.strip() for k in keys.split(",")] if isinstance(keys, str) else list(keys)
        if not values:
            return None
        first = getattr(values[0], "values", values[0])  # pytest.param(...) keeps .values
        first = first if len(keys) > 1 else (first,)
        if len(first) != len(keys):
            return None
        given.update(zip(keys, first))
    return given if all(n in given for n in needed) else None


def _function_thunk(func: Any) -> Thunk | None:
    kwargs = _first_parameters(func)
    return None if kwargs is None else (lambda: func(**kwargs))


def _method_thunk(cls: type, name: str, method: Any) -> Thunk | None:
    kwargs = _first_parameters(method)
    if kwargs is None:
        return None
    if issubclass(cls, unittest.TestCase):
        def run_case() -> None:
            case = cls(name)
            case.setUp()
            try:
                getattr(case, name)(**kwargs)
            finally:
                case.tearDown()
        return run_case
    try:
        inspect.signature(cls).bind()
    except (TypeError, ValueError):
        return None  # a test class that needs arguments is not pytest's

    def run_plain() -> None:
        instance = cls()
        if hasattr(instance, "setup_method"):
            instance.setup_method(method)
        getattr(instance, name)(**kwargs)
    return run_plain


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
