"""Realised hidden-domain rates against the stated design, over many profiles (stages 1-5 only:
the same draws `intake-eval generate --n N --seed S` makes, without rendering).

Prints, per hidden-count mode, the largest |realised − design| (seed) or |realised − cited|
(literature) over every phenotype × optional domain (among profiles where it is not presenting),
the rates outside ±tolerance, the realised hidden-count distribution, and the number of profiles in
which a domain was given a symptom that describes another hidden domain (meaning-level dedup).

    .venv/bin/python scripts/check_sampling_design.py --n 18000 --seed 11
"""

from __future__ import annotations

import argparse
from collections import Counter

from intake_eval.catalog.load import load_catalog
from intake_eval.generate.rates import rate_table
from intake_eval.generate.sampling import plan_phenotypes, sample_profile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=18_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--mode", default="stratified", choices=["stratified", "weighted"])
    parser.add_argument("--hidden-count", default="both", choices=["seed", "literature", "both"])
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args()
    catalog = load_catalog()
    plan = plan_phenotypes(catalog, args.n, args.mode, args.seed)
    failed = False
    for hidden_count in (["seed", "literature"] if args.hidden_count == "both" else [args.hidden_count]):
        drawn, counts, leaks, opening_leaks = [], Counter(), 0, 0
        for index, phenotype in enumerate(plan):
            profile = sample_profile(catalog, phenotype, index, args.seed, hidden_count=hidden_count)
            hidden = set(profile.hidden_domains)
            drawn.append((phenotype, profile.presenting.domain, profile.hidden_domains))
            counts[len(hidden)] += 1
            leaked = opening = False
            for draw in [profile.presenting, *profile.hidden]:
                describes = {t for sid in draw.symptom_ids
                             for s in catalog.domains[draw.domain].symptoms if s.id == sid for t in s.describes}
                if describes & (hidden - {draw.domain}):
                    leaked = True
                    opening = opening or draw is profile.presenting
            leaks += leaked
            opening_leaks += opening
        rows = rate_table(catalog, hidden_count, drawn)
        target = "design" if hidden_count == "seed" else "cited"
        gaps = [(abs(float(r["realised"]) - float(r[target])), r) for r in rows if r["realised"] != ""]
        worst, row = max(gaps, key=lambda item: item[0])
        outside = [r for gap, r in gaps if gap > args.tolerance]
        print(f"--hidden-count {hidden_count}: {args.n} {args.mode} profiles, seed {args.seed}")
        print(f"  {len(gaps)} phenotype × domain rates; max |realised − {target}| = {worst:.4f} "
              f"({row['phenotype']} / {row['domain']}: realised {row['realised']}, {target} {row[target]}, "
              f"n={row['n_eligible']}); mean {sum(g for g, _ in gaps) / len(gaps):.4f}")
        print(f"  outside ±{args.tolerance}: {len(outside)}"
              + "".join(f"\n    {r['phenotype']} / {r['domain']}: {r['realised']} vs {r[target]}" for r in outside))
        total = sum(counts.values())
        print("  hidden-count distribution: " + ", ".join(f"{k}: {v / total:.3f}" for k, v in sorted(counts.items())))
        print(f"  profiles with a symptom describing another hidden domain: {leaks} (in the presenting domain: "
              f"{opening_leaks})")
        failed = failed or bool(outside) or bool(leaks)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
