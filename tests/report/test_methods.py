"""The report's methods section (index.html and summary.md) on real run folders: the prompt texts from
the run folder, the sampling table when the run folder has one (and a plain statement when not), the
models, turn caps, label definitions and the interval of each figure; every value escaped."""

from __future__ import annotations

import csv
import html
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths
from intake_eval.metrics.intervals import declared_intervals
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.commands.test_judge import _models_file, _run_folder
from tests.judge.test_judging import _valid_answer
from tests.runner.test_prompt_snapshot import outside_prompts  # noqa: F401  (fixture)

# The columns generate writes (phenotype × optional domain), values as it rounds them.
RATES = [
    {"phenotype": "depression_complex", "domain": "insomnia", "source": "Ohayon 2003", "cited": "0.4",
     "design": "0.523810", "lift": "1.309524", "realised": "0.5", "n_eligible": "36", "n_included": "18",
     "hidden_count": "seed"},
    {"phenotype": "depression_complex", "domain": "alcohol_use", "source": "Grant <2004> & co", "cited": "0.2",
     "design": "0.261905", "lift": "1.309524", "realised": "0.305556", "n_eligible": "36", "n_included": "11",
     "hidden_count": "seed"},
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> RunPaths:
    root = tmp_path_factory.mktemp("methods") / "demo"
    result = CliRunner().invoke(app, ["demo", "--run-dir", str(root)])
    assert result.exit_code == 0, result.output
    return RunPaths(root)


def _methods_html(paths: RunPaths) -> str:
    page = paths.report_index.read_text(encoding="utf-8")
    match = re.search(r'<section class="card hook" id="methods">(.*?)</section>', page, re.S)
    assert match, "no methods section"
    return match.group(1)


def _methods_markdown(paths: RunPaths) -> str:
    text = paths.report_summary.read_text(encoding="utf-8")
    assert "## Methods" in text
    return text[text.index("## Methods"):]


def test_demo_methods_quote_every_rendered_prompt_and_template_from_the_run_folder(demo):
    manifest = json.loads(demo.manifest.read_text(encoding="utf-8"))
    section, markdown = _methods_html(demo), _methods_markdown(demo)
    texts = manifest["prompt_texts"]
    assert {"clinician.minimal", "patient.tracked", "patient.opening_instruction", "formulation",
            "nudge.review"} <= set(texts["rendered"])
    shown = [html.unescape(block) for block in re.findall(r"<pre class='prompt-text'>(.*?)</pre>", section, re.S)]
    for entry in [*texts["rendered"].values(), *texts["templates"].values()]:
        text = (demo.root / entry["file"]).read_text(encoding="utf-8")
        assert text in shown  # verbatim, once unescaped
        assert f"```text\n{text}\n```" in markdown
    assert "<details class='prompt'>" in section  # collapsible
    assert "profile P00000" in section


def test_demo_methods_state_models_turns_labels_and_intervals(demo):
    section, markdown = _methods_html(demo), _methods_markdown(demo)
    for text in (markdown, html.unescape(section)):
        assert "up to 12 clinician turns" in text
        assert "offline/screener" in text and "offline/judge (offline/judge, per-turn)" in text
        assert "asked_about (per domain): true ONLY when" in text  # label definitions from the judge rules
        assert declared_intervals(repeated=False)["headline"] in text
        assert re.search(r"intake-eval \S+ from source revision [0-9a-f]{40}", text)


def _report(paths: RunPaths) -> tuple[str, str]:
    result = CliRunner().invoke(app, ["report", "--run-dir", str(paths.root)])
    assert result.exit_code == 0, result.output
    return _methods_html(paths), _methods_markdown(paths)


def test_sampling_table_is_rendered_when_the_run_folder_has_one_and_said_missing_when_not(demo, tmp_path):
    table = demo.root / "sampling_rates.csv"
    kept = tmp_path / "sampling_rates.csv"
    if table.exists():  # generate writes one: set it aside to see an older run folder
        table.replace(kept)
    try:
        section, markdown = _report(demo)
        for text in (markdown, html.unescape(section)):
            assert "This run folder has no sampling table" in text and "Optional domain" not in text
        with open(table, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(RATES[0]))
            writer.writeheader()
            writer.writerows(RATES)
        section, markdown = _report(demo)
    finally:
        table.unlink(missing_ok=True)
        if kept.exists():
            kept.replace(table)
    assert "has no sampling table" not in section and "has no sampling table" not in markdown
    assert "<td class='l'>Grant &lt;2004&gt; &amp; co</td>" in section and "Grant <2004>" not in section
    assert ("| Phenotype | Optional domain | Cited rate | Source | Design probability | Lift (design ÷ cited) | "
            "Realised rate | n included | n eligible |") in markdown
    assert "| depression_complex | alcohol_use | 0.20 | Grant <2004> & co | 0.26 | 1.31 | 0.31 | 11 | 36 |" in markdown
    assert "| depression_complex | insomnia | 0.40 | Ohayon 2003 | 0.52 | 1.31 | 0.50 | 18 | 36 |" in markdown
    assert "Number of hidden domains: the seed study's design, one presenting and 4–5 hidden domains." in markdown


def test_a_provider_judge_is_recorded_with_the_rules_it_was_sent(tmp_path):
    paths = _run_folder(tmp_path)
    with FakeOpenAIServer(lambda body, i: Reply(content=_valid_answer(body))) as server:
        result = CliRunner().invoke(app, ["judge", "--judge", "fakejudge", "--models", _models_file(tmp_path, server),
                                          "--run-dir", str(paths.root)])
        assert result.exit_code == 0, result.output
        sent = [body["messages"][0]["content"] for body in server.requests]
    manifest = json.loads(paths.manifest.read_text(encoding="utf-8"))
    entry = manifest["prompt_texts"]["rendered"]["judge.rules"]
    rules = (paths.root / entry["file"]).read_text(encoding="utf-8")
    assert sent and all(prompt.startswith(rules) for prompt in sent)  # every judge prompt opens with them
    report = CliRunner().invoke(app, ["report", "--run-dir", str(paths.root)])
    assert report.exit_code == 0, report.output
    assert "fakejudge (openai/fake-judge, per-turn)" in html.unescape(_methods_html(paths))
    assert "| judge | fakejudge | openai/fake-judge | 0.0 | 2000 | no |" in _methods_markdown(paths)


def test_prompt_text_reaches_the_page_escaped(tmp_path, outside_prompts):  # noqa: F811
    payload = "Ask first. <script>window.pwned=1</script><img src=x onerror=alert(1)> & done"
    (outside_prompts / "clinician_custom.j2").write_text(payload, encoding="utf-8")
    run_dir = tmp_path / "run"
    runner = CliRunner()
    for args in (["generate", "--n", "1", "--seed", "2", "--generator", "offline/generator"],
                 ["run", "--clinician", "offline/screener", "--patient", "offline/patient", "--condition", "custom",
                  "--turns", "2"],
                 ["judge", "--judge", "offline/judge"], ["report"]):
        result = runner.invoke(app, [*args, "--run-dir", str(run_dir)])
        assert result.exit_code == 0, result.output
    page = Path(run_dir / "report" / "index.html").read_text(encoding="utf-8")
    assert "<script>window.pwned" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt; &amp; done" in page
