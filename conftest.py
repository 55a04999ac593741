"""Settings for the whole test run (tests/ and the doctests in src/), loaded before any test
module and before torch; benchmarks/results/test_suite_cost.md has the measurements.

One OpenMP thread per process. On a busy machine torch's idle workers spin while they wait for
the next task: 1,000 backward calls of a small Function took 7.7 CPU-s with two threads and
0.45 CPU-s with one, for the same work. The README's ``python -m pytest -n 2 --dist loadscope``
uses the cores with one worker each instead (``loadscope``: a module's tests run on one worker,
so a module-scoped fixture, such as a compiled matrix or a warmed-up server, is built once).
Tests of thread-dependent code set their thread count themselves; an ``OMP_NUM_THREADS`` set by
the caller is kept; processes the tests start inherit it.
"""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


# Bytecode of the repository's own modules, even under PYTHONDONTWRITEBYTECODE=1 (set in many
# CI images and Dockerfiles). Without it every process compiled from source on every run: each
# xdist worker compiled and assertion-rewrote the ~540 test modules and gradsmith's (collection
# 9.7 CPU-s, 5.1 with bytecode), and every `gradsmith check`, worker server, template and inner
# pytest a test starts compiled gradsmith again (0.2 CPU-s for one `gradsmith check`). The files
# go where Python puts them (`__pycache__`, ignored by git, or PYTHONPYCACHEPREFIX) and are
# checked against their source's time and size as always. GRADSMITH_TEST_BYTECODE=0 leaves the
# caller's setting alone (to compare).
_BYTECODE = os.environ.get("GRADSMITH_TEST_BYTECODE") != "0"


def pytest_configure(config):
    """gradsmith's plain bytecode, which the processes the tests start read (they inherit the
    caller's setting, so write none themselves): compiled once, by the controller of an xdist
    run (or the only process), before any test; up-to-date files are only checked."""
    if not _BYTECODE or hasattr(config, "workerinput"):
        return
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("gradsmith")
    for folder in spec.submodule_search_locations if spec else ():
        compileall.compile_dir(folder, quiet=2)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """Bytecode (assertion-rewritten for test modules) of what collection imports. Only while
    collecting, so what the tests themselves import (user code written to temporary folders)
    leaves no ``__pycache__`` behind."""
    keep = sys.dont_write_bytecode
    sys.dont_write_bytecode = keep and not _BYTECODE
    try:
        yield
    finally:
        sys.dont_write_bytecode = keep


@pytest.fixture(scope="session", autouse=True)
def _warm_worker_template():
    """One warm worker-server template per test process (gradsmith.isolation.template): the
    ``gradsmith check`` and ``gradsmith bench`` sessions a test runs, in this process or in a
    ``gradsmith check`` command it starts (the template's address is in
    ``GRADSMITH_WORKER_TEMPLATE``), fork their server from it instead of starting an interpreter
    that imports torch and warms up (2.8-4 CPU-s each). Started by the first session in this
    process, or by :func:`warm_worker_template` (tests/cli and tests/isolation: commands they
    start find it running); a session whose environment differs (a test set a variable) starts
    a fresh interpreter as before. ``GRADSMITH_TEST_TEMPLATE=0``: no template (every session
    starts its own server; to compare, or to rule it out)."""
    from gradsmith.isolation.template import ADDRESS_ENV, Template, install

    if os.environ.get("GRADSMITH_TEST_TEMPLATE") == "0":
        yield None
        return

    # the check tasks' deployment warm-up too (compile, export: what a default run forks with);
    # the task's arguments are (candidate, example, options, html). Volatile: variables of the
    # test plumbing that torch and gradsmith never read.
    template = Template(modules=("gradsmith.checker", "gradsmith.discovery.task",
                                 "gradsmith.checkrun.task"),
                        warm=[("gradsmith.checkrun.task", None, None, {"compat": True}, False)],
                        volatile=("PYTEST_CURRENT_TEST", "GRADSMITH_TEST_PIDS"))
    previous = install(template)
    os.environ[ADDRESS_ENV] = template.address
    yield template
    os.environ.pop(ADDRESS_ENV, None)
    template.close()
    install(previous)


@pytest.fixture
def warm_worker_template(_warm_worker_template):
    """The test run's template, started now (None when switched off)."""
    from gradsmith.isolation.template import installed

    return installed() if _warm_worker_template is not None else None
