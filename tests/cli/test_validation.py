"""Every path and number is validated before any work: exit 2, one line with the fix, and no
worker started, no measurement made (the run would otherwise die at its end)."""

from __future__ import annotations

import os

import pytest

from gradsmith.cli import main


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a worker starts, a check or a benchmark runs."""
    import gradsmith.bench
    import gradsmith.checkrun.session

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the arguments were validated")

    monkeypatch.setattr(gradsmith.checkrun.session, "run_check", forbidden)
    monkeypatch.setattr(gradsmith.bench, "run", forbidden)


def _loops(root):
    (root / "d").mkdir()
    (root / "d" / "a.py").symlink_to("b.py")
    (root / "d" / "b.py").symlink_to("a.py")
    (root / "e").mkdir()
    (root / "e" / "gone.py").symlink_to("deleted.py")
    (root / "self").symlink_to("self")


@pytest.mark.parametrize("target, says", [
    ("d", "is a symbolic link loop"),
    ("d/a.py", "is a symbolic link loop"),
    ("d/a.py::Square", "is a symbolic link loop"),
    ("self", "is a symbolic link loop"),
    ("e", "which does not exist"),
])
def test_check_rejects_symlink_loops_and_dangling_links(target, says, tmp_path, monkeypatch,
                                                        capsys, no_work):
    _loops(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", target]) == 2
    err = capsys.readouterr().err
    assert says in err and "remove the link or point it at a real file" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("path, says", [
    ("d/a.py", "is a symbolic link loop"),
    ("self", "is a symbolic link loop"),
    ("hostname", "is not a Python file"),
])
def test_lint_rejects_what_it_cannot_lint(path, says, tmp_path, monkeypatch, capsys):
    _loops(tmp_path)
    (tmp_path / "hostname").write_text("buildhost\n")  # valid Python syntax, not Python
    monkeypatch.chdir(tmp_path)
    assert main(["lint", path]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_lint_accepts_python_scripts_without_suffix(tmp_path, monkeypatch, capsys):
    (tmp_path / "tool").write_text("#!/usr/bin/env python3\nimport os\n")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "tool"]) == 0


def _unwritable(tmp_path):
    """A file no process can write, even as root (where permission bits do not stop it)."""
    if os.path.exists("/proc/version"):
        return "/proc/version"
    (tmp_path / "readonly").write_text("")
    (tmp_path / "readonly").chmod(0o444)
    return str(tmp_path / "readonly")


@pytest.mark.parametrize("kind", ["directory", "missing folder", "unwritable"])
def test_check_html_must_name_a_writable_file(kind, tmp_path, monkeypatch, capsys, no_work):
    pytest.importorskip("matplotlib")
    (tmp_path / "ops.py").write_text("x = 1\n")
    (tmp_path / "out").mkdir()
    path = {"directory": "out", "missing folder": "nope/report.html",
            "unwritable": _unwritable(tmp_path)}[kind]
    monkeypatch.chdir(tmp_path)
    assert main(["check", "ops.py", "--html", path]) == 2
    err = capsys.readouterr().err
    assert {"directory": "is a directory; name a file inside it",
            "missing folder": "does not exist; create it",
            "unwritable": "cannot be written"}[kind] in err
    assert not os.path.exists(tmp_path / "nope")


@pytest.mark.parametrize("option", ["--json", "--markdown", "--plot"])
@pytest.mark.parametrize("kind", ["directory", "missing folder", "unwritable"])
def test_bench_outputs_must_be_writable_files(option, kind, tmp_path, monkeypatch, capsys,
                                              no_work):
    (tmp_path / "out").mkdir()
    path = {"directory": "out", "missing folder": "nope/result",
            "unwritable": _unwritable(tmp_path)}[kind]
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "gelu", "--quick", option, path]) == 2
    err = capsys.readouterr().err
    assert f"{option} " in err and {"directory": "is a directory",
                                     "missing folder": "does not exist",
                                     "unwritable": "cannot be written"}[kind] in err


def test_an_existing_output_file_is_left_as_it_was(tmp_path, capsys):
    from gradsmith._errors import GradsmithUsageError
    from gradsmith.cli._paths import writable_file

    (tmp_path / "plain").write_text("")
    with pytest.raises(GradsmithUsageError, match="is a file, not a directory"):
        writable_file("bench", "--json", str(tmp_path / "plain" / "out.json"))

    existing = tmp_path / "keep.json"
    existing.write_text("old results")
    writable_file("bench", "--json", str(existing))
    writable_file("bench", "--json", str(tmp_path / "new.json"))
    assert existing.read_text() == "old results"
    assert not (tmp_path / "new.json").exists()


@pytest.mark.parametrize("threads", ["0", "100000"])
def test_bench_threads_beyond_the_cpus_is_a_usage_error(threads, capsys, no_work):
    assert main(["bench", "gelu", "--threads", threads]) == 2
    cpus = len(os.sched_getaffinity(0))
    assert f"--threads must be between 1 and {cpus}" in capsys.readouterr().err


def test_check_jobs_and_names_fail_before_a_worker_starts(tmp_path, monkeypatch, capsys,
                                                         no_work):
    (tmp_path / "ops.py").write_text(
        "import torch\nclass Swish(torch.autograd.Function):\n    pass\n"
        "raise SystemExit('imported')\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "ops.py", "--jobs", "0"]) == 2
    assert main(["check", "ops.py::Swsh"]) == 2
    err = capsys.readouterr().err
    assert "--jobs must be >= 1" in err
    assert "no object named 'Swsh'; did you mean 'Swish'?" in err


@pytest.mark.parametrize("kind", ["loop", "below a file", "unwritable"])
def test_check_repro_must_name_a_directory_it_can_write(kind, tmp_path, monkeypatch, capsys,
                                                       no_work):
    _loops(tmp_path)
    (tmp_path / "ops.py").write_text("x = 1\n")
    (tmp_path / "plain").write_text("")
    path = {"loop": "self", "below a file": "plain/repro",
            "unwritable": "/proc/sys/gradsmith-repro"}[kind]
    monkeypatch.chdir(tmp_path)
    assert main(["check", "ops.py", "--repro", path]) == 2
    err = capsys.readouterr().err
    assert {"loop": "symbolic link loop", "below a file": "is a file, not a directory",
            "unwritable": "cannot create files in"}[kind] in err


@pytest.fixture
def bounded():
    """Fail instead of hanging: opening a FIFO with no writer blocks forever."""
    import signal

    def expired(signum, frame):
        raise AssertionError("gradsmith opened a special file and blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, 30)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("command", ["check", "lint"])
@pytest.mark.parametrize("target, says", [
    ("pipe.py", "pipe.py is a FIFO (named pipe), not a regular file"),
    ("pkg", "evil.py is a FIFO (named pipe), not a regular file"),
    ("/dev/null", "/dev/null is a character device, not a regular file"),
])
def test_special_files_are_never_read(command, target, says, tmp_path, monkeypatch, capsys,
                                      no_work, bounded):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ops.py").write_text("import torch\n")
    os.mkfifo(tmp_path / "pkg" / "evil.py")
    monkeypatch.chdir(tmp_path)
    code = main([command, target])
    err, out = capsys.readouterr()[::-1]
    if command == "lint" and target == "pkg":  # a file found by walking: a finding, as for
        assert code == 1 and "GS002" in out and "not a regular file" in out  # an unreadable one
    else:
        assert code == 2 and says in err and "Traceback" not in err


@pytest.mark.parametrize("argv, says", [
    (["check", "ops.py", "--html", ""], "--html needs a path, got an empty string"),
    (["check", "ops.py", "--repro", ""], "--repro needs a path, got an empty string"),
    (["check", ""], "an empty target"),
    (["check", "ops.py", " "], "an empty target"),
    (["bench", "clipped_relu", "--json", ""], "--json needs a file name, got an empty string"),
    (["bench", "clipped_relu", "--markdown", ""], "--markdown needs a file name"),
    (["bench", "clipped_relu", "--plot", ""], "--plot needs a file name"),
])
def test_empty_paths_are_usage_errors(argv, says, tmp_path, monkeypatch, capsys, no_work):
    # `--html "$OUT"` with OUT unset: the report was silently not written, and an empty
    # target checked the whole working directory.
    if "--plot" in argv:
        pytest.importorskip("matplotlib")
    (tmp_path / "ops.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "e.g." in err


def test_a_file_too_deep_for_the_parser_is_an_error_not_a_traceback(tmp_path, monkeypatch,
                                                                    capsys, no_work):
    from gradsmith.discovery import resolve_targets

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "deep.py").write_text("x = 1" + " + 1" * 100_000 + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "pkg/deep.py"]) == 2  # named: a usage error, before any worker
    err = capsys.readouterr().err
    assert "nested too deeply for Python's parser" in err and "Traceback" not in err
    (source,) = resolve_targets(["pkg"])  # found in a directory: an import-error row later
    assert "nested too deeply" in source.problem
