"""What the pipeline promises: the order of promotion, the approval before prod, a check after every deploy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from config import load_environment
from gpu_constructs.pipeline.pipeline_steps import CHECK_SCRIPT, SYNTH_SCRIPT
from stacks.pipeline_stack import PIPELINE_STACK_NAME, PYTHON_VERSION
from tests.pipeline_synth import PipelineSynth
from tests.synth import ROOT

ENVIRONMENTS = ("dev", "staging", "prod")


def _deploy_actions(stage: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in stage["Actions"] if a["ActionTypeId"]["Provider"] == "CloudFormation"]


def _buildspec(project: dict[str, Any]) -> dict[str, Any]:
    return json.loads(project["Properties"]["Source"]["BuildSpec"])


def _check_action(stage: dict[str, Any]) -> dict[str, Any]:
    (action,) = [a for a in stage["Actions"] if a["Name"] == "PostDeployCheck"]
    return action


def _joined(value: Any) -> str:
    """``{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ...]]}`` -> ``arn:${AWS::Partition}...``."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_joined(p) for p in parts)
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    raise AssertionError(f"unexpected intrinsic {value}")


# --- order of promotion --------------------------------------------------------------------------------------


def test_promotion_list_is_dev_staging_prod(pipeline_synth: PipelineSynth) -> None:
    assert pipeline_synth.config.promotion == list(ENVIRONMENTS)
    assert pipeline_synth.config.manual_approval == ["prod"]


def test_stage_order_source_build_self_mutation_assets_then_each_environment(pipeline_synth: PipelineSynth) -> None:
    names = [s["Name"] for s in pipeline_synth.stages]
    assert names == ["Source", "Build", "UpdatePipeline", "Assets", *ENVIRONMENTS]


def test_each_environment_deploys_all_its_stacks_to_its_own_account_and_region(pipeline_synth: PipelineSynth) -> None:
    for env_name in ENVIRONMENTS:
        env = load_environment(env_name)
        actions = _deploy_actions(pipeline_synth.stage(env_name))
        stacks = {a["Configuration"]["StackName"] for a in actions}
        assert stacks == {
            f"{env_name}-{s}" for s in ("Security", "Network", "Storage", "Image", "Fleets", "Monitoring")
        }
        deploy_role = (
            f"arn:${{AWS::Partition}}:iam::{env.account}:role/cdk-hnb659fds-deploy-role-{env.account}-{env.region}"
        )
        for action in actions:
            assert _joined(action["RoleArn"]) == deploy_role, action["Name"]
            assert action.get("Region", env.region) == env.region


def test_pipeline_stages_are_platform_stages_of_each_environment(pipeline_synth: PipelineSynth) -> None:
    stages = pipeline_synth.stack.stages
    assert [s.node.id for s in stages] == list(ENVIRONMENTS)
    for stage in stages:
        env = load_environment(stage.node.id)
        assert (stage.account, stage.region) == (env.account, env.region)


# --- approval and checks -------------------------------------------------------------------------------------


def test_manual_approval_runs_before_any_prod_deploy_action(pipeline_synth: PipelineSynth) -> None:
    prod = pipeline_synth.stage("prod")
    (approval,) = [a for a in prod["Actions"] if a["ActionTypeId"]["Provider"] == "Manual"]
    assert approval["Name"] == "Approve"
    assert approval["RunOrder"] < min(a["RunOrder"] for a in _deploy_actions(prod))


def test_only_prod_waits_for_approval(pipeline_synth: PipelineSynth) -> None:
    for stage in pipeline_synth.stages:
        manual = [a for a in stage["Actions"] if a["ActionTypeId"]["Provider"] == "Manual"]
        assert bool(manual) is (stage["Name"] == "prod"), stage["Name"]


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_post_deploy_check_runs_after_every_deploy_action_of_its_environment(
    pipeline_synth: PipelineSynth, env_name: str
) -> None:
    stage = pipeline_synth.stage(env_name)
    check = _check_action(stage)
    assert check["ActionTypeId"]["Provider"] == "CodeBuild"
    assert check["RunOrder"] > max(a["RunOrder"] for a in _deploy_actions(stage))
    assert check["RunOrder"] == max(a["RunOrder"] for a in stage["Actions"])


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_post_deploy_check_runs_the_check_script_for_its_environment_from_the_source(
    pipeline_synth: PipelineSynth, env_name: str
) -> None:
    check = _check_action(pipeline_synth.stage(env_name))
    project = pipeline_synth.project(check["Configuration"]["ProjectName"])
    assert _buildspec(project)["phases"]["build"]["commands"] == [f"{CHECK_SCRIPT} {env_name}"]
    (source_artifact,) = pipeline_synth.stage("Source")["Actions"][0]["OutputArtifacts"]
    assert check["InputArtifacts"] == [source_artifact]
    script = (ROOT / CHECK_SCRIPT).read_text()
    assert "scripts/check_environment.py" in script
    assert '"$env_name" --json' in script


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_post_deploy_check_assumes_only_the_read_only_role_of_its_environment(
    pipeline_synth: PipelineSynth, env_name: str
) -> None:
    env = load_environment(env_name)
    lookup_role = f"arn:aws:iam::{env.account}:role/cdk-hnb659fds-lookup-role-{env.account}-{env.region}"
    project = pipeline_synth.project(_check_action(pipeline_synth.stage(env_name))["Configuration"]["ProjectName"])
    variables = {v["Name"]: v["Value"] for v in project["Properties"]["Environment"]["EnvironmentVariables"]}
    assert variables == {"CHECK_ROLE_ARN": lookup_role}
    role_id = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
    (policy,) = [
        p for p in pipeline_synth.resources("AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assume = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "sts:AssumeRole" in s["Action"]]
    assert assume == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Resource": lookup_role, "Sid": "AssumeReadOnlyCheckRole"}
    ]


# --- source, synth, self-mutation ----------------------------------------------------------------------------


def test_source_is_the_configured_codeconnections_repository_and_branch(pipeline_synth: PipelineSynth) -> None:
    (action,) = pipeline_synth.stage("Source")["Actions"]
    assert action["ActionTypeId"] == {
        "Category": "Source",
        "Owner": "AWS",
        "Provider": "CodeStarSourceConnection",
        "Version": "1",
    }
    cfg = pipeline_synth.config
    assert action["Configuration"] == {
        "ConnectionArn": cfg.connection_arn,
        "FullRepositoryId": cfg.repository,
        "BranchName": cfg.branch,
        # CodeBuild clones the repository: the scripts keep their executable bits (a zip drops them).
        "OutputArtifactFormat": "CODEBUILD_CLONE_REF",
    }


def test_synth_step_runs_the_repository_script_and_outputs_the_cloud_assembly(pipeline_synth: PipelineSynth) -> None:
    (action,) = pipeline_synth.stage("Build")["Actions"]
    spec = _buildspec(pipeline_synth.project(action["Configuration"]["ProjectName"]))
    assert spec["phases"]["build"]["commands"] == [SYNTH_SCRIPT]
    assert spec["phases"]["install"]["runtime-versions"] == {"python": PYTHON_VERSION}
    assert spec["artifacts"]["base-directory"] == "cdk.out"


def test_synth_script_runs_the_test_suite_then_the_pipeline_synth() -> None:
    lines = [line for line in (ROOT / SYNTH_SCRIPT).read_text().splitlines() if line.startswith("make ")]
    assert lines == ["make test", "make synth-pipeline"]
    makefile = (ROOT / "Makefile").read_text()
    assert "$(CDK) synth --quiet -c pipeline=true" in makefile


def test_pipeline_updates_itself_with_the_pinned_cdk_cli(pipeline_synth: PipelineSynth) -> None:
    (action,) = pipeline_synth.stage("UpdatePipeline")["Actions"]
    spec = _buildspec(pipeline_synth.project(action["Configuration"]["ProjectName"]))
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert spec["phases"]["install"]["commands"] == [f"npm install -g aws-cdk@{pinned}"]
    assert any(f"cdk -a . deploy {PIPELINE_STACK_NAME}" in c for c in spec["phases"]["build"]["commands"])


def test_no_codebuild_project_runs_privileged(pipeline_synth: PipelineSynth) -> None:
    projects = pipeline_synth.resources("AWS::CodeBuild::Project")
    assert len(projects) == 3 + len(ENVIRONMENTS)  # synth, self-mutation, assets, one check per environment
    for logical_id, project in projects.items():
        assert project["Properties"]["Environment"]["PrivilegedMode"] is False, logical_id


# --- artifacts: cross-account key, hardened bucket -----------------------------------------------------------


def test_artifacts_are_encrypted_with_a_rotated_key_the_environments_deploy_roles_can_decrypt(
    pipeline_synth: PipelineSynth,
) -> None:
    (pipeline,) = pipeline_synth.resources("AWS::CodePipeline::Pipeline").values()
    store = pipeline["Properties"]["ArtifactStore"]
    key_id = store["EncryptionKey"]["Id"]["Fn::GetAtt"][0]
    key = pipeline_synth.json["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    decrypters = {
        _joined(p)
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if "kms:Decrypt" in s["Action"]
        and s["Principal"]["AWS"] != f"arn:aws:iam::{pipeline_synth.config.account}:root"
        for p in s["Principal"]["AWS"]
    }
    assert decrypters == {
        f"arn:${{AWS::Partition}}:iam::{e.account}:role/cdk-hnb659fds-deploy-role-{e.account}-{e.region}"
        for e in map(load_environment, ENVIRONMENTS)
    }
    bucket = pipeline_synth.json["Resources"][store["Location"]["Ref"]]
    (encryption,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption["ServerSideEncryptionByDefault"] == {
        "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]},
        "SSEAlgorithm": "aws:kms",
    }


def test_artifact_bucket_is_versioned_logged_and_owner_enforced(pipeline_synth: PipelineSynth) -> None:
    (pipeline,) = pipeline_synth.resources("AWS::CodePipeline::Pipeline").values()
    bucket = pipeline_synth.json["Resources"][pipeline["Properties"]["ArtifactStore"]["Location"]["Ref"]]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert bucket["LoggingConfiguration"]["LogFilePrefix"] == "pipeline-artifacts/"
    assert bucket["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
    )


def test_pipeline_stack_runs_in_the_tooling_account_with_its_tags(pipeline_synth: PipelineSynth) -> None:
    stack = pipeline_synth.stack
    cfg = pipeline_synth.config
    assert (stack.account, stack.region, stack.stack_name) == (cfg.account, cfg.region, PIPELINE_STACK_NAME)
    manifest = json.loads((pipeline_synth.outdir / "manifest.json").read_text())
    props = manifest["artifacts"][PIPELINE_STACK_NAME]["properties"]
    assert props["tags"] == cfg.tags


# --- rule packs and cfn-lint ---------------------------------------------------------------------------------


def test_the_rule_packs_passed_the_pipeline_app(pipeline_synth: PipelineSynth) -> None:
    """``app.build`` enforced the rule packs on the pipeline app (tests/pipeline_synth.py), so its synth ran
    them: a finding would have failed it (tests/stacks/test_platform_stage.py::test_a_finding_fails_synth), and a pack
    that passes leaves no report."""
    assert json.loads((pipeline_synth.outdir / "validation-report.json").read_text())["pluginReports"] == []


def test_every_acknowledgment_on_the_pipeline_names_a_reason(pipeline_synth: PipelineSynth) -> None:
    from aws_cdk import Validations

    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    pipeline = pipeline_synth.stack.pipeline.node
    entries = [
        (c.node.path, rule, reason)
        for c in pipeline.find_all()
        for m in c.node.metadata
        if m.type == key
        for rule, reason in m.data.items()
    ]
    assert len(entries) > 20
    for path, rule, reason in entries:
        assert len(reason) >= 40, (path, rule)
        assert "*" not in rule.split("[", 1)[0], (path, rule)  # a rule id, never a pattern


def test_cfn_lint_clean_on_the_pipeline_template(pipeline_synth: PipelineSynth) -> None:
    template = pipeline_synth.outdir / f"{PIPELINE_STACK_NAME}.template.json"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), str(template)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_the_pipeline_deploys_the_templates_a_laptop_deploy_does(pipeline_synth: PipelineSynth, shipped_synth) -> None:
    """Same stages, stacks and templates as ``make deploy ENV=<env>``: switching between the two changes nothing.
    Both read the shipped config/."""
    synth = shipped_synth
    for env_name in ENVIRONMENTS:
        manifest = json.loads((pipeline_synth.outdir / f"assembly-{env_name}" / "manifest.json").read_text())
        stacks = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
        assert {a["properties"]["stackName"] for a in stacks} == {
            n for n in synth.stacks if n.startswith(f"{env_name}-")
        }
        for artifact in stacks:
            name = artifact["properties"]["stackName"]
            in_pipeline = json.loads(
                (pipeline_synth.outdir / f"assembly-{env_name}" / artifact["properties"]["templateFile"]).read_text()
            )
            assert in_pipeline == synth.stacks[name].json, name
