"""The CLI run in this process for a test: one helper every test file uses instead of its own copy.

``invoke`` runs the Typer app through Click's CliRunner and fails the test when an exception escapes:
a user error is one printed line and exit code 2, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping

from typer.testing import CliRunner, Result

from intake_eval.cli import app


def invoke(*args: object, env: Mapping[str, str] | None = None) -> Result:
    """``intake-eval ARGS…`` in this process (each argument as text, paths included), with ``env`` set for
    the call; the result of a clean exit, whatever its exit code."""
    result = CliRunner().invoke(app, [str(arg) for arg in args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result
