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
own module, then the project's tests (``tests/``, ``test/``, ``test_*.py``, ``*_test.py``) that
reach the Function: those naming it, a caller, or a caller of a caller, up to three calls away
(:mod:`~gradsmith.discovery.reach`), likeliest first (:mod:`~gradsmith.discovery.ranked_tests`):
test functions and methods of test classes, ``pytest.mark.parametrize``d ones with their first
parameter set, with simple fixtures built as pytest would (:mod:`~gradsmith.discovery.fixtures`);
a test needing pytest's own machinery (``monkeypatch``, ``capsys``) is not run. Each example has
two seconds and all of them eight, in an empty temporary folder (a file written by a relative
name is never one of the user's); torch's RNG is restored after each, and its default dtype,
grad mode, ``sys.path`` and the test modules loaded after all of them.
"""

from __future__ import annotations

import doctest
import inspect
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gradsmith.discovery.callers import callers_of
from gradsmith.discovery.layout_search import NoInputs, Synthesized
from gradsmith.discovery.mixed_dtypes import mixed_variants
from gradsmith.discovery.probe import backward_error, probe
from gradsmith.discovery.project_tests import (
    EXAMPLE_S,
    Thunk,
    TimedOut,
    deadline,
    in_scratch_folder,
    mentions,
)
from gradsmith.discovery.ranked_tests import Loader, ranked
from gradsmith.discovery.reach import reach
from gradsmith.discovery.recorded_sets import aliases_forwarded, fittest, unread_inputs
from gradsmith.discovery.through_callers import moved_state, record

#: Seconds for all examples together, reading the project's source included. A skip is what
#: the row gets otherwise; tests of a public API import the project and build its objects
#: (about a second each for a scientific package), and the likeliest tests run first, so a
#: handful at two seconds each is enough: eight seconds, run only for rows that would skip.
_BUDGET_S = 8.0
#: Once a test gave a set, up to this many sets from the next tests within this many more
#: seconds, to choose one the check can cover (:func:`~gradsmith.discovery.recorded_sets.fittest`).
_SETS, _MORE_S = 3, 2.0


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
    tried = consumed = 0
    hidden: set[str] = set()
    found: list[tuple[tuple, str]] = []
    until = start + _BUDGET_S
    with _restored(), _importable_as_the_project_does(fn, roots):
        for thunk, text in _examples(fn, names, roots, start):
            now = time.perf_counter()
            if now - start > _BUDGET_S or found and (len(found) == _SETS or now > until):
                break
            tried += 1
            args = _recorded(fn, thunk, roots[-1] if roots else None)
            if args is None or probe(fn.apply, list(args)) is not True:
                continue
            source = f"as {text} passes them"
            if backward_error(fn.apply, args) is not None:
                continue  # the project's own call raising in backward: the skip's reason stands
            if probe(fn.apply, list(args)) is not True:
                consumed += 1  # an object the first backward used up (a solver it frees):
                continue  # the set cannot be evaluated again, as checking does hundreds of times
            if unread := unread_inputs(fn, args):
                hidden.update(unread)  # their values travel inside another argument
                continue
            if not found:
                until = time.perf_counter() + _MORE_S
            found.append((args, source))
        if found:
            args, source = fittest(found)
            moved = _within_time(lambda: moved_state(fn, args, source, seed))
            mixed = _within_time(lambda: mixed_variants(fn, args, source, seed)) or []
            return Synthesized(args, source, (*([moved] if moved else []), *mixed), seed)
    if isinstance(skipped, NoInputs) and tried:
        spent = (f"; {consumed} gave inputs that one backward used up (an object passed to "
                 f"apply, such as a solver it frees, so forward cannot run on them again)"
                 if consumed else "")
        spent += (f"; forward never reads {', '.join(f'`{n}`' for n in sorted(hidden))} on the "
                  f"project's own calls: its values reach forward inside another argument, so "
                  f"finite differences cannot perturb them" if hidden else "")
        return NoInputs(f"{skipped.reason} (the project's examples and tests that reach it were "
                        f"run too: {tried} gave no inputs on which it runs{spent})")
    return skipped


def _within_time(make):
    """``make()``, or None past an example's time (a solver that stops converging on moved
    state iterates to its cap: that variant is not worth a row's time)."""
    with deadline(EXAMPLE_S):
        try:
            return make()
        except TimedOut:
            return None


def _recorded(fn: type, thunk: Thunk, root: Path | None) -> tuple | None:
    """What ``thunk`` passes to ``fn.apply`` first, within its time; torch's RNG as before."""
    import torch

    with torch.random.fork_rng(devices=[]), in_scratch_folder(), deadline(EXAMPLE_S), \
            aliases_forwarded(fn, root):
        try:
            return record(fn, thunk, ())
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - TimedOut, pytest.skip(), a test's sys.exit()
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


def _examples(fn: type, names: set[str], roots: list[Path],
              start: float) -> Iterator[tuple[Thunk, str]]:
    """The docstring examples, then the tests reaching the Function, likeliest first."""
    yield from _docstring_examples(fn, names)
    module_file = getattr(sys.modules.get(fn.__module__), "__file__", None) or ""
    if not roots or time.perf_counter() - start > _BUDGET_S or \
            _a_test_file(Path(module_file).resolve(), roots[-1]):
        return  # a Function a test module defines: the other tests test something else
    depth = reach(names, _source_root(roots))
    depth.update({n: min(depth.get(n, 1), 1) for n in names - {fn.__name__}})
    loader = Loader(frozenset(re.split(r"[^a-z0-9]+", fn.__module__.lower())) |
                    frozenset(re.split(r"[^a-z0-9]+", Path(module_file).stem.lower())))
    for candidate in ranked(roots, depth, names | {Path(module_file).stem}):
        if time.perf_counter() - start > _BUDGET_S:
            return
        thunk = loader.thunk(candidate)
        if thunk is not None:
            test = f"{candidate.owner}.{candidate.name}" if candidate.owner else candidate.name
            yield thunk, f"`{test}` in {candidate.path.relative_to(candidate.root)}"


def _a_test_file(path: Path, root: Path) -> bool:
    inside = path.parent.relative_to(root).parts if path.is_relative_to(root) else ()
    return path.name.startswith("test_") or path.stem.endswith("_test") or \
        path.name == "conftest.py" or bool({"tests", "test"} & set(inside))


def _source_root(roots: list[Path]) -> Path:
    """Where the project's source is read for the names reaching the Function: the root
    :func:`_project_roots` found by its marker, else the nearest with a test folder (never a
    parent of unrelated projects), else the Function's folder."""
    marked = [r for r in roots if any((r / m).exists() for m in _MARKERS)]
    tested = [r for r in roots if any((r / d).is_dir() for d in ("tests", "test"))]
    return (marked or tested or roots)[0]


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


_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


def _project_roots(fn: type) -> list[Path]:
    """The Function's folder and those above it, up to the project's root (the first with a
    ``.git``, ``pyproject.toml``, ``setup.py`` or ``setup.cfg``, at most eight up: a kernel
    deep in ``src/pkg/sub/linalg/``); where no folder has a marker, up to the first with a
    test folder, or the nearest four."""
    module = sys.modules.get(fn.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        return []
    roots = []
    for folder in list(Path(file).resolve().parents)[:8]:
        roots.append(folder)
        if any((folder / m).exists() for m in _MARKERS):
            return roots
    tested = [i for i, r in enumerate(roots) if any((r / d).is_dir() for d in ("tests", "test"))]
    return roots[:max(4, tested[0] + 1)] if tested else roots[:4]


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
