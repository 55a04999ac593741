"""The package surface: public names, version, command dispatch."""

import subprocess
import sys

import pytest

import gradsmith
from gradsmith.cli import SUBCOMMANDS, main


def test_public_names_resolve():
    for name in gradsmith.__all__:
        assert getattr(gradsmith, name) is not None, name


def test_unknown_attribute_is_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        gradsmith.no_such_thing  # noqa: B018


def test_check_function_not_shadowed_by_subpackage():
    import gradsmith.checker  # noqa: F401  binding the subpackage must not replace the function

    assert callable(gradsmith.check) and not isinstance(gradsmith.check, type(sys))


def test_no_command_is_usage_error(capsys):
    assert main([]) == 2
    assert "check" in capsys.readouterr().err


def test_bad_command_is_usage_error(capsys):
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_subcommand_has_help(command, capsys):
    assert main([command, "--help"]) == 0
    assert command in capsys.readouterr().out


def test_python_dash_m_matches_console_script():
    out = subprocess.run([sys.executable, "-m", "gradsmith", "--version"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"gradsmith {gradsmith.__version__}"


def _built_ids(build, page: str) -> set[str]:
    import re

    return set(re.findall(r'<dt class="sig sig-object py" id="([^"]+)"',
                          (build / page).read_text(encoding="utf-8")))


def test_api_reference_builds_without_warnings_and_covers_the_public_api(tmp_path):
    """The Sphinx build CI runs (warnings are errors), and every public name has an entry."""
    from pathlib import Path

    import gradsmith.functional
    import gradsmith.nn

    docs = Path(__file__).resolve().parents[1] / "docs" / "api"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                           "html", str(docs), str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""  # not even a warning
    for page, module in (("functional.html", gradsmith.functional), ("nn.html", gradsmith.nn)):
        # (under pytest's assertion rewriting, __all__ = dir()-based lists gain "@py_builtins")
        names = {n for n in module.__all__ if n.isidentifier()}
        missing = {f"{module.__name__}.{n}" for n in names} - _built_ids(tmp_path, page)
        assert not missing, f"{page} lacks {sorted(missing)}"
    top = {n for n in gradsmith.__all__ if n[0].isupper() or n in ("check", "example",
                                                                    "examples_of", "lint")}
    missing = {f"gradsmith.{n}" for n in top} - _built_ids(tmp_path, "gradsmith.html")
    assert not missing, missing
