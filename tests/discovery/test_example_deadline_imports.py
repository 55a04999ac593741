"""The examples route's deadline never cuts an import short (issue 18): under load a TimedOut
raised inside importlib left a package without its submodule attribute in ``sys.modules``
(``triton.backends`` without ``compiler``), and every later import of torch's inductor in the
process failed. The deadline waits for the import to finish, then stops the example."""

import sys
import time

import pytest

from gradsmith.discovery.project_tests import TimedOut, deadline


def test_an_import_running_past_the_deadline_completes_then_the_example_stops(tmp_path,
                                                                               monkeypatch):
    package = tmp_path / "slowpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "slow.py").write_text("import time\ntime.sleep(0.6)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.perf_counter()
    with pytest.raises(TimedOut):
        with deadline(0.1):
            import slowpkg.slow  # noqa: F401
            time.sleep(5)  # the example itself runs on: the deadline stops it
    assert time.perf_counter() - started < 3
    try:
        assert sys.modules["slowpkg.slow"].DONE is True
        assert sys.modules["slowpkg"].slow is sys.modules["slowpkg.slow"]
    finally:
        for name in ("slowpkg.slow", "slowpkg"):
            sys.modules.pop(name, None)


def test_an_example_outside_imports_still_stops_at_its_deadline():
    started = time.perf_counter()
    with pytest.raises(TimedOut):
        with deadline(0.2):
            time.sleep(5)
    assert time.perf_counter() - started < 2
