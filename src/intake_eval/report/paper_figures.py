"""What the figure files show beyond the page's inline charts: 95 % intervals.

- Trajectories: a band per arm, the bootstrap CI (resampling profiles) of the mean cumulative active
  coverage at each turn, from the primary judge's per-conversation trajectories (the same
  ``figures`` the metrics stage averages, so the band surrounds the page's line).
- Per-domain rates: a dot plot of each hidden domain's active-coverage rate per arm with Wilson
  95 % intervals from metrics/domains.csv counts (conversations of one profile are treated as
  independent there, so the intervals are a lower bound on the uncertainty).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from intake_eval.core.records import Profile
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.metrics.figures import figures
from intake_eval.metrics.reading import iter_judgment_labels
from intake_eval.metrics.stats import bootstrap_mean_ci
from intake_eval.report import charts
from intake_eval.trust.patient_qc import wilson_interval

Arm = tuple[str, str, str]


def trajectory_bands(paths: RunPaths, judge: str | None, arm_labels: dict[Arm, str]) -> dict[str, dict[int, tuple]]:
    """arm label → turn → (ci_low, ci_high) of the mean cumulative coverage."""
    if judge is None or not paths.judge_dir(judge).is_dir():
        return {}
    hidden_of = {p.profile_id: p.hidden_domains for p in iter_records(paths.profiles, Profile)}
    latest: dict[str, tuple[Arm, str, list]] = {}
    for path in sorted(paths.judge_dir(judge).glob("*.jsonl")):
        for judgment, labels in iter_judgment_labels(path):
            latest.pop(judgment.conversation_id, None)
            if not judgment.ok:
                continue
            hidden = hidden_of.get(judgment.profile_id) or sorted({d for t in labels for d in t.domains})
            arm = (judgment.clinician, judgment.condition, judgment.patient_mode)
            latest[judgment.conversation_id] = (arm, judgment.profile_id, figures(labels, hidden).trajectory)
    groups: dict[tuple[Arm, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for arm, profile, trajectory in latest.values():
        for turn, coverage in trajectory:
            if coverage is not None:
                groups[(arm, turn)][profile].append(coverage)
    bands: dict[str, dict[int, tuple]] = defaultdict(dict)
    for (arm, turn), by_profile in sorted(groups.items()):
        if arm in arm_labels:
            estimate = bootstrap_mean_ci(by_profile, seed=f"trajectory-band|{'|'.join(arm)}|{turn}")
            bands[arm_labels[arm]][turn] = (estimate.ci_low, estimate.ci_high)
    return dict(bands)


def with_bands(lines: dict[str, dict[str, Any]], bands: dict[str, dict[int, tuple]]) -> dict[str, dict[str, Any]]:
    """The trajectory lines with 'lo'/'hi' where every turn has an interval."""
    out = {}
    for label, line in lines.items():
        band = bands.get(label, {})
        line = dict(line)
        if band and all(band.get(t, (None, None))[0] is not None for t in line["turns"]):
            line["lo"] = [band[t][0] for t in line["turns"]]
            line["hi"] = [band[t][1] for t in line["turns"]]
        out[label] = line
    return out


def domain_rates(domains: dict[str, Any], labels: dict[str, str]) -> str:
    """Each hidden domain's active-coverage rate per arm with Wilson 95 % intervals (a dot plot)."""
    plt = charts._plt()
    names, arms = domains["domains"], domains["arms"]
    fig, ax = plt.subplots(figsize=(7.2, 1.0 + 0.34 * len(names) * max(1, min(len(arms), 3)) / 1.5))
    step = 0.7 / max(len(arms), 1)
    for j, arm in enumerate(arms):
        colour = charts.OKABE_ITO[j % len(charts.OKABE_ITO)]
        for i, _ in enumerate(names):
            rate, n = domains["values"][i][j], domains["counts"][i][j]
            if rate is None or not n:
                continue
            y = len(names) - 1 - i + 0.35 - (j + 0.5) * step
            low, high = wilson_interval(round(rate * n), n)
            ax.plot([low * 100, high * 100], [y, y], color=colour, linewidth=1.6, solid_capstyle="butt")
            ax.plot(rate * 100, y, "o", color=colour, markersize=4, label=arm if i == 0 else None, clip_on=False)
    ax.set_yticks(range(len(names)), labels=[labels.get(d, d) for d in reversed(names)])
    ax.set_xlim(-1, 101)
    ax.set_xlabel("conversations actively surfacing the domain (%), Wilson 95% CI")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.8)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.06 - 0.5 / len(names)), ncol=min(len(arms), 4),
              fontsize=8)
    ax.set_title("Hidden domain actively surfaced, by clinician", loc="left")
    return charts.to_svg(fig)
