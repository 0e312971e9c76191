"""Shorthand of the classifier lexicon, expanded into plain regular expressions when it loads.

- ``word~`` stands for the word's regular inflections: ``race~`` -> race, races, raced, racing;
  ``worry~`` -> worry, worries, worried, worrying; ``stop~`` -> stop, stops, stopped, stopping.
  Irregular forms (felt, ate, caught) are written out.
- ``<NAME>`` stands for the named word group (a list of synonyms, each may use ``~``), so one
  list of, say, pain words serves every rule that needs one.
- A proximity rule ``[A, B, N]`` matches A and B, in either order, with at most N words between
  them in one sentence ("has your back been hurting for months" is <PAIN> near <LONG_TIME>).

Expansion is pure text substitution, so the compiled patterns stay ordinary regexes: matching
stays deterministic and each match is still a phrase of the utterance that `classify` can show.
"""

from __future__ import annotations

import re

INFLECTED_WORD = re.compile(r"\b([a-z]+)~")
GROUP_REFERENCE = re.compile(r"<([A-Z][A-Z0-9_]*)>")
_VOWELS = set("aeiou")


def inflections(word: str) -> list[str]:
    """The word and its regular -s, -ed and -ing forms (both spellings where doubling is uncertain)."""
    if word.endswith("e") and not word.endswith("ee"):
        forms = [word, word + "s", word + "d", word[:-1] + "ing"]
    elif word.endswith("y") and len(word) > 2 and word[-2] not in _VOWELS:
        forms = [word, word[:-1] + "ies", word[:-1] + "ied", word + "ing"]
    elif word.endswith(("s", "sh", "ch", "x", "z")):
        forms = [word, word + "es", word + "ed", word + "ing"]
    else:
        forms = [word, word + "s", word + "ed", word + "ing"]
        short_closed = len(word) <= 4 and word[-1] not in _VOWELS | set("wxy") and word[-2] in _VOWELS and word[-3:-2] not in _VOWELS
        if short_closed:  # cut -> cutting, stop -> stopped
            forms += [word + word[-1] + "ed", word + word[-1] + "ing"]
    return sorted(set(forms), key=lambda form: (-len(form), form))


def _inflect(text: str) -> str:
    return INFLECTED_WORD.sub(lambda match: "(?:" + "|".join(inflections(match.group(1))) + ")", text)


def compile_groups(raw: dict[str, list[str]]) -> dict[str, str]:
    """Group name -> one non-capturing alternation of its (inflected) terms."""
    groups: dict[str, str] = {}
    for name, terms in raw.items():
        if not GROUP_REFERENCE.fullmatch(f"<{name}>") or not terms:
            raise ValueError(f"lexicon group {name!r}: name must be UPPER_CASE with a non-empty list of terms")
        groups[name] = "(?:" + "|".join(_inflect(term) for term in terms) + ")"
    return groups


def expand(pattern: str, groups: dict[str, str]) -> str:
    """A lexicon pattern with its group references and inflection marks spelled out."""

    def group(match: re.Match[str]) -> str:
        if match.group(1) not in groups:
            raise ValueError(f"lexicon pattern {pattern!r}: unknown group <{match.group(1)}>")
        return groups[match.group(1)]

    return _inflect(GROUP_REFERENCE.sub(group, pattern))


def proximity_patterns(rule: list, groups: dict[str, str]) -> list[tuple[str, str]]:
    """The two patterns (one per word order) of a proximity rule [A, B, max words between], each with
    its lead: the side a match starts with, which a match cannot exist without."""
    if not (isinstance(rule, list) and len(rule) == 3 and isinstance(rule[2], int) and rule[2] >= 0):
        raise ValueError(f"lexicon proximity rule {rule!r}: expected [first, second, max words between]")
    first, second = (expand(str(side), groups) for side in rule[:2])
    gap = rf"(?:\W+\w+){{0,{rule[2]}}}?\W+"
    return [
        (rf"\b(?:{first})\b{gap}(?:{second})\b", rf"\b(?:{first})\b"),
        (rf"\b(?:{second})\b{gap}(?:{first})\b", rf"\b(?:{second})\b"),
    ]


def pattern_heads(items: list, need: int) -> set[str] | None:
    """The strings (up to ``need`` characters) every match of a parsed regex sequence starts
    with, or None when a match could start with anything we cannot enumerate."""
    # The stdlib's regex parse tree, used read-only: a private module typeshed does not describe.
    from re import _constants as c  # type: ignore[attr-defined]

    if need == 0 or not items:
        return {""}
    op, av = items[0]
    rest = list(items[1:])
    if op is c.LITERAL:
        tails = pattern_heads(rest, need - 1)
        return None if tails is None else {chr(av) + tail for tail in tails}
    if (op is c.AT and av in (c.AT_BOUNDARY, c.AT_BEGINNING)) or op in (c.ASSERT, c.ASSERT_NOT):
        return pattern_heads(rest, need)
    if op is c.SUBPATTERN:
        return pattern_heads(list(av[3]) + rest, need)
    if op is c.BRANCH:
        options = [pattern_heads(list(branch) + rest, need) for branch in av[1]]
        enumerable = [option for option in options if option is not None]
        return None if len(enumerable) < len(options) else set().union(*enumerable)
    if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] in (0, 1) and av[1] == 1:
        taken = pattern_heads(list(av[2]) + rest, need)
        skipped = pattern_heads(rest, need) if av[0] == 0 else set()
        return None if taken is None or skipped is None else taken | skipped
    if op is c.IN and all(kind is c.LITERAL for kind, _ in av):
        tails = pattern_heads(rest, need - 1)
        return None if tails is None else {chr(code) + tail for _, code in av for tail in tails}
    return None
