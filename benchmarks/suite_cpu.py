"""CPU time of the test suite, per test and per file: a pytest plugin and its summary (issue 21).

Wall time on a shared 2-core machine says little; CPU time (user + sys) is what the cores have
to give. This plugin records, around each test's ``pytest_runtest_protocol``, the CPU of the
pytest process (an xdist worker, with ``-n``) and of every process it reaped meanwhile
(``getrusage`` self + children): the ``gradsmith check`` processes, worker servers and tasks,
inner pytest runs, script runners a test starts. A process reaped later (a session fixture's
helper) is counted in the test that was running then. Each pytest process writes one JSON file;
``python benchmarks/suite_cpu.py PREFIX`` sums them by file and lists the costliest tests.

The servers a test's checks fork from the process's warm worker template (the root
``conftest.py``; ``gradsmith check`` commands a test starts fork from it too) are the template's
children, not the test's: their CPU reaches the pytest process only when the template ends, in
its last test. So each row also records, apart, what the template and the servers it reaped
used during the test (``/proc/PID/stat``: its own and its reaped children's time; the test that
started the template carries its start, 3-4 CPU-s), and the summary lists the tests whose forks
cost most.

Usage (from the repository root; the whole command's CPU comes from ``/usr/bin/time``)::

    TEST_SUITE_CPU=/tmp/cpu PYTHONPATH=benchmarks /usr/bin/time -v \\
        python -m pytest -q -n 2 --dist loadscope -p suite_cpu
    python benchmarks/suite_cpu.py /tmp/cpu

Results: ``benchmarks/results/test_suite_cost.md``.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import resource
import sys
import time

import pytest

_ROWS: list[tuple[str, float, float, float]] = []
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def _template_cpu() -> tuple[int, float]:
    """(pid, CPU-s so far) of this process's running worker template, its reaped forks
    included; (0, 0.0) when there is none (never imports gradsmith itself)."""
    module = sys.modules.get("gradsmith.isolation.template")
    pid = getattr(getattr(module, "_current", None), "pid", 0)
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return 0, 0.0
    fields = stat[stat.rfind(b")") + 2:].split()
    return pid, sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall, (pid, forks) = _cpu(), time.monotonic(), _template_cpu()
    yield
    pid_after, forks_after = _template_cpu()
    forked = forks_after - (forks if pid_after == pid else 0.0) if pid_after else 0.0
    _ROWS.append((item.nodeid, _cpu() - cpu, time.monotonic() - wall, forked))


def pytest_sessionfinish(session):
    prefix = os.environ.get("TEST_SUITE_CPU")
    if prefix:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{prefix}.{worker}.{os.getpid()}.json", "w") as handle:
            json.dump({"rows": _ROWS, "total": _cpu()}, handle)


def summarise(prefix: str, top: int = 40) -> str:
    """Per-file sums and the ``top`` costliest tests, from the files a run wrote. Each pytest
    process's last test is marked ``*``: it also carries what that process reaped when its
    session-scoped fixtures ended (the warm worker template, with every server it forked)."""
    rows, last = [], set()
    for path in glob.glob(f"{prefix}.*.json"):
        with open(path) as handle:
            mine = [(r + [0.0])[:4] for r in json.load(handle)["rows"]]  # older files: 3
        rows += mine
        last.update(r[0] for r in mine[-1:])
    by_file = collections.Counter()
    for nodeid, cpu, _, _ in rows:
        by_file[nodeid.split("::")[0]] += cpu
    lines = [f"{sum(r[1] for r in rows):.1f} CPU-s in {len(rows)} tests", "", "CPU-s  file"]
    lines += [f"{cpu:6.1f} {name}" for name, cpu in by_file.most_common()]
    lines += ["", " CPU-s  wall-s  test"]
    lines += [f"{cpu:6.1f} {wall:7.1f} {'*' if nodeid in last else ' '}{nodeid}"
              for nodeid, cpu, wall, _ in sorted(rows, key=lambda r: -r[1])[:top]]
    lines += ["", "* a pytest process's last test: with what it reaped at the session's end"]
    forked = sorted((r for r in rows if r[3] > 0), key=lambda r: -r[3])
    if forked:
        lines += ["", f"{sum(r[3] for r in forked):.1f} CPU-s in the templates' forks during "
                  f"{len(forked)} tests (in the * rows above, not in the tests' own)",
                  " CPU-s  test"]
        lines += [f"{r[3]:6.1f} {r[0]}" for r in forked[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python benchmarks/suite_cpu.py PREFIX "
                         "(the TEST_SUITE_CPU of the run)")
    print(summarise(sys.argv[1]))
