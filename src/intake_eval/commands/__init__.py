"""One module per CLI command. Module level imports stay light (typer, pathlib): heavy imports
happen inside the command function so `intake-eval --help` stays fast."""
