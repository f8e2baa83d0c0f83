"""Stack naming, tags, termination protection and the rule packs, per environment."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_s3 as s3

from config.schema import REQUIRED_TAGS
from stacks.compliance import FAIL_ON_FINDINGS, enforce_rule_packs
from tests.synth import Synth

STATEFUL = ("Security", "Network", "Storage")


def test_stacks_are_named_env_dash_stack(synth: Synth) -> None:
    for name, stack in synth.stacks.items():
        assert name == f"{stack.env}-{stack.manifest['displayName'].split('/')[-1]}"
        cfg = synth.environments[stack.env]
        assert stack.manifest["environment"] == f"aws://{cfg.account}/{cfg.region}"


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_fleets_deploy_after_the_image_stack_that_writes_their_ami_parameter(synth: Synth, env: str) -> None:
    image_artifact = synth.stack(env, "Image").path.stem.removesuffix(".template")
    assert image_artifact in synth.stack(env, "Fleets").manifest["dependencies"]


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_termination_protection_on_stateful_stacks_where_configured(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    assert cfg.protect_stateful_resources is (env == "prod")
    for stack_name in STATEFUL:
        props = synth.stack(env, stack_name).manifest["properties"]
        assert props.get("terminationProtection", False) is cfg.protect_stateful_resources


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_stateful_resources_retained_only_in_protected_environments(synth: Synth, env: str) -> None:
    expected = "Retain" if synth.environments[env].protect_stateful_resources else "Delete"
    for stack_name in STATEFUL:
        stack = synth.stack(env, stack_name)
        for kind in ("AWS::KMS::Key", "AWS::Logs::LogGroup"):
            for res in stack.resources(kind).values():
                assert res["DeletionPolicy"] == expected, (stack.name, kind)


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_cost_allocation_tags_on_stacks_and_resources(synth: Synth, env: str) -> None:
    cfg = synth.environments[env]
    for stack_name in STATEFUL:
        stack = synth.stack(env, stack_name)
        assert stack.manifest["properties"]["tags"] == cfg.pinned_placement_group_tags
        for logical_id, res in stack.json["Resources"].items():
            tags = res.get("Properties", {}).get("Tags")
            if isinstance(tags, list):
                assert {t["Key"]: t["Value"] for t in tags if t["Key"] in REQUIRED_TAGS} == cfg.tags, logical_id


def test_cdks_builtin_template_validator_is_off(synth: Synth) -> None:
    """cfn-lint is the one template validator (tests/test_cli_synth.py). CDK's own port of its rules
    would report the explicit zones of the subnets (W3010, which cfn-lint leaves out for CDK
    templates); passing rule packs report nothing, so the report is empty.

    This is also the rule packs' verdict on every environment: the suite's synth ran them
    (``add_platform`` enforces them, as ``app.py`` does), a finding would have failed it, and
    test_a_finding_fails_synth shows both packs are there to find one."""
    assert synth.validation_report()["pluginReports"] == []


def test_a_finding_fails_synth(tmp_path) -> None:
    """The packs are enforced: an unencrypted, unlogged bucket stops the synth, and each pack says why."""
    app = App(context={FAIL_ON_FINDINGS: True}, outdir=str(tmp_path))
    stack = Stack(app, "Probe", env=Environment(account="111111111111", region="us-east-1"))
    s3.Bucket(stack, "Unsafe")
    enforce_rule_packs(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    reports = json.loads((tmp_path / "validation-report.json").read_text())["pluginReports"]
    assert {(r["pluginName"], r["conclusion"]) for r in reports} == {
        ("AwsSolutions", "failure"),
        ("NIST.800.53.R5", "failure"),
    }
