"""Read ``config/<env>.yaml`` files into frozen ``Environment`` objects.

All config problems become ``ConfigError`` whose ``lines`` are for people: one line
per problem, naming the file, the field path, the value and the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from config.base import WrittenInt
from config.schema import Environment
from config.sharing import Platform, sharing_problems

CONFIG_DIR = Path(__file__).resolve().parent

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """One or more config problems; ``str()`` gives one line per problem."""

    def __init__(self, lines: Sequence[str]):
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


#: PyYAML's safe loader on libyaml (the PyYAML wheels bundle it): about ten times faster than the
#: pure-Python one; the same loader without libyaml.
FAST_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` on the fast safe loader."""
    return yaml.load(text, Loader=FAST_SAFE_LOADER)  # noqa: S506 - a safe loader


class _UniqueKeyLoader(FAST_SAFE_LOADER):
    """A safe loader that refuses a key given twice in one mapping (PyYAML keeps the last)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice (first on line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _construct_int(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> int:
    """An int, remembering its text where that is not the number's own digits (e.g. octal ``0111``)."""
    value = loader.construct_yaml_int(node)
    return value if node.value == str(value) else WrittenInt.of(value, node.value)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def available_environments(config_dir: Path = CONFIG_DIR) -> list[str]:
    """Environment names: one per ``*.yaml`` file in the config folder."""
    return sorted(p.stem for p in config_dir.glob("*.yaml"))


def display_path(path: Path) -> str:
    """``path`` relative to the working directory where it lies below it (as a person typed it), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


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


def _fix_for(err: dict[str, Any]) -> str:
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


def _problem(err: dict[str, Any]) -> str:
    """pydantic's message without its parser detail ("..., unable to interpret input")."""
    return err["msg"].split(", unable to", 1)[0]


def _describe(err: dict[str, Any], model: type[BaseModel]) -> list[tuple[str, str]]:
    """(field path, problem-and-fix text) pairs for one pydantic error."""
    loc = list(err["loc"])
    kind = err["type"]
    if kind == "value_error":
        out = []
        for text in str(err["ctx"]["error"]).split("\n"):
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
    return [(_field_path(loc), f"{value!r} is invalid: {_problem(err)}; fix: {_fix_for(err)}")]


def read_mapping(path: Path, shown: str, *, what: str, missing_fix: str, first_field: str) -> dict[str, Any]:
    """The YAML mapping in ``path``; a missing, empty or malformed file is a one-line ``ConfigError``.

    ``what`` names the file's subject in the fix (``the environment's fields``), ``missing_fix`` is
    the fix printed when the file does not exist, ``first_field`` (``name: dev``) the line to start with.
    """
    if not path.is_file():
        raise ConfigError([f"{shown}: file not found; fix: {missing_fix}"])
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(unknown position)"
        raise ConfigError(
            [f"{shown}: {where}: YAML error: {err.problem or err.context}; fix: correct the YAML syntax"]
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError([f"{shown}: YAML error: {err}; fix: correct the YAML syntax"]) from None
    if data is None:
        raise ConfigError(
            [f"{shown}: (top level): the file is empty; fix: write {what}, starting with '{first_field}'"]
        )
    if not isinstance(data, dict):
        raise ConfigError(
            [
                f"{shown}: (top level): expected a mapping of fields, found a {'list' if isinstance(data, list) else 'single value'}; fix: write one 'key: value' per line, starting with '{first_field}'"
            ]
        )
    return data


def validate_model(model: type[M], data: dict[str, Any], shown: str) -> M:
    """``model`` validated from ``data``; every problem becomes one ``<file>: <field>: <problem>; fix: ...`` line."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        lines = []
        for e in err.errors(include_url=False):
            lines.extend(f"{shown}: {field}: {text}" for field, text in _describe(e, model))
        raise ConfigError(lines) from None


def load_environment(name_or_path: str | Path, config_dir: Path = CONFIG_DIR) -> Environment:
    """Load one environment by name (``dev``) or by path to its YAML file."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = config_dir / f"{name_or_path}.yaml"
    shown = display_path(path)
    known = ", ".join(available_environments(path.parent)) or "none"
    data = read_mapping(
        path,
        shown,
        what="the environment's fields",
        missing_fix=f"create it, or choose an existing environment ({known})",
        first_field=f"name: {path.stem}",
    )
    env = validate_model(Environment, data, shown)
    if env.name != path.stem:
        raise ConfigError(
            [
                f"{shown}: name: {env.name!r} differs from the file name; fix: set name to {path.stem!r} or rename the file"
            ]
        )
    return env


def load_environments(names: Iterable[str] | None = None, config_dir: Path = CONFIG_DIR) -> list[Environment]:
    """Load the named environments (all of them when ``names`` is None), collecting every problem."""
    names = list(names) if names is not None else available_environments(config_dir)
    if not names:
        shown = display_path(config_dir)
        raise ConfigError([f"{shown}/: no environment files (*.yaml); fix: add {shown}/<env>.yaml"])
    envs: list[Environment] = []
    problems: list[str] = []
    for name in names:
        try:
            envs.append(load_environment(name, config_dir))
        except ConfigError as err:
            problems.extend(err.lines)
    if problems:
        raise ConfigError(problems)
    return envs


def load_platform(names: Iterable[str] | None = None, config_dir: Path = CONFIG_DIR) -> Platform:
    """Every environment of ``config_dir``, validated file by file and then together; ``names`` selects.

    The rules between environments (who builds the AMI, who receives it) need them all,
    so every file is read even when one environment is synthesized. A named environment
    without a file is an error, as in ``load_environments``.
    """
    available = available_environments(config_dir)
    selected = list(dict.fromkeys(names)) if names is not None else available
    everything = load_environments([*selected, *(n for n in available if n not in selected)], config_dir)
    return _validated({env.name: env for env in everything}, tuple(selected), config_dir)


def platform_of(environments: Sequence[Environment], config_dir: Path = CONFIG_DIR) -> Platform:
    """``environments`` (loaded elsewhere, e.g. changed by a test), completed by the other files of
    ``config_dir`` and validated together; all of ``environments`` are selected."""
    others = [name for name in available_environments(config_dir) if name not in {e.name for e in environments}]
    everything = [*environments, *load_environments(others, config_dir)] if others else list(environments)
    return _validated({env.name: env for env in everything}, tuple(e.name for e in environments), config_dir)


def _validated(environments: dict[str, Environment], selected: tuple[str, ...], config_dir: Path) -> Platform:
    shown = {name: display_path(config_dir / f"{name}.yaml") for name in environments}
    problems = sharing_problems(environments, shown)
    if problems:
        raise ConfigError(problems)
    return Platform(environments=environments, selected=selected)
