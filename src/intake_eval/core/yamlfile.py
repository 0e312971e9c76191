"""The one YAML reader: safe loading that refuses a key given twice in one mapping (plain YAML
keeps the last one silently, so `clinicians:` twice would drop the first list), with every
problem as one line naming the file, the line and the key.

Anchors and aliases are bounded: a file whose aliases would expand past ``MAX_YAML_NODES`` values
(a "billion laughs" bomb: a dozen lines that unfold into gigabytes when a config is hashed or
copied) or that refers to itself is refused as one line before anything is built from it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.limits import MAX_YAML_NODES


class YamlError(IntakeEvalError):
    """A YAML file that cannot be read as intended (syntax, duplicate key)."""


@lru_cache(maxsize=1)
def _loader() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    # The base is chosen at run time (libyaml's C loader when it is built), so the checker cannot see it.
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


class AliasBomb(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _expanded_size(root: Any) -> int:
    """How many values the document holds once every alias is unfolded (shared nodes counted per use)."""
    import yaml

    def children(node: Any) -> list[Any]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    size: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if expanded:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in children(node))
            if size[key] > MAX_YAML_NODES:
                raise AliasBomb(f"its aliases unfold into more than {MAX_YAML_NODES:,} values")
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise AliasBomb("an alias refers to the value that contains it")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children(node) if id(child) not in size)
    return size[id(root)]


def _load_bounded(text: str) -> Any:
    loader = _loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(text: str, source: str | Path) -> Any:
    """YAML text → data; a syntax error, a duplicate key or an alias bomb raises YamlError naming ``source``."""
    import yaml

    try:
        return _load_bounded(text)
    except AliasBomb as bomb:
        raise YamlError(f"{source}: refused: {bomb.reason} (anchors and aliases are limited)") from None
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
