"""Read ``config/<env>.yaml`` files into frozen ``Environment`` objects.

All config problems become ``ConfigError`` whose ``lines`` are for people: one line
per problem, naming the file, the field path, the value and the fix (``config.errors``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from config.base import WrittenInt
from config.errors import ConfigError, validate_model
from config.schema import Environment
from config.sharing import Platform, sharing_problems

CONFIG_DIR = Path(__file__).resolve().parent

#: Names other modules import from here (``ConfigError`` and ``validate_model`` come from ``config.errors``).
__all__ = [
    "CONFIG_DIR",
    "FAST_SAFE_LOADER",
    "ConfigError",
    "available_environments",
    "display_path",
    "load_environment",
    "load_environments",
    "load_platform",
    "platform_of",
    "read_mapping",
    "safe_load",
    "validate_model",
]

#: PyYAML's safe loader on libyaml (the PyYAML wheels bundle it): about ten times faster than the
#: pure-Python one; the same loader without libyaml.
if TYPE_CHECKING:  # both offer SafeLoader's interface; the checker is shown one class to derive from
    FAST_SAFE_LOADER = yaml.SafeLoader
else:
    FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` on the fast safe loader."""
    return yaml.load(text, Loader=FAST_SAFE_LOADER)  # noqa: S506 - a safe loader  # nosec B506


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


class _WrittenBoolLoader(_UniqueKeyLoader):
    """The same loader, but YAML 1.1's boolean words stay the text written (``off``, ``Yes``)."""


def _construct_bool_text(loader: _WrittenBoolLoader, node: yaml.ScalarNode) -> str:
    return str(node.value)


_WrittenBoolLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool_text)


def written_booleans(path: Path) -> Any:
    """``path``'s document with every boolean as the word written (for errors that name it)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_WrittenBoolLoader)  # noqa: S506  # nosec B506


def _tab_in_indentation(text: str, marks: Iterable[Any]) -> str | None:
    """``line L, column C`` of a tab in the leading whitespace of a line a YAML error points at, or None."""
    lines = text.splitlines()
    for mark in marks:
        if mark is None or not 0 <= mark.line < len(lines):
            continue
        line = lines[mark.line]
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            return f"line {mark.line + 1}, column {indent.index(chr(9)) + 1}"
    return None


def available_environments(config_dir: Path = CONFIG_DIR) -> list[str]:
    """Environment names: one per ``*.yaml`` file in the config folder."""
    return sorted(p.stem for p in config_dir.glob("*.yaml"))


def display_path(path: Path) -> str:
    """``path`` relative to the working directory where it lies below it (as a person typed it), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read_mapping(path: Path, shown: str, *, what: str, missing_fix: str, first_field: str) -> dict[str, Any]:
    """The YAML mapping in ``path``; a missing, empty or malformed file is a one-line ``ConfigError``.

    ``what`` names the file's subject in the fix (``the environment's fields``), ``missing_fix`` is
    the fix printed when the file does not exist, ``first_field`` (``name: dev``) the line to start with.
    """
    if not path.is_file():
        raise ConfigError([f"{shown}: file not found; fix: {missing_fix}"])
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass  # nosec B506
    except yaml.MarkedYAMLError as err:
        tab = _tab_in_indentation(text, (err.problem_mark, err.context_mark))
        if tab is not None:
            raise ConfigError(
                [
                    f"{shown}: {tab}: a tab in the indentation (YAML indents with spaces only); fix: replace the tab with spaces"
                ]
            ) from None
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
    env = validate_model(Environment, data, shown, written=lambda: written_booleans(path))
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
    return Platform(environments=environments, selected=selected, config_dir=config_dir)
