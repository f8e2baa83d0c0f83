"""One synthesized cloud assembly of every environment, shared by the whole test session."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

from app import add_platform
from config import Environment, load_platform
from stacks.compliance import FAIL_ON_FINDINGS, platform_app

ROOT = Path(__file__).resolve().parent.parent
#: The environments the suite asserts against (tests/fixtures/config/README.md); the shipped
#: config/ is read only by the snapshot tests and tests/config/test_shipped_configs.py.
TEST_CONFIG_DIR = Path(os.environ.get("GPU_PLATFORM_TEST_CONFIG_DIR") or ROOT / "tests" / "fixtures" / "config")


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
    app: App
    outdir: Path
    environments: dict[str, Environment]
    stacks: dict[str, StackTemplate] = field(default_factory=dict)

    def stack(self, env: str, name: str) -> StackTemplate:
        return self.stacks[f"{env}-{name}"]

    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())


def synthesize(outdir: Path, config_dir: Path = TEST_CONFIG_DIR) -> Synth:
    """Synthesize every environment of ``config_dir`` exactly as ``app.py`` does, into ``outdir``."""
    platform = load_platform(config_dir=config_dir)
    environments = platform.selected_environments
    context = cdk_json_context()
    context[FAIL_ON_FINDINGS] = True
    app = platform_app(context=context, outdir=str(outdir))
    add_platform(app, environments, platform=platform).synth()
    return collect_stacks(app, outdir, environments)


def collect_stacks(app: App, outdir: Path, environments: list[Environment]) -> Synth:
    """Index the stack templates of a synthesized cloud assembly by stack name."""
    result = Synth(app=app, outdir=outdir, environments={e.name: e for e in environments})
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
