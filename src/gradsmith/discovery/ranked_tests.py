"""The project's tests that may reach a Function, likeliest first, ready to run (private).

:mod:`~gradsmith.discovery.project_examples` runs a project's tests with ``apply`` recorded; a
test of the public API reaches an internal kernel several calls down, so which tests to run is
read from source first (nothing is imported for it): every test function or test method of the
project's test files that refers to a name leading to the Function (its depth from
:func:`~gradsmith.discovery.reach.reach`, or from a helper or fixture of the test's own module
or ``conftest.py`` that refers to one). Tests are ranked by that depth (the Function named
directly first), then by how many fixtures they need (fewer is likelier to build), then by file
and line. Only then are the files of the chosen tests imported, each once, and each test made
a thunk with its parametrize values and its fixtures (:mod:`~gradsmith.discovery.fixtures`).
"""

from __future__ import annotations

import ast
import inspect
import re
import unittest
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradsmith.discovery.fixtures import Resolver, definitions, needed, options
from gradsmith.discovery.project_tests import Thunk, _a_test_module, _load, test_candidates
from gradsmith.discovery.reach import pattern_of

#: Tests kept after ranking: enough for the likely ones, few enough to read quickly.
MAX_TESTS = 24
_BUILTIN = {"tmp_path", "request"}


@dataclass(frozen=True)
class Candidate:
    """A test that refers to a name ``depth`` calls from the Function."""

    path: Path
    root: Path
    owner: str | None
    name: str
    depth: int
    fixtures: int
    line: int
    overlap: int = 0
    grads: bool = False  # it differentiates (``.backward()``, ``gradcheck``): it reaches backward


#: Names a test that differentiates refers to.
_GRADS = {"backward", "grad", "gradcheck", "gradgradcheck", "requires_grad", "requires_grad_"}


#: Words every test or Function name has: they say nothing about which one it is.
_COMMON = {"test", "tests", "function", "autograd", "fn", "func", "forward", "backward",
           "apply", "grad", "gradient", "op", "ops", "impl", "the", "of", "and", "with", "to"}


def _pairs(text: str) -> set[tuple[str, str]]:
    """Adjacent words of each identifier, in order: ``dense_sp_mm`` is not ``sp_dense_mm``."""
    found = set()
    for name in text.split():
        words = _words(name)
        found |= set(zip(words, words[1:]))
    return found


def _words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w and w not in _COMMON]


def split_words(text: str) -> set[str]:
    """Lower-case words of identifiers: ``FixedTopoSpDenseMM``/``sp_dense_mm`` -> fixed, topo,
    sp, dense, mm (common words left out).

    Example:
        >>> sorted(split_words("FixedTopoSpDenseMMAutogradFunction test_sp_mv"))
        ['dense', 'fixed', 'mm', 'mv', 'sp', 'topo']
    """
    return set(_words(text))


def ranked(roots: list[Path], depth: dict[str, int],
           words: set[str] = frozenset()) -> list[Candidate]:
    """The tests under ``roots`` that refer to a name of ``depth``, likeliest first: fewest
    calls from the Function, then most of ``words`` (the Function's, its callers' and its
    module's names, split into words) in the test's and its file's names, as projects name
    tests after what they test (``test_sp_dense_mm_backward`` in ``test_matmul.py`` for
    ``sp_dense_mm`` in ``_matmul.py``), then those that differentiate, then fewest fixtures."""
    pattern = pattern_of(set(depth))
    wanted = {w for name in words for w in split_words(name)}
    pairs = {p for name in words for p in _pairs(name)}
    found: list[Candidate] = []
    for order, (path, root) in enumerate(test_candidates(roots)):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "def test" not in text or not pattern.search(text) or not _a_test_module(text):
            continue
        tree = ast.parse(text)
        local = _local_depths([tree, *_conftest_trees(path, root)], depth)
        for owner, node in _tests(tree):
            names = _referred(node) | set(needed_names(node))
            reached = [local[n] for n in names if n in local]
            if reached:
                said = f"{path.stem} {owner or ''} {node.name}"
                found.append(Candidate(path, root, owner, node.name, min(reached),
                                       len(needed_names(node)), order * 100_000 + node.lineno,
                                       len(split_words(said) & wanted)
                                       + len(_pairs(said) & pairs), bool(names & _GRADS)))
    found.sort(key=lambda c: (c.depth, -c.overlap, not c.grads, c.fixtures, c.line))
    return found[:MAX_TESTS]


def needed_names(node: ast.FunctionDef) -> list[str]:
    return [a.arg for a in node.args.args if a.arg != "self"][
        :len(node.args.args) - len(node.args.defaults)]


def _tests(tree: ast.Module) -> Iterator[tuple[str | None, ast.FunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    yield node.name, item


def _referred(node: ast.AST) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
    return names


def _local_depths(trees: list[ast.Module], depth: dict[str, int]) -> dict[str, int]:
    """``depth`` plus the helpers and fixtures of the test's module and conftests that refer
    to its names (one call further each; two rounds: a fixture built on a fixture), and the
    module's top-level names assigned from them: a test parametrized over
    ``classes = [ContinuousSoftmax, ...]`` reaches the Function through that list (corpus 14c
    dev: sparse_continuous_distributions' gradcheck test names no caller in its body)."""
    local = dict(depth)
    helpers = [(node.name, _referred(node) | {a.arg for a in node.args.args})
               for tree in trees for top in tree.body
               for node in ([top] if isinstance(top, ast.FunctionDef) else
                            [i for i in top.body if isinstance(i, ast.FunctionDef)]
                            if isinstance(top, ast.ClassDef) else [])
               if not node.name.startswith("test")]
    helpers += [(target.id, _referred(top.value)) for tree in trees for top in tree.body
                if isinstance(top, ast.Assign) for target in top.targets
                if isinstance(target, ast.Name)]
    for _ in range(2):
        for name, names in helpers:
            reached = [local[n] for n in names if n in local and n != name]
            if reached and min(reached) + 1 < local.get(name, 1 << 30):
                local[name] = min(reached) + 1
    return local


def _conftest_trees(path: Path, root: Path) -> list[ast.Module]:
    trees = []
    for conftest in _conftests(path, root):
        try:
            trees.append(ast.parse(conftest.read_text(encoding="utf-8", errors="replace")))
        except (OSError, SyntaxError):
            continue
    return trees


def _conftests(path: Path, root: Path) -> list[Path]:
    """``conftest.py`` files from ``root`` down to the test's folder, outermost first."""
    folders = [root, *[root.joinpath(*path.parent.relative_to(root).parts[:i + 1])
                       for i in range(len(path.parent.relative_to(root).parts))]]
    return [f / "conftest.py" for f in folders if (f / "conftest.py").is_file()]


class Loader:
    """Imports each test file (and its conftests) once, and builds a candidate's thunk."""

    def __init__(self, words: frozenset[str] = frozenset()) -> None:
        self._modules: dict[Path, Any] = {}
        self.words = words  # of the Function's module path: which option choice is its

    def module(self, path: Path, root: Path) -> Any:
        if path not in self._modules:
            self._modules[path] = _load(path, root)
        return self._modules[path]

    def thunk(self, candidate: Candidate) -> Thunk | None:
        module = self.module(candidate.path, candidate.root)
        if module is None:
            return None
        conftests = [m for m in (self.module(c, candidate.root)
                                 for c in _conftests(candidate.path, candidate.root)) if m]
        fixtures: dict[str, Any] = {}
        for namespace in [vars(m) for m in conftests] + [vars(module)]:
            fixtures.update(definitions(namespace))
        owner = vars(module).get(candidate.owner) if candidate.owner else None
        func = vars(owner if owner is not None else module).get(candidate.name)
        if not inspect.isfunction(func):
            return None
        if owner is not None:
            fixtures.update(definitions(vars(owner)))
        given = first_parameters(func)
        if given is None or not _resolvable(func, given, fixtures):
            return None
        return _thunk(func, owner, given, fixtures, options(conftests, self.words))


def first_parameters(func: Any) -> dict[str, Any] | None:
    """The first value set of ``func``'s ``pytest.mark.parametrize`` marks (possibly empty);
    None when a mark lists no values."""
    given: dict[str, Any] = {}
    for mark in getattr(func, "pytestmark", []):
        if getattr(mark, "name", "") != "parametrize" or len(mark.args) < 2:
            continue
        keys, values = mark.args[0], list(mark.args[1])
        keys = [k.strip() for k in keys.split(",")] if isinstance(keys, str) else list(keys)
        if not values:
            return None
        first = values[0]
        if isinstance(getattr(first, "values", None), tuple):
            first = first.values  # pytest.param(...): a tuple even for one name
        elif len(keys) == 1:
            first = (first,)
        if len(first) != len(keys):
            return None
        given.update(zip(keys, first))
    return given


def _resolvable(func: Any, given: dict[str, Any], fixtures: dict[str, Any]) -> bool:
    """Whether every argument ``func`` needs is given, a known fixture (recursively) or one of
    pytest's that :mod:`~gradsmith.discovery.fixtures` builds."""
    from gradsmith.discovery.fixtures import _function

    todo, seen = [n for n in needed(func) if n not in given], set()
    while todo:
        name = todo.pop()
        if name in seen or name in _BUILTIN:
            continue
        seen.add(name)
        if name not in fixtures:
            return False
        todo += needed(_function(fixtures[name]))
    return True


def _thunk(func: Any, owner: Any, given: dict, fixtures: dict, defaults: dict) -> Thunk | None:
    if owner is not None and issubclass(owner, unittest.TestCase):
        def run_case() -> None:
            case = owner(func.__name__)
            case.setUp()
            try:
                getattr(case, func.__name__)(**given)
            finally:
                case.tearDown()
        return run_case
    if owner is not None:
        try:
            inspect.signature(owner).bind()
        except (TypeError, ValueError):
            return None  # a test class that needs arguments is not pytest's

    def run() -> None:
        instance = owner() if owner is not None else None
        resolver = Resolver(fixtures, defaults, instance, func)
        try:
            kwargs = resolver.kwargs(func, given)
            if instance is not None:
                if hasattr(instance, "setup_method"):
                    instance.setup_method(func)
                getattr(instance, func.__name__)(**kwargs)
            else:
                func(**kwargs)
        finally:
            resolver.close()
    return run
