"""Matplotlib charts rendered to inline SVG (Agg backend, colour-blind-safe palettes).

Sequential data uses cividis; categorical series use the Okabe–Ito palette. Every chart carries
its units and n in the axis labels or title.
"""

from __future__ import annotations

import io
import math
from typing import Any

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
QTYPE_COLOURS = {
    "closed_hypothesis": "#0072B2",
    "open": "#56B4E9",
    "clarifying": "#009E73",
    "treatment_planning": "#D55E00",
    "other": "#BBBBBB",
}
FONT = {"font.family": "DejaVu Sans", "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
        "svg.fonttype": "none", "svg.hashsalt": "intake-eval"}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(FONT)
    return plt


FIGURE_SINK: list | None = None  # `report --figures`: (inline svg, open figure) of every chart drawn


def to_svg(fig) -> str:
    plt = _plt()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.find("<svg"):]  # drop the XML prolog and doctype: the SVG sits inline in HTML
    text = text.replace("<svg ", '<svg class="chart" ', 1)
    text = text.replace('target="_blank"', "")  # cell links stay on the page: they filter its transcript viewer
    if FIGURE_SINK is not None:
        FIGURE_SINK.append((text, fig))  # kept open: written again as standalone files
    else:
        plt.close(fig)
    return text


def heatmap(values, counts, *, title: str, row_labels: list[str], col_labels: list[str],
            row_marks: list[str] | None = None, cbar_label: str = "mean active coverage (%)",
            links: list[list[str | None]] | None = None) -> str:
    """values/counts: 2-D lists (rows × cols) with None for empty cells; values in 0..1.
    ``links`` (same shape): a cell with a link becomes an <a> in the SVG (a clear square over it)."""
    import numpy as np
    from matplotlib.patches import Rectangle

    plt = _plt()
    rows, cols = len(row_labels), len(col_labels)
    data = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
    width = min(3.2 + 1.15 * cols, 16)
    height = 1.2 + 0.32 * rows
    fig, ax = plt.subplots(figsize=(width, height))
    cmap = plt.get_cmap("cividis").with_extremes(bad="#f2f2f2")
    image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i in range(rows):
        for j in range(cols):
            value = data[i, j]
            if math.isnan(value):
                ax.text(j, i, "–", ha="center", va="center", color="#888", fontsize=8)
                continue
            colour = "white" if value < 0.55 else "black"
            n = counts[i][j] if counts else None
            label = f"{value * 100:.0f}" + (f"\nn={n}" if n is not None and rows <= 40 else "")
            ax.text(j, i, label, ha="center", va="center", color=colour, fontsize=7.5, linespacing=0.95)
            if links and links[i][j]:
                hit = Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=(1, 1, 1, 0), edgecolor="none", zorder=5)
                hit.set_url(links[i][j])
                ax.add_patch(hit)
    ax.set_xticks(range(cols), labels=col_labels, rotation=25 if cols > 3 else 0, ha="right" if cols > 3 else "center")
    ticks = [f"{label}  {mark}".rstrip() for label, mark in zip(row_labels, row_marks or [""] * rows)]
    ax.set_yticks(range(rows), labels=ticks)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(title, loc="left")
    bar = fig.colorbar(image, ax=ax, fraction=0.035, pad=0.02)
    bar.set_label(cbar_label)
    bar.set_ticks([0, 0.25, 0.5, 0.75, 1])
    bar.set_ticklabels(["0", "25", "50", "75", "100"])
    return to_svg(fig)


CI_OVER_PROFILES = "95% CI over profiles"


def trajectories(series: dict[str, dict[str, Any]], *, max_turn: int, ci_words: str = CI_OVER_PROFILES) -> str:
    """series: arm -> {'turns': [...], 'mean': [...], 'n': int} (optional 'lo'/'hi' draw a band)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    markers = "osD^vP*X"
    for index, (arm, line) in enumerate(series.items()):
        colour = OKABE_ITO[index % len(OKABE_ITO)]
        turns = line["turns"]
        ax.plot(turns, [m * 100 for m in line["mean"]], color=colour, marker=markers[index % len(markers)],
                markersize=3.5, linewidth=1.8, label=f"{arm} (n={line['n']})")
        if line.get("lo") and line.get("hi"):
            ax.fill_between(turns, [v * 100 for v in line["lo"]], [v * 100 for v in line["hi"]], color=colour,
                            alpha=0.15, linewidth=0)
    ax.set_xlim(0, max_turn)
    ax.set_ylim(0, 100)
    ax.set_xticks(range(max_turn + 1))
    ax.set_xlabel("clinician turn (0 = patient's opening)")
    ax.set_ylabel("cumulative active coverage (%)")
    ax.grid(axis="y", color="#e5e5e5", linewidth=0.8)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(frameon=False, loc="upper left", fontsize=8)
    banded = any(line.get("lo") for line in series.values())
    ax.set_title("Hidden domains surfaced by turn (mean over conversations"
                 + (f"; shaded: {ci_words})" if banded else ")"), loc="left")
    return to_svg(fig)


def question_mix(mixes: dict[str, dict[str, Any]], *, qtypes: list[str], max_turn: int) -> str:
    """mixes: arm -> {'turns': [...], 'shares': {qtype: [...]}, 'n': int}: small multiples of stacked bars."""
    plt = _plt()
    arms = list(mixes)
    cols = min(len(arms), 3) or 1
    rows = max(1, math.ceil(len(arms) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.5 * rows), squeeze=False, sharey=True)
    for index, arm in enumerate(arms):
        ax = axes[index // cols][index % cols]
        mix = mixes[arm]
        bottom = [0.0] * len(mix["turns"])
        for qtype in qtypes:
            shares = [s * 100 for s in mix["shares"].get(qtype, [0.0] * len(mix["turns"]))]
            ax.bar(mix["turns"], shares, bottom=bottom, width=0.85, color=QTYPE_COLOURS.get(qtype, "#999"),
                   label=qtype.replace("_", " "), linewidth=0)
            bottom = [b + s for b, s in zip(bottom, shares)]
        ax.set_title(f"{arm} (n={mix['n']})", loc="left", fontsize=9)
        ax.set_xlim(0.4, max_turn + 0.6)
        ax.set_ylim(0, 100)
        ax.set_xticks(range(1, max_turn + 1, 1 if max_turn <= 12 else 2))
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_xlabel("clinician turn")
        if index % cols == 0:
            ax.set_ylabel("share of turns (%)")
    for index in range(len(arms), rows * cols):
        axes[index // cols][index % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(qtypes), frameon=False, bbox_to_anchor=(0.5, -0.06))
    fig.tight_layout()
    return to_svg(fig)


def forest(rows: list[dict[str, Any]], *, title: str, ci_words: str = CI_OVER_PROFILES) -> str:
    """Mean active coverage with 95% CI per arm: rows [{'label', 'mean', 'lo', 'hi', 'n'}]."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.2, 0.9 + 0.38 * len(rows)))
    for index, row in enumerate(rows):
        y = len(rows) - 1 - index
        colour = OKABE_ITO[index % len(OKABE_ITO)]
        if row["lo"] is not None and row["hi"] is not None:
            ax.plot([row["lo"] * 100, row["hi"] * 100], [y, y], color=colour, linewidth=2.2, solid_capstyle="butt")
        if row["mean"] is not None:
            ax.plot(row["mean"] * 100, y, "o", color=colour, markersize=6)
            ax.text(101.5, y, f"{row['mean'] * 100:.1f}%", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), labels=[f"{r['label']} (n={r['n']})" for r in reversed(rows)])
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"mean active coverage of hidden domains (%), {ci_words}")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.8)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.set_title(title, loc="left")
    return to_svg(fig)


def survival_panels(panels: dict[str, dict[str, dict[str, Any]]], *, max_turn: int, ylabel: str) -> str:
    """Kaplan–Meier step curves side by side: panels title -> arm -> {'turns', 'survival', 'lo', 'hi', 'n'}
    (values in 0..1; a None in lo/hi leaves a gap in the 95 % band). An arm keeps its colour in every
    panel, so one legend serves them all; each title carries its own n."""
    plt = _plt()
    from matplotlib.lines import Line2D

    arms = list(dict.fromkeys(arm for series in panels.values() for arm in series))
    colours = {arm: OKABE_ITO[index % len(OKABE_ITO)] for index, arm in enumerate(arms)}
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.4), squeeze=False, sharey=True)
    for column, (title, series) in enumerate(panels.items()):
        ax = axes[0][column]
        for arm, line in series.items():
            colour = colours[arm]
            turns = line["turns"]
            ax.step(turns, [v * 100 for v in line["survival"]], where="post", color=colour, linewidth=1.8, label=arm)
            lo = [math.nan if v is None else v * 100 for v in line["lo"]]
            hi = [math.nan if v is None else v * 100 for v in line["hi"]]
            ax.fill_between(turns, lo, hi, step="post", color=colour, alpha=0.15, linewidth=0)
        ax.set_xlim(0, max_turn)
        ax.set_ylim(0, 102)
        ax.set_xticks(range(0, max_turn + 1, 1 if max_turn <= 12 else 2))
        ax.set_xlabel("clinician turn")
        if column == 0:
            ax.set_ylabel(ylabel)
        ax.grid(axis="y", color="#e5e5e5", linewidth=0.8)
        ax.spines[["top", "right"]].set_visible(False)
        sizes = [line["n"] for line in series.values()]
        ax.set_title(f"{title} (n = {sizes[0]} per arm)" if len(set(sizes)) == 1
                     else f"{title} (n = {' / '.join(map(str, sizes))})", loc="left", fontsize=9)
    fig.tight_layout()
    handles = [Line2D([], [], color=colours[arm], linewidth=1.8) for arm in arms]
    fig.legend(handles, arms, loc="upper center", ncol=min(len(arms), 3), frameon=False, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    return to_svg(fig)


def domain_rates(domains: dict[str, Any], labels: dict[str, str], ci_words: str = CI_OVER_PROFILES) -> str:
    """Each hidden domain's active-coverage rate per arm with its 95 % interval (a dot plot):
    domains = {'domains', 'arms', 'values', 'counts', 'ci_low', 'ci_high'} (rows domains × cols arms)."""
    plt = _plt()
    names, arms = domains["domains"], domains["arms"]
    fig, ax = plt.subplots(figsize=(7.2, 1.0 + 0.34 * len(names) * max(1, min(len(arms), 3)) / 1.5))
    step, labelled = 0.7 / max(len(arms), 1), set()
    for j, arm in enumerate(arms):
        colour = OKABE_ITO[j % len(OKABE_ITO)]
        for i, _ in enumerate(names):
            rate, low, high = domains["values"][i][j], domains["ci_low"][i][j], domains["ci_high"][i][j]
            if rate is None:
                continue
            y = len(names) - 1 - i + 0.35 - (j + 0.5) * step
            if low is not None and high is not None:
                ax.plot([low * 100, high * 100], [y, y], color=colour, linewidth=1.6, solid_capstyle="butt")
            ax.plot(rate * 100, y, "o", color=colour, markersize=4, label=None if arm in labelled else arm, clip_on=False)
            labelled.add(arm)
    ax.set_yticks(range(len(names)), labels=[labels.get(d, d) for d in reversed(names)])
    ax.set_xlim(-1, 101)
    ax.set_xlabel(f"conversations actively surfacing the domain (%), {ci_words}")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.8)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.06 - 0.5 / max(len(names), 1)),
              ncol=min(len(arms), 4), fontsize=8)
    ax.set_title("Hidden domain actively surfaced, by clinician (95% CI)", loc="left")
    return to_svg(fig)
