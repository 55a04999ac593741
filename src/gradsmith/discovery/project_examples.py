"""Inputs for a Function as its project's own examples and tests pass them (private).

Run only where synthesis and the project's callers (:mod:`~gradsmith.discovery.through_callers`)
found nothing: the row would be a skip. A project often shows how its Function is called, with
real values: a docstring example (``>>> y = logsig(path, 3)``) or a test
(``def test_logsig(): path = make_path(); assert logsig(path, 3).shape == ...``). Each such
example that names the Function, or a function or class of its module that calls it, is run
with ``Fn.apply`` replaced by the recorder of ``through_callers``: the first call's arguments
are kept and the example stops there, so nothing after it runs (its assertions, a training
step). Those arguments are the Function's input set, said in the Inputs column (``as
test_logsig in tests/test_sig.py passes them``); the usual exercised / non-trivial rules apply.

What runs is what the project's authors wrote to be run: docstring examples of the Function's
own module; zero-argument test functions, test methods of ``unittest.TestCase`` classes and of
plain test classes, and ``pytest.mark.parametrize``d tests with their first parameter set, from
the project's test files (``tests/``, ``test/``, ``test_*.py``, ``*_test.py``) that name the
Function or a caller. Tests needing fixtures are not run. Each example has two seconds and all
of them five, in an empty temporary folder (a file written by a relative name is never one of
the user's); torch's RNG is restored after each, and its default dtype, grad mode, ``sys.path``
and the test modules loaded after all of them.
"""

from __future__ import annotations

import ast
import doctest
import importlib.util
import inspect
import os
import re
import signal
import sys
import tempfile
import threading
import time
import unittest
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gradsmith.discovery.callers import callers_of
from gradsmith.discovery.layout_search import NoInputs, Synthesized
from gradsmith.discovery.probe import backward_error, probe
from gradsmith.discovery.through_callers import _moved, record

_BUDGET_S = 5.0
_EXAMPLE_S = 2.0
_MAX_FILES = 4
_MAX_SCANNED = 300
_TEST_DIRS = ("tests", "test", "testing", "unittests")

Thunk = Callable[[], Any]


class _TimedOut(BaseException):
    """An example ran past its time: stops it (a BaseException, like the recorder's)."""


def through_examples(fn: type, seed: int,
                     skipped: NoInputs | Synthesized) -> NoInputs | Synthesized:
    """Inputs for ``fn`` recorded from its project's examples and tests, or ``skipped``."""
    names = _names(fn)
    start = time.perf_counter()
    tried = 0
    with _restored(), _importable_as_the_project_does(fn):
        for thunk, text in _examples(fn, names):
            if time.perf_counter() - start > _BUDGET_S:
                break
            tried += 1
            args = _recorded(fn, thunk)
            if args is None or probe(fn.apply, list(args)) is not True:
                continue
            source = f"as {text} passes them"
            if backward_error(fn.apply, args) is not None:
                continue  # the project's own call raising in backward: the skip's reason stands
            moved = _moved(fn, args, source, seed)
            return Synthesized(args, source, (moved,) if moved else (), seed)
    if isinstance(skipped, NoInputs) and tried:
        return NoInputs(f"{skipped.reason} (the project's examples and tests that name it were "
                        f"run too: {tried} gave no inputs on which it runs)")
    return skipped


def _recorded(fn: type, thunk: Thunk) -> tuple | None:
    """What ``thunk`` passes to ``fn.apply`` first, within its time; torch's RNG as before."""
    import torch

    with torch.random.fork_rng(devices=[]), _in_scratch_folder(), _deadline(_EXAMPLE_S):
        try:
            return record(fn, thunk, ())
        except _TimedOut:
            return None


@contextmanager
def _in_scratch_folder() -> Iterator[None]:
    """The example runs in an empty temporary folder, removed after: a file it writes by a
    relative name (``torch.save(x, "out.pt")``) never replaces one of the user's."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="gradsmith-example-") as scratch:
        os.chdir(scratch)
        try:
            yield
        finally:
            os.chdir(here)


@contextmanager
def _importable_as_the_project_does(fn: type) -> Iterator[None]:
    """The Function's module also under the dotted names the project's tests import it by
    (``models.layers`` for gradsmith's import of ``models/layers.py``), while they run: else a
    test imports a second copy of the file, whose registries and caches are not the ones the
    Function under check reads (the recorded key would be missing from its registry)."""
    module = sys.modules.get(fn.__module__)
    file = getattr(module, "__file__", None)
    added = []
    if file:
        path = Path(file).resolve().with_suffix("")
        for root in _project_roots(fn):
            parts = path.relative_to(root).parts
            name = ".".join(parts)
            if all(p.isidentifier() for p in parts) and name not in sys.modules:
                sys.modules[name] = module
                added.append(name)
    try:
        yield
    finally:
        for name in added:
            if sys.modules.get(name) is module:
                del sys.modules[name]


def _names(fn: type) -> set[str]:
    """The Function's name and its module-level callers' (a test calls the wrapper)."""
    return {fn.__name__} | {c.name.split(".")[-1] for c in callers_of(fn)}


def _examples(fn: type, names: set[str]) -> Iterator[tuple[Thunk, str]]:
    yield from _docstring_examples(fn, names)
    roots = _project_roots(fn)
    for path in _test_files(roots, names):
        yield from _tests_in(path, names, next(r for r in roots if path.is_relative_to(r)))


def _mentions(text: str, names: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b", text) for n in names)


def _docstring_examples(fn: type, names: set[str]) -> Iterator[tuple[Thunk, str]]:
    """Each docstring of the Function's module (module, its classes and functions) whose
    examples name the Function or a caller: the examples run in order in a copy of the
    module's namespace."""
    module = sys.modules.get(fn.__module__)
    if module is None:
        return
    parser = doctest.DocTestParser()
    owners = [("the module docstring", module)] + [
        (f"the docstring example of `{name}`", obj) for name, obj in vars(module).items()
        if (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == module.__name__]
    for label, obj in owners:
        doc = inspect.getdoc(obj) or ""
        if ">>>" not in doc:
            continue
        try:
            code = "\n".join(e.source for e in parser.get_examples(doc))
        except ValueError:
            continue
        if code and _mentions(code, names):
            yield _exec_thunk(code, dict(vars(module)), label), label


def _exec_thunk(code: str, namespace: dict, label: str) -> Thunk:
    def run() -> None:
        exec(compile(code, f"<{label}>", "exec"), namespace)  # noqa: S102 - the project's own
    return run


def _project_roots(fn: type) -> list[Path]:
    """The Function's folder and those above it, up to the project's root (the first with a
    ``.git``, ``pyproject.toml``, ``setup.py`` or ``setup.cfg``), at most four."""
    module = sys.modules.get(fn.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        return []
    roots = []
    for folder in list(Path(file).resolve().parents)[:4]:
        roots.append(folder)
        if any((folder / m).exists() for m in (".git", "pyproject.toml", "setup.py", "setup.cfg")):
            break
    return roots


def _test_files(roots: list[Path], names: set[str]) -> list[Path]:
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
        if "def test" in text and _mentions(text, names) and _a_test_module(text):
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
            func = stmt.value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in _SETUP_CALLS:
                return False
    return True


def _tests_in(path: Path, names: set[str], root: Path) -> Iterator[tuple[Thunk, str]]:
    """The runnable tests of ``path`` that name the Function or a caller."""
    module = _load(path, root)
    if module is None:
        return
    where = path.relative_to(root)
    for name, obj in list(vars(module).items()):
        if inspect.isfunction(obj) and name.startswith("test") \
                and obj.__module__ == module.__name__ and _mentions(_source(obj), names):
            thunk = _function_thunk(obj)
            if thunk is not None:
                yield thunk, f"`{name}` in {where}"
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for method_name, method in vars(obj).items():
                if method_name.startswith("test") and inspect.isfunction(method) \
                        and _mentions(_source(method), names):
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
        with _in_scratch_folder(), _deadline(_EXAMPLE_S):
            spec.loader.exec_module(module)
    except (Exception, _TimedOut):  # noqa: BLE001 - a test file that cannot import: no example
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
def _restored() -> Iterator[None]:
    """torch's global state, ``sys.path`` and ``sys.modules`` as they were, after the project's
    code ran (a test may seed the RNG, set a default dtype or insert paths)."""
    import torch

    path, modules = list(sys.path), set(sys.modules)
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        torch.use_deterministic_algorithms(deterministic)
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            if name.startswith("_gradsmith_example_"):
                del sys.modules[name]


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Stop the running example after ``seconds`` (main thread only: SIGALRM)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(*_: Any) -> None:
        raise _TimedOut

    old = signal.signal(signal.SIGALRM, stop)
    # raised again every 0.1 s: a bare ``except:`` in the project's code catches one
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
