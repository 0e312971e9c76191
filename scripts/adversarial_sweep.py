#!/usr/bin/env python
"""Run every bad input of tests/helpers/adversarial_cases.py against the CLI (one subprocess each) and
print the counts: tracebacks, silent acceptances, wrong answers, passes.

    .venv/bin/python scripts/adversarial_sweep.py [--only SUBSTRING] [--jobs N] [--list] [--json OUT]

Cases that need a tmpfs mount (read-only folder, full disk) are skipped when mounting is not
allowed (not root). Exit code 1 when any case is a traceback, silent or wrong.
INTAKE_EVAL_SWEEP_SRC=/other/checkout/src runs the same cases against another version.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.adversarial_cases import all_cases, build_base, can_mount, run_case  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--jobs", type=int, default=1, help="cases at once (each is one CLI subprocess)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--json", type=Path, help="write every case's verdict here")
    options = parser.parse_args()
    cases = [case for case in all_cases() if options.only in case.name]
    if options.list:
        for case in cases:
            print(f"{case.name:60} expect {case.expect:8} {' '.join(case.args)}")
        print(f"{len(cases)} cases")
        return 0
    with tempfile.TemporaryDirectory(prefix="adversarial-") as scratch:
        root = Path(scratch)
        base = build_base(root / "base")
        mounting = can_mount(root)
        skipped = [case for case in cases if case.needs_mount and not mounting]
        todo = [case for case in cases if case not in skipped]

        def one(numbered):
            number, case = numbered
            return run_case(case, base, root / f"case{number:04d}")

        results = []
        with ThreadPoolExecutor(max(1, options.jobs)) as pool:
            for result in pool.map(one, enumerate(todo)):
                results.append(result)
                if result["verdict"] != "pass":
                    print(f"{result['verdict'].upper():9} {result['name']}: {result['detail']}", flush=True)
    counts = Counter(result["verdict"] for result in results)
    print(f"{len(results)} distinct bad inputs run ({len(skipped)} skipped: no tmpfs mount): "
          f"{counts['traceback']} tracebacks, {counts['silent']} silent acceptances, {counts['wrong']} wrong, "
          f"{counts['pass']} as expected")
    if options.json:
        options.json.write_text(json.dumps(results, indent=1))
    return 0 if counts["pass"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
