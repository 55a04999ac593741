"""Limits: a timed-out Function keeps the findings of the checks that finished and names the one
that ran out of time; --jobs is capped at what the machine holds; the worker's start-up limit is
an option, and waiting for it is visible."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gradsmith.isolation import pool
from gradsmith.isolation.pool import WorkerPool, capacity

# Backward is 1.5x off (a first-order bug), and hangs on non-contiguous tensors: the
# robustness check never ends, the first-order one has already found the bug.
WRONG_THEN_SLOW = """
@gradsmith.example(_x)
class WrongThenSlow(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if not (grad.is_contiguous() and x.is_contiguous()):
            time.sleep(600)
        return 3 * x * grad
"""


def test_a_timeout_keeps_the_findings_of_the_checks_that_finished(runner, write):
    write("slow.py", WRONG_THEN_SLOW)
    # --no-compat here and below: the hang is in an eager check, before any deployment check;
    # their warm-up in the worker (1.2 CPU-s) would test nothing more (issue 21's suite cost)
    code, doc, err = runner.check("slow.py", "--timeout", "8", "--no-compat")
    (row,) = doc["results"]
    assert (row["verdict"], row["error"]) == ("fail", "timeout"), err
    assert "gradients" in row["checks"] and "robustness" not in row["checks"]
    assert "ran out of time in the robustness check" in row["reason"]
    findings = row["report"]["findings"]
    mismatch = [f for f in findings if f["code"] == "gradient-mismatch"]
    assert mismatch and mismatch[0]["input"] == "x", findings
    assert row["report"]["unfinished"] == "robustness"
    assert code == 1


def test_a_timed_out_row_carries_its_inputs_and_its_findings_replay(runner, write, tmp_path):
    write("slow.py", WRONG_THEN_SLOW)
    scripts = tmp_path / "scripts"
    _, doc, err = runner.check("slow.py", "--timeout", "8", "--no-compat", "--repro",
                               str(scripts))
    (row,) = doc["results"]
    assert row["error"] == "timeout", err
    # the exact inputs were streamed before the first check, so the row has them
    (spec,) = row["repro"]["sets"][0]["args"]
    assert spec["type"] == "tensor" and spec["shape"] == [5] and len(spec["values"]) == 5
    (script,) = scripts.glob("*WrongThenSlow__gradient-mismatch__x.py")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "REPRODUCED:" in done.stdout, done.stdout + done.stderr


# Correct, and hangs in float32: only a deployment check (float32 precision) runs it so.
SLOW_IN_DEPLOYMENT = """
@gradsmith.example(_x)
class SlowInFloat32(Function):
    @staticmethod
    def forward(ctx, x):
        if x.dtype == torch.float32:
            time.sleep(600)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
"""


def test_a_timeout_in_the_deployment_checks_is_incomplete_never_a_pass(runner, write):
    """The eager checks finished and held, but a deployment check that did not finish cannot
    have held (a compile mismatch is an error): INCOMPLETE, exiting non-zero, not PASS."""
    write("deploy.py", SLOW_IN_DEPLOYMENT)
    code, doc, err = runner.check("deploy.py::SlowInFloat32", "--timeout", "20")
    (row,) = doc["results"]
    assert (row["verdict"], row["error"]) == ("fail", "incomplete"), row["reason"]
    (warning,) = [f for f in row["report"]["findings"] if f["code"] == "deployment-timeout"]
    assert warning["severity"] == "warning" and warning["check"] == row["report"]["unfinished"]
    assert "INCOMPLETE" in warning["message"]
    assert {"structure", "gradients", "second_order"} <= set(row["checks"])
    assert not [f for f in row["report"]["findings"] if f["severity"] == "error"]
    assert code != 0


def test_jobs_beyond_the_machine_are_capped_with_a_message(runner, write, procs):
    cap, why = capacity()
    cpus = len(os.sched_getaffinity(0))
    assert cap <= cpus and f"{cpus} CPU" in why
    # Each Function's first call records when it runs; no more than `cap` may overlap.
    body = """
@gradsmith.example(_x)
class Slow{i}(Function):
    calls = 0

    @staticmethod
    def forward(ctx, x):
        Slow{i}.calls += 1
        if Slow{i}.calls == 1:
            record(f"start {{time.time()}}")
            time.sleep(1.0)
            record(f"end {{time.time()}}")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
"""
    write("slow.py", *(body.format(i=i) for i in range(cap + 2)))
    # --no-compat: compiling each Function says nothing about how many run at once
    code, doc, err = runner.check("slow.py", "--jobs", "1000", "--timeout", "120", "--no-compat")
    assert f"--jobs 1000 capped at {cap}" in err and f"({cpus} CPU" in err  # memory varies
    events = sorted((float(t), +1 if kind == "start" else -1)
                    for kind, t in (line.split()[1:] for line in
                                    (runner.cwd / "pids.txt").read_text().splitlines()))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert 1 <= peak <= cap
    assert [r["verdict"] for r in doc["results"]] == ["pass"] * (cap + 2)


def test_capacity_counts_cpus_and_memory(monkeypatch):
    monkeypatch.setattr(pool, "usable_cpus", lambda: 8)
    monkeypatch.setattr(pool, "available_memory", lambda: 3 * pool.MEMORY_PER_JOB + 1)
    assert capacity() == (3, "8 CPUs, 3.2 GB of memory available")
    monkeypatch.setattr(pool, "available_memory", lambda: 0)
    assert capacity()[0] == 1  # always room for one
    monkeypatch.setattr(pool, "available_memory", lambda: None)
    assert capacity() == (8, "8 CPUs")


def test_the_startup_limit_is_an_option_and_the_wait_is_reported(runner, write, procs):
    write("ops.py", procs.good)
    started = time.monotonic()
    code, out, err = runner.run("check", "ops.py", "--startup-timeout", "0.05")
    assert code == 2 and time.monotonic() - started < 60
    assert "did not start within 0.05 s" in err and "--startup-timeout" in err
    assert out == ""


def test_the_pool_reports_progress_while_the_worker_starts(write, procs, tmp_path,
                                                           monkeypatch):
    from gradsmith.discovery import resolve_targets
    from gradsmith.discovery.task import KIND

    write("ops.py", procs.good)
    monkeypatch.chdir(tmp_path)
    waited: list[float] = []
    with WorkerPool(jobs=1, timeout=60, on_wait=waited.append) as workers:
        (outcome,) = workers.run([(KIND, s) for s in resolve_targets(["ops.py"])])
    assert outcome.kind == "ok" and len(outcome.value["candidates"]) == 2
    assert waited and waited == sorted(waited)


def test_a_huge_finite_time_limit_means_no_limit(runner, write, procs):
    # 1e308 s overflowed select() in the worker server: every task became a crash.
    write("ops.py", procs.good)
    code, doc, err = runner.check("ops.py", "--timeout", "1e308", "--no-compat")
    assert [r["verdict"] for r in doc["results"]] == ["pass", "pass"], err
    assert code == 0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_bad_limits_are_usage_errors(value, capsys):
    from gradsmith.cli import main

    for option in ("--timeout", "--startup-timeout"):
        assert main(["check", "x.py", option, value]) == 2
        err = capsys.readouterr().err
        assert f"{option} must be a positive number of seconds" in err


# Loaded by every Python started with this folder on PYTHONPATH: the worker server
# (`python -m gradsmith.isolation.worker PID LOGS`: argv is ['-m', PID, LOGS] while site
# runs) starts 20 s late, as under heavy load.
SLOW_SERVER = """
import sys, time
if sys.argv[:1] == ["-m"] and len(sys.argv) >= 2 and sys.argv[1].isdigit():
    time.sleep(20)
"""


def test_a_slow_worker_start_is_reported_while_it_lasts(runner, write, procs, tmp_path):
    write("ops.py", procs.good)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_SERVER)
    runner.env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(tmp_path / "site"), runner.env.get("PYTHONPATH")]))
    proc = runner.popen("check", "ops.py", "--no-compat", "--format", "json")
    # Piped: after 10 s without a result, one line on stderr, while the worker still starts.
    line = proc.stderr.readline()
    waited = line.split("starting the worker (importing torch) ")[-1].split()[0]
    assert line.startswith("gradsmith check: still working: starting the worker"), line
    assert proc.poll() is None and 5 <= float(waited) < 20, line
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert "still working" not in err  # said once
