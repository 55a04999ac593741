"""A module whose import fails inside Python's standard library (issue 18, corpus 8b dev: an
``enum.Flag`` with non-integer members raises in Python 3.11's ``enum.py``): the row names the
project's line and says the module cannot be imported on this Python, not a gradsmith failure.
An error raised in the module's own code keeps its plain message. Reduced cases written here.
"""

from __future__ import annotations

import platform

import pytest

from gradsmith.discovery.collect import TargetImportError, load_module

FLAG = "import enum\n\n\nclass Options(enum.Flag):\n    fast = object()\n"


def _message(tmp_path, text: str) -> str:
    path = tmp_path / "mod.py"
    path.write_text(text)
    with pytest.raises(TargetImportError) as info:
        load_module("file", str(path))
    return str(info.value)


def test_an_error_inside_the_standard_library_names_the_projects_line(tmp_path):
    try:  # the reference: the same class raises in this Python's own enum module
        exec(compile(FLAG, "reference", "exec"), {})
    except TypeError as exc:
        assert exc.__traceback__.tb_next is not None
    else:
        pytest.skip("this Python accepts a Flag member that is not an int")
    message = _message(tmp_path, FLAG)
    assert message.startswith("TypeError: unsupported operand type")
    assert f"inside Python {platform.python_version()}'s own enum.py" in message
    assert "mod.py:4 `class Options(enum.Flag):`" in message
    assert "cannot be imported on this Python; this is not a gradsmith failure" in message


def test_an_error_in_the_modules_own_code_has_no_such_note(tmp_path):
    message = _message(tmp_path, "raise RuntimeError('broken at import time')\n")
    assert message.startswith("RuntimeError: broken at import time at ")
    assert "standard library" not in message and "own " not in message
