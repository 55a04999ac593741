"""Every ending of user code is reported as what it is: a crash as a crash (at once, not after
the time limit), an exception by its name at the user's line, an import that hangs or exits
as a failed row of that target, within the time limit, in a worker."""

from __future__ import annotations

import time

ENDINGS = """
class NotAnException(BaseException):
    pass

@gradsmith.example(_x)
class ForksThenCrashes(Function):
    @staticmethod
    def forward(ctx, x):
        if os.fork() == 0:  # the copy lives on, holding every pipe the task had
            time.sleep(600)
            os._exit(0)
        os.abort()

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class ForksThenExits(Function):
    @staticmethod
    def forward(ctx, x):
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        os._exit(7)

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class InterruptsInBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        raise KeyboardInterrupt("stop right there")


@gradsmith.example(_x)
class RaisesBaseException(Function):
    @staticmethod
    def forward(ctx, x):
        raise NotAnException("a BaseException subclass")

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class SendsItselfSigint(Function):
    @staticmethod
    def forward(ctx, x):
        import signal
        os.kill(os.getpid(), signal.SIGINT); time.sleep(30)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class EndsItsProcess(Function):
    @staticmethod
    def forward(ctx, x):
        os._exit(0)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("__str__ is broken too")


@gradsmith.example(_x)
class RaisesUnprintable(Function):
    @staticmethod
    def forward(ctx, x):
        raise Unprintable()

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class CallsSysExit(Function):
    @staticmethod
    def forward(ctx, x):
        sys.exit(3)

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_forks_crashes_and_base_exceptions_are_named_for_what_they_are(runner, write, procs):
    write("endings.py", ENDINGS, procs.good)
    write("interrupted_import.py", "import os\nraise KeyboardInterrupt('while importing')\n",
          header=False)
    started = time.monotonic()
    # --no-compat: every ending happens in the eager checks (issue 21's suite cost)
    code, doc, err = runner.check("endings.py", "interrupted_import.py", "--timeout", "120",
                                  "--no-compat")
    took = time.monotonic() - started
    imported = next(r for r in doc["results"] if r["name"] == "interrupted_import.py")
    assert imported["error"] == "import", imported
    assert "KeyboardInterrupt: while importing" in imported["reason"]
    assert "interrupted_import.py:2" in imported["reason"] and "SIGINT" not in imported["reason"]
    rows = {r["name"].split("::")[1]: r for r in doc["results"] if "::" in r["name"]}
    assert set(rows) >= {"ForksThenCrashes", "ForksThenExits", "InterruptsInBackward",
                         "RaisesBaseException", "CallsSysExit", "SendsItselfSigint",
                         "EndsItsProcess", "RaisesUnprintable", "Square", "Exp"}, err
    assert took < 100, "a fork kept a crashed task waiting for its time limit"

    for name, how in (("ForksThenCrashes", "signal SIGABRT"), ("ForksThenExits", "exit code 7"),
                      ("EndsItsProcess", "exit code 0 (user code ended the process with "
                                         "os._exit()")):
        row = rows[name]
        assert (row["verdict"], row["error"]) == ("fail", "crash"), row["reason"]
        assert how in row["reason"] and row["elapsed"] < 60
        assert "ended without a result" in row["reason"]
    assert "endings.py" in rows["ForksThenCrashes"]["reason"]  # faulthandler: the user's frame

    for name, what, line in (
            ("InterruptsInBackward", "KeyboardInterrupt: stop right there",
             'raise KeyboardInterrupt("stop right there")'),
            ("RaisesBaseException", "NotAnException: a BaseException subclass",
             'raise NotAnException("a BaseException subclass")'),
            ("CallsSysExit", "SystemExit: 3", "sys.exit(3)"),
            ("SendsItselfSigint", "KeyboardInterrupt", "os.kill(os.getpid(), signal.SIGINT)"),
            ("RaisesUnprintable", "user code raised RuntimeError: __str__ is broken too",
             'raise RuntimeError("__str__ is broken too")')):
        row = rows[name]
        assert (row["verdict"], row["error"]) == ("fail", "exception"), row["reason"]
        assert what in row["reason"], row["reason"]
        lineno = next(i for i, text in enumerate((runner.cwd / "endings.py").read_text()
                                                 .splitlines(), start=1) if line in text)
        assert f"endings.py:{lineno}" in row["reason"]
        assert "/gradsmith/" not in row["reason"] and "SIGINT" not in row["reason"]
        assert "gradsmith.check raised" not in row["reason"]
    assert rows["Square"]["verdict"] == rows["Exp"]["verdict"] == "pass"
    assert code == 2  # the import error decides


def test_dotted_targets_import_in_the_worker_under_the_time_limit(runner, write, procs):
    # goodpkg imports itself absolutely: it works only from the directory that holds it.
    write("goodpkg/__init__.py", "from goodpkg.ops import Square  # noqa\n", header=False)
    write("goodpkg/ops.py", procs.square)
    write("hangpkg/__init__.py", "import time\ntime.sleep(600)\n", header=False)
    write("hangpkg/ops.py", procs.square)
    write("exitpkg/__init__.py", "import os\nprint('about to exit')\nos._exit(9)\n",
          header=False)
    write("exitpkg/ops.py", procs.square)
    started = time.monotonic()
    # An import has the start-up limit, not --timeout (issue 18: import time is not a
    # Function's time).
    code, doc, err = runner.check("goodpkg.ops", "hangpkg.ops", "exitpkg.ops::Square",
                                  "--timeout", "10", "--startup-timeout", "30", "--no-compat")
    assert time.monotonic() - started < 120
    rows = {r["name"]: r for r in doc["results"]}
    assert rows["goodpkg.ops::Square"]["verdict"] == "pass", err
    # A target named with ::Name keeps its name when its import fails (issue 18).
    hang, exits = rows["hangpkg.ops"], rows["exitpkg.ops::Square"]
    assert (hang["error"], exits["error"]) == ("import", "import")
    assert "importing it timed out after 30 s" in hang["reason"]
    assert "--startup-timeout" in hang["reason"]
    assert "exit code 9" in exits["reason"] and "about to exit" in exits["reason"]
    assert code == 2


def test_a_package_that_cannot_import_in_gradsmith_own_process_still_works(monkeypatch,
                                                                           tmp_path, write,
                                                                           capsys, procs):
    # In-process (the console script's sys.path lacks the working directory): resolving
    # `goodpkg.ops` must neither import goodpkg here nor fail to find it.
    import sys

    from gradsmith.cli import main

    write("goodpkg/__init__.py", "from goodpkg.ops import Square  # noqa\n", header=False)
    write("goodpkg/ops.py", procs.square)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    code = main(["check", "goodpkg.ops", "--format", "json", "--no-compat"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "goodpkg" not in sys.modules


# User code that turns on gradsmith's own processes and pipes. Each must end as its own failed
# row, and the correct Functions after them (same worker, --jobs 1) must still pass.
ATTACKS = """
import signal

def _server_pid():
    with open(f"/proc/{os.getppid()}/stat") as handle:  # the keeper's parent
        return int(handle.read().rsplit(")", 1)[1].split()[1])

@gradsmith.example(_x)
class KillsItsProcessGroup(Function):
    @staticmethod
    def forward(ctx, x):
        os.kill(0, signal.SIGKILL)

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class ClosesEveryDescriptor(Function):
    @staticmethod
    def forward(ctx, x):
        os.closerange(3, 4096)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


@gradsmith.example(_x)
class WritesIntoEveryDescriptor(Function):
    @staticmethod
    def forward(ctx, x):
        for fd in range(3, 64):
            try:
                os.write(fd, b"\\xff" * 64)
            except OSError:
                pass
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


@gradsmith.example(_x)
class StopsItself(Function):
    @staticmethod
    def forward(ctx, x):
        os.kill(os.getpid(), signal.SIGSTOP)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


@gradsmith.example(_x)
class KillsTheWorkerServer(Function):
    @staticmethod
    def forward(ctx, x):
        os.kill(_server_pid(), signal.SIGKILL)
        time.sleep(60)

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_user_code_attacking_the_worker_fails_alone(runner, write, procs):
    write("attacks.py", ATTACKS, procs.good)
    code, doc, err = runner.check("attacks.py", "--jobs", "1", "--timeout", "6",
                                  "--no-compat")
    rows = {r["name"].split("::")[1]: r for r in doc["results"]}
    assert {n: rows[n]["verdict"] for n in ("Square", "Exp")} == {"Square": "pass",
                                                                  "Exp": "pass"}, err
    expected = {"KillsItsProcessGroup": ("crash", "signal SIGKILL"),
                "ClosesEveryDescriptor": ("crash", "closed gradsmith's result pipe"),
                "WritesIntoEveryDescriptor": ("crash", "wrote into gradsmith's result pipe"),
                "StopsItself": ("timeout", "timed out after 6 s"),
                "KillsTheWorkerServer": ("crash", "worker server stopped answering")}
    for name, (error, says) in expected.items():
        assert (rows[name]["verdict"], rows[name]["error"]) == ("fail", error), rows[name]
        assert says in rows[name]["reason"], rows[name]["reason"]


# User code that writes gradsmith's own frames into its result pipe: a pickle that would run
# os._exit(97) where it is unpickled, and one of plain data that is not a result.
FORGES_RESULTS = """
import pickle, stat
from gradsmith.isolation.protocol import frame

def _forge(payload):
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, frame(b"e" + pickle.dumps(42)) + frame(b"r" + payload))
        except OSError:
            pass
    os._exit(0)

class _Exit:
    def __reduce__(self):
        return (os._exit, (97,))

@gradsmith.example(_x)
class ForgesACallingResult(Function):
    @staticmethod
    def forward(ctx, x):
        _forge(pickle.dumps(_Exit()))

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class ForgesAPlainResult(Function):
    @staticmethod
    def forward(ctx, x):
        _forge(pickle.dumps({"verdict": "pass"}))

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_a_forged_result_runs_nothing_in_gradsmith_and_passes_nothing(runner, write, procs):
    write("forges.py", FORGES_RESULTS, procs.good)
    code, doc, err = runner.check("forges.py", "--timeout", "30", "--no-compat")
    assert code == 1, err  # 97: the forged pickle ran os._exit in gradsmith check
    rows = {r["name"].split("::")[1]: r for r in doc["results"]}
    for name in ("ForgesACallingResult", "ForgesAPlainResult"):
        assert (rows[name]["verdict"], rows[name]["error"]) == ("fail", "crash"), rows[name]
        assert "its result was not gradsmith's" in rows[name]["reason"]
    assert rows["Square"]["verdict"] == rows["Exp"]["verdict"] == "pass"


def test_without_isolation_a_base_exception_is_still_a_row(runner, write, procs):
    # --no-isolate runs user code in gradsmith's own process: sys.exit(3) in a forward ended
    # the whole run with exit code 3 and no output.
    write("exits.py", """
class Custom(BaseException):
    pass

@gradsmith.example(_x)
class CallsSysExit(Function):
    @staticmethod
    def forward(ctx, x):
        sys.exit(3)

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class RaisesCustom(Function):
    @staticmethod
    def forward(ctx, x):
        raise Custom("custom")

    @staticmethod
    def backward(ctx, grad):
        return grad
""", procs.good)
    write("exits_on_import.py", "import sys\nsys.exit(4)\n", header=False)
    code, doc, err = runner.check("exits.py", "exits_on_import.py", "--no-isolate",
                                  "--no-compat")
    rows = {r["name"]: r for r in doc["results"]}
    assert code == 2, err  # the import error decides
    for name, what in (("exits.py::CallsSysExit", "SystemExit: 3"),
                       ("exits.py::RaisesCustom", "Custom: custom")):
        assert (rows[name]["verdict"], rows[name]["error"]) == ("fail", "exception")
        assert what in rows[name]["reason"] and "exits.py:" in rows[name]["reason"]
    assert rows["exits_on_import.py"]["error"] == "import"
    assert "SystemExit: 4" in rows["exits_on_import.py"]["reason"]
    assert rows["exits.py::Square"]["verdict"] == rows["exits.py::Exp"]["verdict"] == "pass"


# Text from user code that would drive a terminal: clear the screen, move the cursor up (over
# a FAIL line), retitle the window; and rich markup.
TERMINAL_CONTROL = """
@gradsmith.example(_x)
class RaisesControlCodes(Function):
    @staticmethod
    def forward(ctx, x):
        raise ValueError("\\x1b[2J\\x1b[1A\\x1b]0;pwned\\x07 [/] [bold]not bold[/bold]")

    @staticmethod
    def backward(ctx, grad):
        return grad


@gradsmith.example(_x)
class PrintsControlCodesThenExits(Function):
    @staticmethod
    def forward(ctx, x):
        print("\\x1b[2J\\x1b[1Aprinted [/]", flush=True)
        os._exit(5)

    @staticmethod
    def backward(ctx, grad):
        return grad
"""


def test_user_text_is_shown_never_obeyed_by_the_terminal(runner, write):
    write("control.py", TERMINAL_CONTROL)
    code, out, err = runner.run("check", "control.py", "--no-compat")
    assert code == 1, err
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b[1A\\x1b]0;pwned\\x07 [/] [bold]not bold[/bold]" in out
    assert "\\x1b[2J\\x1b[1Aprinted [/]" in out  # the ended task's last output
