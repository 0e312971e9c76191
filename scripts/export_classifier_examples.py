"""Write the nearest-example fallback's examples (src/intake_eval/data/classifier_examples.tsv) from
the probe corpus's TUNING part only.

    .venv/bin/python scripts/export_classifier_examples.py

The held-out part (tests/helpers/classifier_probes.py) is never shipped: it measures how the classifier does
on wordings it has never seen, so none of its rows may enter the package, nor a tuning item whose text
contains a held-out item's wording (a compound question holding a shorter held-out one); the script
prints how many such items it leaves out, never their text. tests/catalog/test_neighbours.py checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from intake_eval.catalog.neighbours import EXAMPLES_PATH, HEADER  # noqa: E402
from tests.helpers.classifier_probes import load_probes, shippable_examples  # noqa: E402


def main() -> None:
    probes = load_probes()
    shipped = shippable_examples(probes)
    rows = [f"{probe.id}\t{probe.text}\t{','.join(sorted(probe.expected))}" for probe in shipped]
    EXAMPLES_PATH.write_text("\n".join([*HEADER, *rows]) + "\n", encoding="utf-8")
    left_out = sum(probe.part == "tuning" for probe in probes) - len(shipped)
    print(f"{len(rows)} tuning examples -> {EXAMPLES_PATH.relative_to(ROOT)} "
          f"({left_out} tuning items left out for holding a held-out wording)")


if __name__ == "__main__":
    main()
