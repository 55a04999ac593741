"""Simple pytest fixtures, resolved without pytest, for the project's tests (private).

A project's tests take their inputs from fixtures more often than not (``def test_solve(a_spd,
b)``, with ``a_spd`` built in a ``conftest.py`` from ``a``). To run such a test as an example of
a Function's call (:mod:`~gradsmith.discovery.project_tests`) its fixtures are built the way
pytest would for one test, without pytest's machinery: fixture functions of the test's class, its
module and the ``conftest.py`` files from the project's root down to its folder (the nearest
wins), their own fixture arguments resolved recursively, a parametrized fixture with its first
param, a yield fixture run to its ``yield`` and finished after the test; autouse fixtures too
(those that cannot be built are left out: they seed or configure, they do not give inputs).

Of pytest's own fixtures only what needs no pytest is given: ``tmp_path`` (a fresh folder inside
the scratch folder the test runs in), and a ``request`` that answers ``param``,
``addfinalizer``, ``getfixturevalue``, ``node.get_closest_marker`` (the test's own marks) and
``config.getoption`` (the default the project's ``pytest_addoption`` declares). A test needing anything else (``monkeypatch``, ``capsys``,
``request.node``) is not run: its fixture raises ``Unresolved``, and it is left out.
"""

from __future__ import annotations

import inspect
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

#: Fixtures built for one test at most (a chain of fixtures deeper than this is not simple).
_MAX_DEPTH = 8


class Unresolved(Exception):
    """A fixture the test needs cannot be built without pytest."""


def marker(obj: Any) -> Any:
    """The pytest fixture marker of ``obj`` (pytest 8.4+ and earlier), or None."""
    return getattr(obj, "_fixture_function_marker", None) or \
        getattr(obj, "_pytestfixturefunction", None)


def definitions(namespace: dict[str, Any]) -> dict[str, Any]:
    """The fixtures ``namespace`` defines, by the name tests ask for them."""
    found = {}
    for key, value in list(namespace.items()):
        mark = marker(value)
        if mark is not None:
            found[getattr(mark, "name", None) or key] = value
    return found


def options(conftests: list[Any], words: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Command-line option defaults the ``pytest_addoption`` hooks of ``conftests`` declare,
    keyed by every spelling ``getoption`` accepts (``--rng-seed``, ``rng_seed``). An option
    whose ``choices`` include one of ``words`` (the words of the Function's module path) takes
    that choice: a suite run with ``--backend np`` by default never reaches the Function in
    ``backend_torch.py``, which the project tests with ``--backend torch``."""
    parser = _Parser(words)
    for module in conftests:
        hook = getattr(module, "pytest_addoption", None)
        if callable(hook):
            try:
                hook(parser)
            except Exception:  # noqa: BLE001 - a hook wanting more of pytest: no defaults
                continue
    return parser.defaults


class Resolver:
    """Builds fixture values for one test from ``fixtures`` (name -> definition, the nearest
    last) and ``defaults`` (option defaults); ``close`` finishes yield fixtures."""

    def __init__(self, fixtures: dict[str, Any], defaults: dict[str, Any],
                 instance: Any = None, test: Any = None) -> None:
        self.fixtures, self.defaults, self.instance = fixtures, defaults, instance
        self.test = test
        self.values: dict[str, Any] = {}
        self.finalizers: list[Callable[[], Any]] = []

    def kwargs(self, func: Any, given: dict[str, Any]) -> dict[str, Any]:
        """Arguments for ``func``: ``given`` (its parametrize values) and fixtures; the
        autouse fixtures are built first."""
        self.values.update(given)
        for name, definition in self.fixtures.items():
            if getattr(marker(definition), "autouse", False) and name not in self.values:
                try:
                    self.value(name, 0)
                except Unresolved:
                    continue
        return {name: self.value(name, 0) for name in needed(func)}

    def value(self, name: str, depth: int) -> Any:
        if name in self.values:
            return self.values[name]
        if depth > _MAX_DEPTH:
            raise Unresolved(name)
        if name == "tmp_path":
            from pathlib import Path

            made: Any = Path(tempfile.mkdtemp(dir=os.getcwd()))
        elif name == "request":
            made = _Request(self, None)
        elif name in self.fixtures:
            made = self._build(name, self.fixtures[name], depth)
        else:
            raise Unresolved(name)
        self.values[name] = made
        return made

    def _build(self, name: str, definition: Any, depth: int) -> Any:
        func = _function(definition)
        if func is None:
            raise Unresolved(name)
        params = getattr(marker(definition), "params", None)
        kwargs = {}
        for arg in needed(func):
            if arg == "request":
                kwargs[arg] = _Request(self, _first(params) if params else None)
            else:
                kwargs[arg] = self.value(arg, depth + 1)
        if self.instance is not None and _takes_self(func):
            made = func(self.instance, **kwargs)
        else:
            made = func(**kwargs)
        if inspect.isgenerator(made):
            generator = made
            made = next(generator)
            self.finalizers.append(lambda: next(generator, None))
        return made

    def close(self) -> None:
        for finish in reversed(self.finalizers):
            try:
                finish()
            except Exception:  # noqa: BLE001, S112 - a teardown failing changes no inputs
                continue
        self.finalizers.clear()


def needed(func: Any) -> list[str]:
    """``func``'s parameters without a default (``self`` aside)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.default is inspect.Parameter.empty
            and p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _function(definition: Any) -> Any:
    """The plain function behind a fixture definition (pytest 8.4+ wraps it in an object,
    earlier versions keep it under ``__pytest_wrapped__``)."""
    unwrap = getattr(definition, "_get_wrapped_function", None)
    if callable(unwrap):
        return unwrap()
    wrapped = getattr(definition, "__pytest_wrapped__", None)
    return getattr(wrapped, "obj", None) or getattr(definition, "__wrapped__", definition)


def _takes_self(func: Any) -> bool:
    try:
        first = next(iter(inspect.signature(func).parameters), None)
    except (TypeError, ValueError):
        return False
    return first == "self"


def _first(params: Any) -> Any:
    first = list(params)[0]
    values = getattr(first, "values", None)  # pytest.param(...)
    return values[0] if isinstance(values, tuple) and len(values) == 1 else \
        (values if values is not None else first)


class _Request:
    """The part of pytest's ``request`` a simple fixture uses; anything else is Unresolved."""

    def __init__(self, resolver: Resolver, param: Any) -> None:
        self._resolver = resolver
        self.param = param
        self.config = _Config(resolver.defaults)
        self.node = _Node(resolver.test, resolver.instance)

    def addfinalizer(self, finish: Callable[[], Any]) -> None:
        self._resolver.finalizers.append(finish)

    def getfixturevalue(self, name: str) -> Any:
        return self._resolver.value(name, 1)

    def __getattr__(self, name: str) -> Any:
        raise Unresolved(f"request.{name}")


class _Node:
    """The test's item as far as its name and marks (``get_closest_marker("gpu_only")``)."""

    def __init__(self, test: Any, instance: Any) -> None:
        self.name = getattr(test, "__name__", "")
        self._marks = list(getattr(test, "pytestmark", [])) + \
            list(getattr(type(instance), "pytestmark", []) if instance is not None else [])

    def get_closest_marker(self, name: str, default: Any = None) -> Any:
        return next((m for m in self._marks if getattr(m, "name", None) == name), default)

    def iter_markers(self, name: str | None = None) -> Iterator[Any]:
        return iter([m for m in self._marks if name is None or getattr(m, "name", None) == name])

    def __getattr__(self, name: str) -> Any:
        raise Unresolved(f"request.node.{name}")


class _Config:
    def __init__(self, defaults: dict[str, Any]) -> None:
        self._defaults = defaults

    def getoption(self, name: str, default: Any = None, skip: bool = False) -> Any:
        return self._defaults.get(name, default)

    def __getattr__(self, name: str) -> Any:
        raise Unresolved(f"request.config.{name}")


class _Parser:
    """Records ``addoption``'s defaults, as pytest's parser would hold them."""

    def __init__(self, words: frozenset[str] = frozenset()) -> None:
        self.defaults: dict[str, Any] = {}
        self.words = words

    def addoption(self, *names: str, **attrs: Any) -> None:
        default = attrs.get("default")
        if default is None and attrs.get("action") == "store_true":
            default = False
        chosen = [c for c in attrs.get("choices") or () if isinstance(c, str) and c in self.words]
        if len(chosen) == 1:
            default = chosen[0]
        dest = attrs.get("dest") or names[0].lstrip("-").replace("-", "_")
        for key in (*names, dest):
            self.defaults[key] = default

    def getgroup(self, *args: Any, **kwargs: Any) -> _Parser:
        return self

    def addini(self, *args: Any, **kwargs: Any) -> None:
        return None
