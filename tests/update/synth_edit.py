"""Synthesize one environment of a copy of a config folder in which that environment's file is edited."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from app import add_platform
from config import load_platform
from stacks.compliance import platform_app
from tests.synth import Synth, collect_stacks, synth_context
from tests.update.replacements import STACK_TAGS, Templates


def read_config(config_dir: Path, env: str) -> dict[str, Any]:
    return yaml.safe_load((config_dir / f"{env}.yaml").read_text())


def synth_edited(config_dir: Path, env: str, data: dict[str, Any], workdir: Path) -> Templates:
    """``env``'s templates when its config/<env>.yaml reads ``data`` (the other files as they are)."""
    return synth_files(config_dir, {env: data}, [env], workdir)[env]


def synth_files(
    config_dir: Path, files: dict[str, dict[str, Any]], envs: list[str], workdir: Path
) -> dict[str, Templates]:
    """The templates of ``envs`` when the config folder's files ``files`` (name -> data; new ones added) read so."""
    edited = workdir / "config"
    shutil.copytree(config_dir, edited, ignore=shutil.ignore_patterns("__pycache__"))
    for name, data in files.items():
        (edited / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    platform = load_platform(envs, config_dir=edited)
    app = platform_app(context=synth_context(), outdir=str(workdir / "out"))
    add_platform(app, platform.selected_environments, platform=platform).synth()
    synth = collect_stacks(workdir / "out", platform.selected_environments)
    return {env: templates_of(synth, env) for env in envs}


def templates_of(synth: Synth, env: str) -> Templates:
    """As synthesized: before and after come from the same code on the same machine (asset hashes and the
    recipe's content version are real changes here), with the stack's own tags from the manifest under
    ``STACK_TAGS``: CloudFormation propagates them to the stack's resources at deploy."""
    return {
        name: {**s.json, STACK_TAGS: s.manifest["properties"].get("tags", {})}
        for name, s in synth.stacks.items()
        if s.env == env
    }
