"""Write the nearest-example fallback's examples (src/intake_eval/data/classifier_examples.tsv) from
the probe corpus's TUNING part only.

    .venv/bin/python scripts/export_classifier_examples.py

The held-out part (tests/classifier_probes.py) is never shipped: it measures how the classifier does
on wordings it has never seen, so none of its rows may enter the package (tests/test_neighbours.py checks).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from intake_eval.catalog.neighbours import EXAMPLES_PATH, HEADER  # noqa: E402
from tests.classifier_probes import load_probes  # noqa: E402


def main() -> None:
    rows = [
        f"{probe.id}\t{probe.text}\t{','.join(sorted(probe.expected))}"
        for probe in load_probes()
        if probe.part == "tuning"
    ]
    EXAMPLES_PATH.write_text("\n".join([*HEADER, *rows]) + "\n", encoding="utf-8")
    print(f"{len(rows)} tuning examples -> {EXAMPLES_PATH.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
