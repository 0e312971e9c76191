"""`intake-eval view [RUN_DIR]`: serve the run's report on 127.0.0.1 and print its URL."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR


def view(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (its report is built first when missing).")] = DEFAULT_RUN_DIR,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (a taken port falls back to a free one; 0 = any).", min=0, max=65535)] = 8765,
    open_: Annotated[bool, typer.Option("--open", help="Open the URL in the default browser.")] = False,
) -> None:
    """Serve report/ of RUN_DIR on 127.0.0.1 until Ctrl-C; prints the URL (only this machine can reach it)."""
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.store import RunPaths
    from intake_eval.report.serve import report_server, url_of

    paths = RunPaths(Path(run_dir))
    if not paths.root.is_dir():
        raise IntakeEvalError(f"{run_dir}: no such run folder")
    if not paths.report_index.exists():
        from intake_eval.report.build import build_report

        build_report(paths.root)
    server = report_server(paths.report_dir, port)
    url = url_of(server)
    typer.echo(url)
    if open_:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
