"""One synthesized cloud assembly of every environment, shared by the whole test run.

A cloud assembly is files: the first pytest-xdist worker that needs one synthesizes it, the others
wait for it and read the same folder (``build_once``), so a run pays for each synth once, not once
per worker."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from app import add_platform
from config import Environment, load_platform
from stacks.compliance import FAIL_ON_FINDINGS, platform_app

ROOT = Path(__file__).resolve().parent.parent
#: The environments the suite asserts against (tests/fixtures/config/README.md); the shipped
#: config/ is read only by the snapshot tests and tests/config/test_shipped_configs.py.
TEST_CONFIG_DIR = Path(os.environ.get("GPU_PLATFORM_TEST_CONFIG_DIR") or ROOT / "tests" / "fixtures" / "config")
#: The Slurm test environment (hpc: Slurm fleets on AWS PCS beside an Auto Scaling fleet): fixed, whatever
#: GPU_PLATFORM_TEST_CONFIG_DIR points the rest of the suite at.
SLURM_DIR = ROOT / "tests" / "fixtures" / "config" / "slurm"


def cdk_json_context() -> dict[str, Any]:
    """The context the CDK CLI passes to app.py: cdk.json's flags plus the CLI's own settings."""
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    context.update(
        {
            "aws:cdk:enable-path-metadata": True,
            "aws:cdk:enable-asset-metadata": True,
            "aws:cdk:disable-version-reporting": True,  # cdk.json: "versionReporting": false
            "aws:cdk:bundling-stacks": ["**"],
        }
    )
    return context


@dataclass
class StackTemplate:
    env: str
    name: str  # "<env>-<Stack>"
    path: Path
    manifest: dict[str, Any]

    @cached_property
    def json(self) -> dict[str, Any]:
        return json.loads(self.path.read_text())

    @cached_property
    def template(self) -> Template:
        return Template.from_json(self.json)

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == type_}


@dataclass
class Synth:
    outdir: Path
    environments: dict[str, Environment]
    stacks: dict[str, StackTemplate] = field(default_factory=dict)

    def stack(self, env: str, name: str) -> StackTemplate:
        return self.stacks[f"{env}-{name}"]

    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())


def synth_context() -> dict[str, Any]:
    """The context ``app.py`` runs with under ``make synth``: findings of the rule packs fail the synth."""
    return {**cdk_json_context(), FAIL_ON_FINDINGS: True}


def synthesize(outdir: Path, config_dir: Path = TEST_CONFIG_DIR) -> Synth:
    """Synthesize every environment of ``config_dir`` exactly as ``app.py`` does, into ``outdir``."""
    platform = load_platform(config_dir=config_dir)
    app = platform_app(context=synth_context(), outdir=str(outdir))
    add_platform(app, platform.selected_environments, platform=platform).synth()
    return collect_stacks(outdir, platform.selected_environments)


def synthesize_once(
    config: pytest.Config, factory: pytest.TempPathFactory, name: str, config_dir: Path = TEST_CONFIG_DIR
) -> Synth:
    """``synthesize`` into a folder the workers of this run share: synthesized by the first one that asks."""

    def build(folder: Path) -> None:
        synthesize(folder, config_dir)

    outdir = build_once(config, factory, name, build)
    return collect_stacks(outdir, load_platform(config_dir=config_dir).selected_environments)


def build_once(
    config: pytest.Config, factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """The folder ``name`` that ``build`` fills, built once per test run however many xdist workers ask.

    Each worker's temporary folder sits in the run's own; the first worker takes a lock there and
    builds, the others wait on the lock and find the folder done. A build that raises leaves no
    "done" mark, so each worker that asks tries again and reports the error itself.
    """
    base = factory.getbasetemp()
    if hasattr(config, "workerinput"):  # an xdist worker: its folder is <the run's folder>/popen-gw<n>
        base = base.parent
    folder, done = base / name, base / f"{name}.done"
    with (base / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


def collect_stacks(outdir: Path, environments: list[Environment]) -> Synth:
    """Index the stack templates of a synthesized cloud assembly by stack name."""
    result = Synth(outdir=outdir, environments={e.name: e for e in environments})
    for env in environments:
        assembly = outdir / f"assembly-{env.name}"
        manifest = json.loads((assembly / "manifest.json").read_text())
        for artifact in manifest["artifacts"].values():
            if artifact["type"] != "aws:cloudformation:stack":
                continue
            props = artifact["properties"]
            name = props["stackName"]
            result.stacks[name] = StackTemplate(
                env=env.name, name=name, path=assembly / props["templateFile"], manifest=artifact
            )
    return result
