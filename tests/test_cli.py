"""The CLI built for one command (what `intake-eval NAME …` builds) answers that command as the full CLI
does, and the full CLI holds every command of the table."""

from __future__ import annotations

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from intake_eval.cli import COMMANDS, build_app

NAMES = [name for name, _, _ in COMMANDS]


@pytest.mark.parametrize("name", NAMES)
def test_a_command_built_alone_shows_the_same_help_as_in_the_full_cli(name: str) -> None:
    alone = CliRunner().invoke(build_app(only=name), [name, "--help"])
    full = CliRunner().invoke(build_app(), [name, "--help"])
    assert alone.exit_code == 0 and full.exit_code == 0, alone.output + full.output
    assert alone.output == full.output


def test_the_full_cli_holds_every_command_of_the_table() -> None:
    group = get_command(build_app())
    assert isinstance(group, typer.core.TyperGroup)
    assert sorted(group.commands) == sorted(NAMES)


def test_a_command_built_alone_is_the_only_one_built() -> None:
    group = get_command(build_app(only="run"))
    assert isinstance(group, typer.core.TyperGroup)
    assert list(group.commands) == ["run"]
