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
