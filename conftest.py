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

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


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
