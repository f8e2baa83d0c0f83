"""The CDK CLI path a person uses: offline, without credentials, rule packs and cfn-lint enforced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synth import ROOT, Synth

# The CLI's own synth and cfn-lint over every template: the slowest checks (make test-fast leaves them out).
pytestmark = pytest.mark.slow

NODE_BIN = ROOT / "node_modules" / ".bin"


def _clean_env(home: Path) -> dict[str, str]:
    """The environment with every AWS credential and profile variable removed, and an empty HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(home)  # no ~/.aws/credentials or config either
    env["PATH"] = f"{NODE_BIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["CDK_DISABLE_CLI_TELEMETRY"] = "true"
    # jsii's package cache (under the real HOME unless set) holds unpacked npm packages, no credentials;
    # without it the app would unpack aws-cdk-lib again, about 4 s of CPU.
    env["JSII_RUNTIME_PACKAGE_CACHE_ROOT"] = os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT") or str(
        Path.home() / ".cache" / "aws" / "jsii" / "package-cache"
    )
    return env


def test_cdk_synth_one_environment_without_credentials(tmp_path: Path) -> None:
    out = tmp_path / "cdk.out"
    home = tmp_path / "home"
    home.mkdir()
    result = subprocess.run(
        ["cdk", "synth", "--quiet", "--no-notices", "-c", "env=dev", "-o", str(out)],
        cwd=ROOT,
        env=_clean_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.glob("assembly-*")) == ["assembly-dev"]
    manifest = json.loads((out / "assembly-dev" / "manifest.json").read_text())
    assert "missing" not in manifest, "synth must make no context lookups"
    templates = sorted(p.name for p in (out / "assembly-dev").glob("*.template.json"))
    stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    assert sorted(a["properties"]["templateFile"] for a in stacks) == templates
    assert {a["properties"]["stackName"] for a in stacks} >= {"dev-Security", "dev-Network", "dev-Storage"}
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), *map(str, (out / "assembly-dev").glob("*.template.json"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_cfn_lint_clean_on_every_template(synth: Synth) -> None:
    """No error and no warning; the rules ignored are those of .cfnlintrc.yaml, each with its reason."""
    templates = [str(s.path) for s in synth.stacks.values()]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), *templates], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""
