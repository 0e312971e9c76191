"""The report's optional sections are one explicit, ordered list: every optional metrics table the report
reads has an entry, no name is listed twice, and the page shows them in the listed order."""

from __future__ import annotations

from intake_eval.report import section_list
from intake_eval.report.html import Section
from intake_eval.report.load import OPTIONAL_TABLES


def test_every_optional_table_is_listed_once():
    names = [name for name, _ in section_list.SECTIONS]
    assert len(names) == len(set(names))
    assert set(OPTIONAL_TABLES) <= set(names)


def test_sections_render_in_the_listed_order_and_skip_what_the_run_lacks():
    class Data:  # the one attribute the plain-table fallback reads
        tables: dict = {}

    listed = section_list.SECTIONS
    try:
        section_list.SECTIONS = (("second", lambda data: Section("b", "B", "")), ("none", lambda data: None),
                                 ("first", lambda data: Section("a", "A", "")))
        shown = [s.id for s in section_list.optional_sections(Data())]
    finally:
        section_list.SECTIONS = listed
    assert shown == ["b", "a"]  # listed order; unlisted optional tables with no rows are not shown
