"""Config problems for people: ``ConfigError`` and pydantic's errors turned into one line each.

Every line names the file, the field path, the value and the fix:
``<file>: <field>: <problem>; fix: <what to do>``. A rule of the schema raises a ``ValueError``
whose text is the problem and fix (``@path: ...`` where it names a field below the model that
ran it); pydantic's own constraints (``Field(ge=..., le=...)``) get a generic fix, followed by
the field's ``description`` where it says what the limit means.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
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
        parent = _model_at(model, loc[:-1])
        known = sorted(parent.model_fields) if parent else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return [(_field_path(loc), f"unknown key; fix: {hint}remove it or use one of {', '.join(known)}")]
    if kind == "missing":
        return [(_field_path(loc), "required field is missing; fix: add it")]
    value = err.get("input")
    return [(_field_path(loc), f"{value!r} is invalid: {_problem(err)}; fix: {_fix_for(err)}{_note(model, loc)}")]


def _note(model: type[BaseModel], loc: Sequence[Any]) -> str:
    """The field's ``description`` in parentheses (what the limit means, e.g. an API's maximum), or nothing."""
    if not loc or not isinstance(loc[-1], str):
        return ""
    parent = _model_at(model, loc[:-1])
    field = parent.model_fields.get(loc[-1]) if parent else None
    return f" ({field.description})" if field is not None and field.description else ""


def validate_model(model: type[M], data: dict[str, Any], shown: str) -> M:
    """``model`` validated from ``data``; every problem becomes one ``<file>: <field>: <problem>; fix: ...`` line."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        lines: list[str] = []
        for e in err.errors(include_url=False):
            lines.extend(f"{shown}: {field}: {text}" for field, text in _describe(e, model))
        raise ConfigError(lines) from None
