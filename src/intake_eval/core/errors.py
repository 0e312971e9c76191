"""One error type for everything a user can cause: printed as one line, exit code 2, no traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

import typer

if TYPE_CHECKING:
    class ClickException(Exception):
        """What the checker needs of click's ClickException (typer's vendored copy has the same interface);
        spelled here so the package imports click nowhere, not even for types."""

        exit_code: int
        message: str

        def __init__(self, message: str) -> None: ...
        def format_message(self) -> str: ...
        def show(self, file: IO[str] | None = None) -> None: ...
else:
    # Typer >= 0.29 vendors its own copy of click (typer._click) and only catches that copy's
    # ClickException; take whichever class the running Typer uses.
    ClickException = next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException")


class IntakeEvalError(ClickException):
    """A problem the user can fix (bad file, flag, key, config). Click prints it and exits 2."""

    exit_code = 2

    def show(self, file: IO[str] | None = None) -> None:
        stream = file if file is not None else sys.stderr
        print(f"error: {printable(self.format_message())}", file=stream)


def printable(text: str) -> str:
    """Control characters from user input (a flag value, a file's bytes) shown escaped, so an error
    stays one readable line; newlines are kept (a few messages list one problem per line)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\n" else ch.encode("unicode_escape").decode("ascii") for ch in text)


class ConfigChangedError(IntakeEvalError):
    """A stage was asked to resume under a different configuration than the one on disk."""


class RunLockedError(IntakeEvalError):
    """Another process holds the run folder."""


def describe_validation_error(error: Exception, source: str | Path) -> str:
    """One line naming the file and field of the first pydantic validation problem."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return f"{source}: {error}"
    problems = []
    for item in errors():
        # a key is user text: escape control characters (a "\n" key must not break the line)
        location = ".".join(str(part).encode("unicode_escape").decode("ascii") if not str(part).isprintable()
                            else str(part) for part in item.get("loc", ())) or "(top level)"
        message = item.get("msg", "invalid")
        if item.get("type") == "extra_forbidden":
            message = "unknown key"
        problems.append(f"{location}: {message}")
    extra = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{source}: {problems[0]}{extra}" if problems else f"{source}: invalid"
