"""Config problems for people: ``ConfigError`` and pydantic's errors turned into one line each.

Every line names the file, the field path, the value and the fix:
``<file>: <field>: <problem>; fix: <what to do>``. A rule of the schema raises a ``ValueError``
whose text is the problem and fix (``@path: ...`` where it names a field below the model that
ran it); pydantic's own constraints (``Field(ge=..., le=...)``) get a generic fix, followed by
the field's ``description`` where it says what the limit means.
"""

from __future__ import annotations

import difflib
import functools
import re
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """One or more config problems; ``str()`` gives one line per problem."""

    def __init__(self, lines: Sequence[str]):
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


def _field_path(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _join(base: str, relative: str) -> str:
    """``fleets[0]`` + ``capacity.min`` -> ``fleets[0].capacity.min``; ``[1]`` appends an index."""
    if not relative:
        return base
    if base == "(top level)":
        return relative
    return base + relative if relative.startswith("[") else f"{base}.{relative}"


def _model_at(model: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The pydantic model class that holds the field at ``loc`` (for listing known keys)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        if field is None:
            return None
        current = field.annotation
        args = getattr(current, "__args__", ())
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                current = arg
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


#: What to write instead, for pydantic's built-in type errors.
_TYPE_FIXES = {
    "bool_type": "write true or false",
    "bool_parsing": "write true or false",
    "int_type": "write a whole number",
    "int_parsing": "write a whole number",
    "int_from_float": "write a whole number",
    "string_type": "write a quoted string",
    "list_type": "write a list, e.g. [a, b]",
    "dict_type": "write a mapping of key: value lines indented below this key",
    "model_type": "write a mapping of key: value lines indented below this key",
    "model_attributes_type": "write a mapping of key: value lines indented below this key",
}


def _fix_for(err: ErrorDetails) -> str:
    kind, ctx = err["type"], err.get("ctx", {})
    if kind in _TYPE_FIXES:
        return _TYPE_FIXES[kind]
    if kind == "too_short":
        return f"give at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"give at most {ctx.get('max_length')} item(s)"
    if kind in ("greater_than_equal", "greater_than"):
        return f"use a value {'>=' if kind.endswith('equal') else '>'} {ctx.get('ge', ctx.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"use a value {'<=' if kind.endswith('equal') else '<'} {ctx.get('le', ctx.get('lt'))}"
    if kind == "enum":
        return f"use one of {ctx.get('expected')}"
    m = re.match(r"Input should be (.*)", err["msg"])
    return f"make it {m.group(1)}" if m else "correct the value"


def _problem(err: ErrorDetails) -> str:
    """pydantic's message without its parser detail ("..., unable to interpret input")."""
    return err["msg"].split(", unable to", 1)[0]


def _describe(err: ErrorDetails, model: type[BaseModel]) -> list[tuple[str, str]]:
    """(field path, problem-and-fix text) pairs for one pydantic error."""
    loc = list(err["loc"])
    kind = err["type"]
    if kind == "value_error":
        out = []
        for text in str(err.get("ctx", {}).get("error", err["msg"])).split("\n"):
            # Cross-field rules name their field relative to the model that ran them: "@path: message".
            if text.startswith("@"):
                relative, _, text = text[1:].partition(": ")
                out.append((_join(_field_path(loc), relative), text))
            else:
                out.append((_field_path(loc), text))
        return out
    if kind == "extra_forbidden":
        elsewhere = _belongs_under(model, loc)
        if elsewhere:
            return [
                (
                    _field_path(loc),
                    f"unknown key at this level; fix: {loc[-1]} belongs under {elsewhere}: move it there",
                )
            ]
        parent = _model_at(model, loc[:-1])
        known = sorted(parent.model_fields) if parent else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return [(_field_path(loc), f"unknown key; fix: {hint}remove it or use one of {', '.join(known)}")]
    if kind == "missing":
        return [(_field_path(loc), "required field is missing; fix: add it")]
    value = err.get("input")
    return [(_field_path(loc), f"{value!r} is invalid: {_problem(err)}; fix: {_fix_for(err)}{_note(model, loc)}")]


def _models_in(annotation: Any) -> list[tuple[type[BaseModel], bool]]:
    """The models an annotation holds, each with whether it is a list of them (``list[Fleet]``, ``X | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) or origin is typing.Annotated:
        return [found for arg in args for found in _models_in(arg)]
    if origin in (list, tuple, Sequence):
        return [(m, True) for arg in args for m, _ in _models_in(arg)]
    return []


@functools.lru_cache(maxsize=16)
def field_index(model: type[BaseModel]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Every field name of ``model``'s tree with the places it exists: ``port`` ->
    ``(("fleets", "[]", "service"),)``, a list level written ``[]``."""
    index: dict[str, list[tuple[str, ...]]] = {}

    def walk(current: type[BaseModel], at: tuple[str, ...], seen: frozenset[type[BaseModel]]) -> None:
        for name, field in current.model_fields.items():
            index.setdefault(name, []).append(at)
            for inner, is_list in _models_in(field.annotation):
                if inner not in seen:
                    walk(inner, (*at, name, *(("[]",) if is_list else ())), seen | {inner})

    walk(model, (), frozenset({model}))
    return {name: tuple(places) for name, places in index.items()}


def _belongs_under(model: type[BaseModel], loc: Sequence[Any]) -> str:
    """Where an unknown key ``loc[-1]`` exists in the model tree, written from ``loc``'s own indexes
    (``fleets[1].service``), nearest first, up to 3; empty where the name exists nowhere."""
    places = field_index(model).get(str(loc[-1]), ())
    here = tuple("[]" if isinstance(part, int) else str(part) for part in loc[:-1])
    actual = list(loc[:-1])

    def shared(place: tuple[str, ...]) -> int:
        n = 0
        while n < min(len(place), len(here)) and place[n] == here[n]:
            n += 1
        return n

    def written(place: tuple[str, ...]) -> str:
        n = shared(place)
        parts: list[Any] = [*actual[:n], *("[n]" if part == "[]" else part for part in place[n:])]
        out = ""
        for part in parts:
            if isinstance(part, int) or part == "[n]":
                out += f"[{part}]" if isinstance(part, int) else part
            else:
                out += ("." if out else "") + part
        return out or "the top level"

    ranked = sorted((p for p in places if p != here), key=lambda p: (-shared(p), len(p)))
    return " or ".join(dict.fromkeys(written(p) for p in ranked[:3]))


def _walk(tree: Any, loc: Sequence[Any]) -> Any:
    """The value at ``loc`` in ``tree``, skipping the parts of ``loc`` that are not keys (pydantic's union tags)."""
    for part in loc:
        in_dict = isinstance(tree, dict) and part in tree
        if in_dict or (isinstance(tree, list) and isinstance(part, int) and 0 <= part < len(tree)):
            tree = tree[part]
    return tree


_BOOL_KINDS = ("bool_type", "bool_parsing")


def _yaml_boolean(err: ErrorDetails, written: Any) -> str | None:
    """The problem and fix for a YAML 1.1 boolean word (``off``, ``yes``) where the field wants text, or None."""
    value = err.get("input")
    if not isinstance(value, bool) or err["type"] in _BOOL_KINDS or written is None:
        return None
    word = _walk(written, err["loc"])
    if not isinstance(word, str) or word.lower() in ("true", "false"):
        return None
    return (
        f"{word} unquoted is the boolean {str(value).lower()} (YAML 1.1 reads on, off, yes, no, y, n as booleans), "
        f"not the text {word!r}; fix: quote it: '{word}'"
    )


def _note(model: type[BaseModel], loc: Sequence[Any]) -> str:
    """The field's ``description`` in parentheses (what the limit means, e.g. an API's maximum), or nothing."""
    if not loc or not isinstance(loc[-1], str):
        return ""
    parent = _model_at(model, loc[:-1])
    field = parent.model_fields.get(loc[-1]) if parent else None
    return f" ({field.description})" if field is not None and field.description else ""


def validate_model(model: type[M], data: dict[str, Any], shown: str, written: Callable[[], Any] | None = None) -> M:
    """``model`` validated from ``data``; every problem becomes one ``<file>: <field>: <problem>; fix: ...`` line.

    ``written`` gives the document again with YAML's boolean words kept as the text written (``off``),
    so that a boolean where text is expected is named as the word to quote."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        lines: list[str] = []
        tree: Any = None
        errors = err.errors(include_url=False)
        # A required field given at another level: the unknown key's line says where it belongs.
        misplaced = {e["loc"][-1] for e in errors if e["type"] == "extra_forbidden" and _belongs_under(model, e["loc"])}
        for e in errors:
            if e["type"] == "missing" and e["loc"] and e["loc"][-1] in misplaced:
                continue
            if written is not None and tree is None and isinstance(e.get("input"), bool):
                tree = written()
            word = _yaml_boolean(e, tree)
            if word is not None:
                lines.append(f"{shown}: {_field_path(e['loc'])}: {word}")
            else:
                lines.extend(f"{shown}: {field}: {text}" for field, text in _describe(e, model))
        raise ConfigError(list(dict.fromkeys(lines))) from None
