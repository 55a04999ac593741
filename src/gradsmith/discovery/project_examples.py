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

import doctest
import inspect
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gradsmith.discovery.callers import callers_of
from gradsmith.discovery.layout_search import NoInputs, Synthesized
from gradsmith.discovery.probe import backward_error, probe
from gradsmith.discovery.project_tests import (
    EXAMPLE_S,
    Thunk,
    TimedOut,
    deadline,
    in_scratch_folder,
    mentions,
    test_files,
    tests_in,
)
from gradsmith.discovery.through_callers import moved_state, record

_BUDGET_S = 5.0


def through_examples(fn: type, seed: int,
                     skipped: NoInputs | Synthesized) -> NoInputs | Synthesized:
    """Inputs for ``fn`` recorded from its project's examples and tests, or ``skipped``. Not
    while another Function's examples run: a test that itself synthesises inputs (a checker's
    own test suite) would recurse, each level under a deadline of its own."""
    global _running
    if _running:
        return skipped
    _running = True
    try:
        return _through_examples(fn, seed, skipped)
    finally:
        _running = False


_running = False


def _through_examples(fn: type, seed: int,
                      skipped: NoInputs | Synthesized) -> NoInputs | Synthesized:
    names, roots = _names(fn), _project_roots(fn)
    start = time.perf_counter()
    tried = 0
    with _restored(), _importable_as_the_project_does(fn, roots):
        for thunk, text in _examples(fn, names, roots):
            if time.perf_counter() - start > _BUDGET_S:
                break
            tried += 1
            args = _recorded(fn, thunk)
            if args is None or probe(fn.apply, list(args)) is not True:
                continue
            source = f"as {text} passes them"
            if backward_error(fn.apply, args) is not None:
                continue  # the project's own call raising in backward: the skip's reason stands
            moved = moved_state(fn, args, source, seed)
            return Synthesized(args, source, (moved,) if moved else (), seed)
    if isinstance(skipped, NoInputs) and tried:
        return NoInputs(f"{skipped.reason} (the project's examples and tests that name it were "
                        f"run too: {tried} gave no inputs on which it runs)")
    return skipped


def _recorded(fn: type, thunk: Thunk) -> tuple | None:
    """What ``thunk`` passes to ``fn.apply`` first, within its time; torch's RNG as before."""
    import torch

    with torch.random.fork_rng(devices=[]), in_scratch_folder(), deadline(EXAMPLE_S):
        try:
            return record(fn, thunk, ())
        except TimedOut:
            return None


@contextmanager
def _importable_as_the_project_does(fn: type, roots: list[Path]) -> Iterator[None]:
    """The Function's module also under the dotted names the project's tests import it by
    (``models.layers`` for gradsmith's import of ``models/layers.py``), while they run: else a
    test imports a second copy of the file, whose registries and caches are not the ones the
    Function under check reads (the recorded key would be missing from its registry)."""
    module = sys.modules.get(fn.__module__)
    file = getattr(module, "__file__", None)
    added = []
    if file:
        path = Path(file).resolve().with_suffix("")
        for root in roots:
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


def _examples(fn: type, names: set[str], roots: list[Path]) -> Iterator[tuple[Thunk, str]]:
    yield from _docstring_examples(fn, names)
    for path in test_files(roots, names):
        yield from tests_in(path, names, next(r for r in roots if path.is_relative_to(r)))


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
        if code and mentions(code, names):
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
