"""Report section "Methods": text to paste into a paper, from the run folder alone (``methods``).

HTML (report/index.html): paragraphs and tables, each prompt's exact text in a collapsible block;
every value is escaped. Markdown (``summary_markdown``, for summary.md): the same, prompts in fenced
blocks whose fence is longer than any backtick run in the text, so a prompt is quoted verbatim.
"""

from __future__ import annotations

import re
from typing import Any

from intake_eval.report.html import Section
from intake_eval.report.load import RunData
from intake_eval.report.methods import MODEL_HEADER, Methods, PromptText, collect_methods
from intake_eval.report.summary import _table

TITLE = "Methods"
SECTION_ID = "methods"
LEDE = ("Written to be quoted: everything below is read from this run folder (manifest, prompts/ and the sampling "
        "table), so it states what this run did.")


def _esc(value: Any) -> str:
    from markupsafe import escape

    return str(escape(str(value)))


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th class='l'>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td class='l'>{_esc(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<div class='scroll'><table class='data'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _paragraphs(sentences: list[str]) -> str:
    return "".join(f"<p>{_esc(sentence)}</p>" for sentence in sentences)


def _prompt_html(prompt: PromptText) -> str:
    note = f" — {_esc(prompt.note)}" if prompt.note else ""
    problem = f"<p class='lede'><b>{_esc(prompt.problem)}</b></p>" if prompt.problem else ""
    text = _esc(prompt.text) if prompt.text is not None else "(missing)"
    return (f"<details class='prompt'><summary><b>{_esc(prompt.title)}</b>{note} <code>{_esc(prompt.file)}</code>"
            f"</summary>{problem}<pre class='prompt-text'>{text}</pre></details>")


def methods_html(methods: Methods) -> str:
    parts = [f"<p class='lede'>{_esc(LEDE)}</p>", "<h3>Simulated patients and sampling design</h3>",
             _paragraphs(methods.sampling)]
    if methods.rates is not None:
        parts.append(f"<details><summary>Cited, design and realised rates ({len(methods.rates)} rows)</summary>"
                     f"{_html_table(methods.rate_header, methods.rates)}</details>")
    parts += ["<h3>Models</h3>", _html_table(MODEL_HEADER, methods.models) if methods.models else "",
              _paragraphs(methods.model_notes), "<h3>Interview</h3>", _paragraphs(methods.interview),
              "<h3>Judging</h3>", _paragraphs(methods.judging)]
    if methods.label_definitions:
        parts.append(f"<p>Label definitions, as given to the judges:</p><pre class='prompt-text'>"
                     f"{_esc(methods.label_definitions)}</pre>")
    parts.append("<h3>Prompts</h3>")
    if methods.prompts or methods.templates:
        parts.append("<p>Each role's prompt as sent (a prompt that holds the profile is shown for one example "
                     "profile), then every template the run used, verbatim.</p>")
        parts += [_prompt_html(prompt) for prompt in methods.prompts]
        parts.append("<details><summary>Templates (" + str(len(methods.templates)) + ")</summary>"
                     + "".join(_prompt_html(t) for t in methods.templates) + "</details>")
    else:
        parts.append("<p>This run folder keeps no prompt text (made before intake-eval kept prompt texts); its "
                     "manifest has the templates' hashes only.</p>")
    parts += ["<h3>Intervals</h3>",
              _html_table(["Figure", "Interval"], [[figure, text] for figure, text in methods.intervals.items()]),
              "<h3>Software</h3>", _paragraphs([methods.software])]
    return "".join(parts)


def methods_section(data: RunData) -> Section | None:
    return Section(SECTION_ID, TITLE, methods_html(collect_methods(data)))


def _fenced(text: str) -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", text, fence]


def _prompt_markdown(prompt: PromptText) -> list[str]:
    note = f" — {prompt.note}" if prompt.note else ""
    lines = [f"**{prompt.title}**{note} (`{prompt.file}`)", ""]
    if prompt.problem:
        lines += [f"> {prompt.problem}", ""]
    return lines + _fenced(prompt.text if prompt.text is not None else "(missing)") + [""]


def methods_markdown(methods: Methods) -> list[str]:
    out = [f"## {TITLE}", "", LEDE, "", "### Simulated patients and sampling design", ""]
    out += [sentence for item in methods.sampling for sentence in (item, "")]
    if methods.rates is not None:
        out += _table(methods.rate_header, methods.rates, ["l"] * len(methods.rate_header)) + [""]
    out += ["### Models", ""]
    if methods.models:
        out += _table(MODEL_HEADER, methods.models, ["l"] * len(MODEL_HEADER)) + [""]
    out += [line for note in methods.model_notes for line in (note, "")]
    out += ["### Interview", ""] + [line for item in methods.interview for line in (item, "")]
    out += ["### Judging", ""] + [line for item in methods.judging for line in (item, "")]
    if methods.label_definitions:
        out += ["Label definitions, as given to the judges:", ""] + _fenced(methods.label_definitions) + [""]
    out += ["### Prompts", ""]
    if methods.prompts or methods.templates:
        for prompt in methods.prompts:
            out += _prompt_markdown(prompt)
        out += ["#### Templates", ""]
        for template in methods.templates:
            out += _prompt_markdown(template)
    else:
        out += ["This run folder keeps no prompt text (made before intake-eval kept prompt texts).", ""]
    out += ["### Intervals", ""]
    out += _table(["Figure", "Interval"], [[figure, text] for figure, text in methods.intervals.items()], ["l", "l"])
    out += ["", "### Software", "", methods.software, ""]
    return out


def summary_markdown(data: RunData) -> list[str]:
    return methods_markdown(collect_methods(data))
