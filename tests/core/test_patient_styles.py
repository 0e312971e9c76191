"""The declared patient behaviour styles: names checked once, a prompt fragment for every non-default style."""

from __future__ import annotations

import pytest

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.patient_styles import DEFAULT_STYLE, STYLES, check_styles, style_prompt_names
from intake_eval.core.prompts import template_path


def test_the_documented_set_is_declared_with_a_disclosure_definition_and_a_length_target():
    assert {"forthcoming", "guarded", "terse", "verbose-tangential", "vague-recall"} <= set(STYLES)
    for style in STYLES.values():
        assert style.disclosure and style.summary and style.words_source
        low, high = style.words
        assert 0 < low < high


def test_every_style_but_the_default_has_its_prompt_fragment():
    assert STYLES[DEFAULT_STYLE].fragment is None
    for name in STYLES:
        if name != DEFAULT_STYLE:
            assert template_path(f"_patient_style_{name}").is_file()
    assert style_prompt_names(["forthcoming", "guarded"]) == ["_patient_style_guarded"]


def test_styles_are_checked_in_order_with_the_default_when_none_is_given():
    assert check_styles([]) == [DEFAULT_STYLE]
    assert check_styles(["guarded", "forthcoming"]) == ["guarded", "forthcoming"]
    with pytest.raises(IntakeEvalError, match="--patient-style shy: unknown patient style"):
        check_styles(["shy"])
    with pytest.raises(IntakeEvalError, match="given twice"):
        check_styles(["terse", "terse"])
