"""The one YAML reader: safe loading that refuses a key given twice in one mapping (plain YAML
keeps the last one silently, so `clinicians:` twice would drop the first list), with every
problem as one line naming the file, the line and the key."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError


class YamlError(IntakeEvalError):
    """A YAML file that cannot be read as intended (syntax, duplicate key)."""


@lru_cache(maxsize=1)
def _loader() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class NoDuplicatesLoader(base):  # type: ignore[misc, valid-type]
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                first_line: dict[Any, int] = {}
                for key_node, _value in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # `<<:` merges are meant to be overridden
                    key = self.construct_object(key_node, deep=True)
                    try:
                        hash(key)
                    except TypeError:
                        continue  # an unhashable key is reported by the constructor itself
                    line = key_node.start_mark.line + 1
                    if key in first_line:
                        raise DuplicateKey(key, line, first_line[key])
                    first_line[key] = line
            return super().construct_mapping(node, deep=deep)

    return NoDuplicatesLoader


class DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first: int):
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


def parse_yaml(text: str, source: str | Path) -> Any:
    """YAML text → data; a syntax error or a duplicate key raises YamlError naming ``source``."""
    import yaml

    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - the loader derives from SafeLoader
    except DuplicateKey as dup:
        raise YamlError(f"{source}: line {dup.line}: duplicate key '{dup.key}' (first at line {dup.first}); "
                        "keep one") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        reason = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise YamlError(f"{source}: {where}YAML syntax error ({reason})") from None


def read_yaml(path: Path, missing: str | None = None) -> Any:
    """Read and parse a YAML file. ``missing``: the message for a file that does not exist."""
    if missing is not None and not path.exists():
        raise IntakeEvalError(missing)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise IntakeEvalError(f"{path}: not UTF-8 text") from None
    return parse_yaml(text, path)
