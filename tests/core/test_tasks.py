"""A fatal error in one of many concurrent workers is raised once: the siblings are cancelled and
their own failures collected (no "Task exception was never retrieved" tracebacks), and a judge
worker that dies never leaves the study waiting for it."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from intake_eval.core.tasks import gather_or_cancel
from tests.helpers.adversarial_cases import STUDY_YAML, can_mount, cli


def test_the_first_failure_is_raised_as_it_is_and_no_sibling_is_left_unretrieved():
    reported: list[dict] = []
    finished: list[int] = []

    async def worker(index: int) -> int:
        await asyncio.sleep(0.01 * index)
        if index % 2 == 0:
            raise OSError(30, "Read-only file system", f"/run/file{index}")
        await asyncio.sleep(10)
        finished.append(index)
        return index

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: reported.append(context))
        with pytest.raises(OSError) as caught:
            await gather_or_cancel(worker(i) for i in range(8))
        assert caught.value.filename == "/run/file0"  # the first, not an ExceptionGroup

    asyncio.run(main())
    import gc

    gc.collect()
    assert reported == [] and finished == []


def test_results_come_back_in_order():
    async def value(index: int) -> int:
        await asyncio.sleep(0.001 * (5 - index))
        return index

    assert asyncio.run(gather_or_cancel(value(i) for i in range(5))) == [0, 1, 2, 3, 4]
    assert asyncio.run(gather_or_cancel([])) == []


@pytest.mark.slow
def test_an_unwritable_judgments_folder_mid_study_is_one_line_not_a_hang(tmp_path):
    if not can_mount(tmp_path):
        pytest.skip("needs permission to mount a tmpfs (root)")
    run = tmp_path / "run"
    judge_dir = run / "judgments" / "offline__judge"
    judge_dir.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(judge_dir)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(judge_dir)], check=True)
        config = tmp_path / "study.yaml"
        # more conversations than judge workers (concurrency 1 × (3 turns + 1)), so workers that died
        # would leave judgments queued with nobody to take them
        config.write_text(STUDY_YAML.replace("n: 3", "n: 8").replace("concurrency: 2", "concurrency: 1"))
        done = cli("study", str(config), "--run-dir", str(run), timeout=240)
    finally:
        subprocess.run(["umount", str(judge_dir)], check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output and "never retrieved" not in output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "read-only file system" in errors[0] and "offline__judge" in errors[0], output
