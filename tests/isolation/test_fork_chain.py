"""A correct Function whose forward starts a self-ending fork chain (each link forks the next and
exits, some in a new session or process group) passes, and when its row is done no process it
started is left: none running, none stopped (SIGSTOP'd), none adopted by init (issue 20)."""

from __future__ import annotations

import os
import signal
import time

# Every forward call starts a chain of LINKS processes, each a fork of the task process (torch
# loaded): the parent reaps its direct child, every later link is an orphan. Every third link
# leaves its session, every fifth its process group, so no group or session kill reaches all.
# The check calls forward about 50 times: without reaping, zombies pile up by LINKS a call (old
# code: 4,647 at once with 100 links), far past one chain's worth. 10 links keep that margin
# (reaping made to wait for the task only: 474 at once, against the bound of 10) at a tenth of
# the forks (each a copy of a process with torch loaded: 29 CPU-s with 100, 14 with 20).
LINKS = 10

FORK_CHAIN = f"\nLINKS = {LINKS}\n" + """

def chain():
    first = os.fork()
    if first:
        os.waitpid(first, 0)
        return
    for link in range(LINKS):
        record("link")
        if link % 3 == 0:
            os.setsid()
        elif link % 5 == 0:
            os.setpgid(0, 0)
        if os.fork():
            os._exit(0)
    os._exit(0)


def count_zombies():
    # ended processes nobody reaped yet, below the parent (where orphans go)
    found = 0
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        found += fields[0] == b"Z" and int(fields[1]) == os.getppid()
    with open(os.environ["GRADSMITH_TEST_PIDS"] + ".zombies", "a") as handle:
        handle.write(f"{found}\\n")


@gradsmith.example(_x)
class ForksAChain(Function):
    @staticmethod
    def forward(ctx, x):
        count_zombies()
        chain()
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad
"""


def _state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``T`` stopped, ``Z`` zombie); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:][:1].decode()


def _kill_recorded(runner, procs, seconds: float = 10.0) -> None:
    """Kill the chain's processes by their recorded pids until no new one appears (a link
    records itself first thing, so one that forked meanwhile shows up in the next round)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        living = [p for p in runner.recorded() if procs.alive(p)]
        if not living:
            return
        for pid in living:
            if _state(pid) == "T":
                os.kill(pid, signal.SIGCONT)
        procs.kill_if_alive(living)
        time.sleep(0.05)


def test_a_fork_chain_in_forward_passes_and_leaves_no_process(runner, write, procs):
    write("chain.py", FORK_CHAIN)
    try:
        code, doc, err = runner.check("chain.py", "--no-compat", "--timeout", "60",
                                      timeout=150)
        (row,) = doc["results"]
        assert (row["verdict"], row["error"]) == ("pass", None), (row["reason"], err)
        assert code == 0
        recorded = runner.recorded()
        assert len(recorded) > LINKS  # the chains ran (a chain still running ends with the row)
        # Orphans are reaped as they end: zombies do not pile up while the checks run (each
        # link leaves one; old code let thousands of them slow every look at /proc).
        zombies = [int(n) for n in (runner.cwd / "pids.txt.zombies").read_text().split()]
        assert max(zombies) < LINKS, f"up to {max(zombies)} unreaped processes at once"
        # Everything ended with the row; give the kernel a moment to reap the last ones.
        procs.wait_until(lambda: not any(procs.alive(p) for p in recorded), 5)
        states = {pid: _state(pid) for pid in recorded}
        stopped = [pid for pid, state in states.items() if state == "T"]
        living = [pid for pid, state in states.items() if state not in (None, "Z")]
        assert not stopped, f"{len(stopped)} processes were left stopped"
        assert not living, f"{len(living)} of {len(recorded)} processes outlived the run"
    finally:
        _kill_recorded(runner, procs)
