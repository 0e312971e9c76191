"""`intake-eval merge SHARD_DIR… --into DIR`: the shards of one study joined into one run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def merge(
    shard_dirs: Annotated[list[Path], typer.Argument(
        help="The shard folders (made with --shard i/N), every i from 1 to N.", show_default=False,
        metavar="SHARD_DIR...")],
    into: Annotated[Path, typer.Option(
        "--into", help="The merged run folder: new or empty (never overwritten).", show_default=False)],
) -> None:
    """Join the N shard folders of one study into one run folder that report, status and compare read as one run.

    Refused, with nothing written, when the shards were made with different configurations, profiles, models or
    prompts, when a shard is given twice or a conversation is in two shards (overlap), or when a shard is missing
    or a profile has no conversation (gap). Then run `intake-eval report --run-dir DIR`.
    """
    from intake_eval.commands.common import console
    from intake_eval.study.merge import merge_shards

    result = merge_shards(list(shard_dirs), into)
    console().print(f"merged {result.shards} shards: {result.conversations} conversations, {result.judgments} "
                    f"judgments → {result.into}  (next: intake-eval report --run-dir {result.into})")
    typer.echo(str(result.into))
