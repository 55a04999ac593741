"""The warm template (issue 21): worker servers forked from one process that imported torch and
warmed up once start where a fresh interpreter would, and leave nothing behind.

Each probe is a user module whose import records what the task process sees (working
directory, ``sys.path``, environment, its process ancestry) in a JSON file; the reference is
the same probe run by a fresh server (no template installed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gradsmith.discovery.task import KIND
from gradsmith.isolation.pool import WorkerPool
from gradsmith.isolation.template import Template, install, server_env

PROBE = """
import json, os, sys

def _ppid(pid):
    stat = open(f"/proc/{pid}/stat", "rb").read()
    return int(stat[stat.rfind(b")") + 2:].split()[1])

keeper = os.getppid()
server = _ppid(keeper)
with open(os.environ["PROBE_OUT"], "w") as handle:
    json.dump({"cwd": os.getcwd(), "path": sys.path, "argv": [sys.argv[0], len(sys.argv)],
               "volatile": os.environ.get("PROBE_VOLATILE"), "environ": dict(os.environ),
               "server": server, "server_parent": _ppid(server),
               "server_session": os.getsid(server) == server}, handle)
"""

# Imported by the task: starts a daemon in a session of its own (it escapes a process-group
# kill), records it, then kills the task's own worker server.
KILLS_ITS_SERVER = """
import os, signal, subprocess, sys

def _ppid(pid):
    stat = open(f"/proc/{pid}/stat", "rb").read()
    return int(stat[stat.rfind(b")") + 2:].split()[1])

daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                          start_new_session=True)
with open(os.environ["PROBE_OUT"], "w") as handle:
    handle.write(str(daemon.pid))
os.kill(_ppid(os.getppid()), signal.SIGKILL)
"""


@pytest.fixture
def template(tmp_path, monkeypatch):
    """A template started from tmp (the probes' folder is elsewhere), installed for the test."""
    monkeypatch.setenv("PROBE_VOLATILE", "at the template's start")
    # as in a process where no check ran yet (one sets it, as the template's start-up does)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.chdir(tmp_path)
    made = Template(modules=(KIND,), volatile=("PROBE_VOLATILE", "PROBE_OUT", "PYTEST_CURRENT_TEST"))
    made.start()
    previous = install(made)
    yield made
    made.close()
    install(previous)


def _probe(folder: Path, monkeypatch) -> dict:
    """List the probe module with a pool started in ``folder``; what its import recorded."""
    from gradsmith.discovery.targets import resolve_targets

    out = folder / "probe.json"
    monkeypatch.setenv("PROBE_OUT", str(out))
    monkeypatch.chdir(folder)
    with WorkerPool(jobs=1, timeout=60) as workers:
        (outcome,) = workers.run([(KIND, s) for s in resolve_targets(["probe.py"])])
    assert outcome.kind == "ok", outcome.value
    return json.loads(out.read_text())


def test_a_forked_server_starts_where_a_fresh_one_would(template, tmp_path, monkeypatch):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "probe.py").write_text(textwrap.dedent(PROBE))
    monkeypatch.setenv("PROBE_VOLATILE", "the pool's")
    forked = _probe(folder, monkeypatch)
    install(None)
    fresh = _probe(folder, monkeypatch)
    assert forked["server_parent"] == template.pid  # it did come from the template
    assert fresh["server_parent"] == os.getpid()
    # what user code sees is what a fresh interpreter shows it: the pool's folder, not the
    # template's, first on sys.path; the pool's value of a variable that may differ
    for key in ("cwd", "path", "argv", "volatile", "environ", "server_session"):
        assert forked[key] == fresh[key], key
    assert forked["cwd"] == str(folder) and str(tmp_path) not in forked["path"]
    assert forked["volatile"] == "the pool's" and forked["server_session"]


def test_another_environment_gets_a_fresh_interpreter(template, tmp_path, monkeypatch):
    # torch read the environment when the template imported it: a variable the installer did
    # not name volatile (a thread count, a cache folder) cannot be changed in a fork
    (tmp_path / "probe.py").write_text(textwrap.dedent(PROBE))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    seen = _probe(tmp_path, monkeypatch)
    assert seen["server_parent"] == os.getpid()
    assert not template.fits(server_env())


def test_what_a_killed_forked_server_left_is_killed_before_the_pool_hears(template, tmp_path,
                                                                           monkeypatch, procs):
    from gradsmith.discovery.targets import resolve_targets

    (tmp_path / "killer.py").write_text(textwrap.dedent(KILLS_ITS_SERVER))
    out = tmp_path / "probe.json"
    monkeypatch.setenv("PROBE_OUT", str(out))
    try:
        with WorkerPool(jobs=1, timeout=60) as workers:
            outcomes = list(workers.run([(KIND, s) for s in resolve_targets(["killer.py"])]))
            daemon = int(out.read_text())
            # the template adopted the daemon when the server died, and killed it before it
            # sent the server's exit status, which the pool waited for
            assert not procs.alive(daemon)
        assert outcomes[0].kind == "crash" and "SIGKILL" in outcomes[0].value
    finally:
        if out.exists() and out.read_text():
            procs.kill_if_alive([int(out.read_text())])


CALLER = """
import os, sys, time
from gradsmith.discovery.targets import resolve_targets
from gradsmith.discovery.task import KIND
from gradsmith.isolation.pool import WorkerPool
from gradsmith.isolation.template import Template, install, server_env

template = Template(modules=(KIND,))
template.start()
install(template)
pool = WorkerPool(jobs=1, timeout=600)
pool.start()
print(template.pid, pool._proc.pid, flush=True)
for outcome in pool.run([(KIND, s) for s in resolve_targets(["hangs.py"])]):
    pass
"""

HANGS = """
import os, subprocess, sys, time
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                          start_new_session=True)
with open(os.environ["PROBE_OUT"], "w") as handle:
    handle.write(str(daemon.pid))
time.sleep(600)
"""


def test_a_killed_caller_takes_its_template_and_servers_with_it(tmp_path, procs):
    (tmp_path / "caller.py").write_text(textwrap.dedent(CALLER))
    (tmp_path / "hangs.py").write_text(textwrap.dedent(HANGS))
    out = tmp_path / "daemon.pid"
    env = dict(os.environ, PROBE_OUT=str(out))
    caller = subprocess.Popen([sys.executable, "caller.py"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, text=True)
    pids: list[int] = [caller.pid]
    try:
        pids += [int(p) for p in caller.stdout.readline().split()]
        assert len(pids) == 3, "the caller did not start its template and server"
        assert procs.wait_until(lambda: out.exists() and out.read_text(), 120)
        pids.append(int(out.read_text()))
        assert all(procs.alive(p) for p in pids[1:])
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=30)
        assert procs.wait_until(lambda: not any(procs.alive(p) for p in pids[1:]), 30), [
            p for p in pids[1:] if procs.alive(p)]
    finally:
        caller.kill()
        caller.wait(timeout=30)
        caller.stdout.close()
        procs.kill_if_alive(pids[1:])


def test_what_the_templates_start_up_set_may_be_set_in_the_caller_too(template, monkeypatch):
    # a check run in the caller's own process (--no-isolate) sets TRITON_INTERPRET there as the
    # template's start-up did, and the first compile TORCHINDUCTOR_CACHE_DIR: a fresh server
    # would set the same, so the caller still gets forks; another value is another environment
    if not template.own:
        pytest.skip("the template's start-up set no variable here (no triton, or a GPU)")
    name, value = sorted(template.own.items())[0]
    assert name not in template.env
    monkeypatch.setenv(name, value)
    assert template.fits(server_env())
    monkeypatch.setenv(name, value + "0")
    assert not template.fits(server_env())


def test_a_variable_torch_sets_again_before_each_use_does_not_make_another_environment(
        template, monkeypatch):
    # Inductor's C++ wrapper writes an address of the process using it there before each load
    # (seen after an in-process compile in tests/cli): whatever a server inherits is unused
    monkeypatch.setenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR", "140737488355328")
    assert template.fits(server_env())


def test_a_command_finds_the_template_at_the_address_in_its_environment(template, tmp_path,
                                                                       monkeypatch):
    # a `gradsmith check` a test suite starts: its server comes from the suite's template when
    # its environment fits, and is its own fresh interpreter otherwise
    from gradsmith.isolation.template import ADDRESS_ENV

    (tmp_path / "probe.py").write_text(textwrap.dedent(PROBE))
    seen = {}
    for case, extra in (("fits", {}), ("differs", {"OMP_NUM_THREADS": "3"})):
        out = tmp_path / f"{case}.json"
        env = dict(os.environ, PROBE_OUT=str(out), **{ADDRESS_ENV: template.address}, **extra)
        done = subprocess.run([sys.executable, "-m", "gradsmith", "check", "probe.py",
                               "--no-compat"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=180)
        assert out.exists(), done.stderr
        seen[case] = json.loads(out.read_text())
    assert seen["fits"]["server_parent"] == template.pid
    assert seen["differs"]["server_parent"] not in (template.pid, os.getpid())
    assert seen["fits"]["cwd"] == seen["differs"]["cwd"] == str(tmp_path)
    # a pool with nothing at the address starts its own interpreter
    monkeypatch.setenv(ADDRESS_ENV, str(tmp_path / "nothing-here.sock"))
    install(None)
    assert _probe(tmp_path, monkeypatch)["server_parent"] == os.getpid()
