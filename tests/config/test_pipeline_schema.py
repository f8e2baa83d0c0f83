"""Pipeline config mistakes give one exact, actionable line each, like an environment's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import config
from config.pipeline_schema import PIPELINE_FILE, load_pipeline
from tests.config.helpers import valid_pipeline, write_config
from tests.pipeline_synth import PipelineSynth

SHOWN = str(PIPELINE_FILE)  # the tests run in the config folder they write
ARN = "arn:aws:codeconnections:us-east-1:444444444444:connection/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
KEYS = "account, ami_gate, branch, connection_arn, fabric_check, manual_approval, promotion, region, repository, tags"


def pipeline_error(folder: Path) -> list[str]:
    with pytest.raises(config.ConfigError) as info:
        load_pipeline(folder)
    return info.value.lines


CASES = [
    pytest.param(
        {"promotion": ["dev", "stage", "prod"]},
        [
            f"{SHOWN}: promotion[1]: 'stage' is not an environment; "
            "fix: did you mean 'staging'? use one of dev, prod, staging (config/<env>.yaml)"
        ],
        id="promotion-unknown-environment",
    ),
    pytest.param(
        {"promotion": ["dev", "staging", "dev"], "manual_approval": ["staging"]},
        [f"{SHOWN}: promotion[2]: 'dev' is already listed at promotion[0]; fix: list each environment once"],
        id="promotion-duplicate",
    ),
    pytest.param(
        {"promotion": []},
        [
            f"{SHOWN}: promotion: [] is invalid: List should have at least 1 item after validation, not 0; fix: give at least 1 item(s)"
        ],
        id="promotion-empty",
    ),
    pytest.param(
        {"manual_approval": ["production"]},
        [f"{SHOWN}: manual_approval[0]: 'production' is not in promotion; fix: use one of dev, staging, prod"],
        id="approval-not-promoted",
    ),
    pytest.param(
        {"connection_arn": "arn:aws:codecommit:us-east-1:444444444444:gpu-platform"},
        [
            f"{SHOWN}: connection_arn: 'arn:aws:codecommit:us-east-1:444444444444:gpu-platform' is not a connection ARN; "
            "fix: copy the ARN of an available GitHub connection (Developer Tools > Settings > Connections): "
            "arn:aws:codeconnections:<region>:<account>:connection/<uuid>"
        ],
        id="arn-other-service",
    ),
    pytest.param(
        {"connection_arn": ARN.replace("444444444444", "4444")},
        [
            f"{SHOWN}: connection_arn: '{ARN.replace('444444444444', '4444')}' is not a connection ARN; "
            "fix: copy the ARN of an available GitHub connection (Developer Tools > Settings > Connections): "
            "arn:aws:codeconnections:<region>:<account>:connection/<uuid>"
        ],
        id="arn-short-account",
    ),
    pytest.param(
        {"connection_arn": ARN.removesuffix("4a5b")},
        [
            f"{SHOWN}: connection_arn: '{ARN.removesuffix('4a5b')}' is not a connection ARN; "
            "fix: copy the ARN of an available GitHub connection (Developer Tools > Settings > Connections): "
            "arn:aws:codeconnections:<region>:<account>:connection/<uuid>"
        ],
        id="arn-truncated-uuid",
    ),
    pytest.param(
        {"account": "4444"},
        [f"{SHOWN}: account: '4444' is not an AWS account id; fix: write the 12-digit account id as a quoted string"],
        id="account-not-12-digits",
    ),
    pytest.param(
        {"account": 444444444444},
        [
            f'{SHOWN}: account: 444444444444 is a number, not a quoted account id; fix: quote the account id as written ("444444444444")'
        ],
        id="account-number",
    ),
    pytest.param(
        {"region": "us-east"},
        [f"{SHOWN}: region: 'us-east' is not an AWS region code; fix: use a code such as us-east-1 or eu-west-1"],
        id="region",
    ),
    pytest.param(
        {"repository": "gpu-platform"},
        [
            f"{SHOWN}: repository: 'gpu-platform' is not a GitHub repository; "
            "fix: write it as owner/name, e.g. example-org/gpu-platform"
        ],
        id="repository-without-owner",
    ),
    pytest.param(
        {"repository": "https://github.com/example-org/gpu-platform"},
        [
            f"{SHOWN}: repository: 'https://github.com/example-org/gpu-platform' is not a GitHub repository; "
            "fix: write it as owner/name, e.g. example-org/gpu-platform"
        ],
        id="repository-url",
    ),
    pytest.param(
        {"branch": "main branch"},
        [f"{SHOWN}: branch: 'main branch' is not a branch name; fix: write the branch to deploy from, e.g. main"],
        id="branch",
    ),
    pytest.param(
        {"tags": {"Project": "gpu-platform"}},
        [
            f"{SHOWN}: tags: missing cost-allocation tag(s) Owner, CostCenter; "
            "fix: add them (required: Project, Owner, CostCenter)"
        ],
        id="tags",
    ),
    pytest.param(
        {"fabric_check": ["dev", "qa"]},
        [f"{SHOWN}: fabric_check[1]: 'qa' is not in promotion; fix: use one of dev, staging, prod"],
        id="fabric-check-not-promoted",
    ),
    pytest.param(
        {"fabric_check": "staging"},
        [f"{SHOWN}: fabric_check: 'staging' is invalid: Input should be a valid list; fix: write a list, e.g. [a, b]"],
        id="fabric-check-not-a-list",
    ),
    pytest.param(
        {"fabric_check": ["staging"], "ami_gate": ["qa"]},
        [f"{SHOWN}: ami_gate[0]: 'qa' is not in promotion; fix: use one of dev, staging, prod"],
        id="ami-gate-not-promoted",
    ),
    pytest.param(
        {"fabric_check": ["prod"], "ami_gate": ["staging"]},
        [
            f"{SHOWN}: ami_gate[0]: 'staging' has no environment of fabric_check before it in promotion, so no "
            "fabric check tests its AMI; fix: add the environment before it that tests the AMI to fabric_check, or "
            "remove 'staging' from ami_gate"
        ],
        id="ami-gate-without-an-earlier-fabric-check",
    ),
    pytest.param(
        {"promotions": ["dev"]},
        [f"{SHOWN}: promotions: unknown key; fix: did you mean 'promotion'? remove it or use one of {KEYS}"],
        id="unknown-key",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), CASES)
def test_invalid_pipeline_config_gives_exact_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict[str, Any], expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, {**valid_pipeline(), **changes})
    assert pipeline_error(tmp_path) == expected


def test_several_problems_give_one_line_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = {**valid_pipeline(), "repository": "gpu-platform", "promotion": ["dev", "dev"], "manual_approval": ["qa"]}
    write_config(tmp_path, data)
    assert pipeline_error(tmp_path) == [
        f"{SHOWN}: repository: 'gpu-platform' is not a GitHub repository; fix: write it as owner/name, e.g. example-org/gpu-platform",
    ]
    data["repository"] = "example-org/gpu-platform"
    write_config(tmp_path, data)
    assert pipeline_error(tmp_path) == [
        f"{SHOWN}: promotion[1]: 'dev' is already listed at promotion[0]; fix: list each environment once",
        f"{SHOWN}: manual_approval[0]: 'qa' is not in promotion; fix: use one of dev",
    ]


def test_the_ami_gate_compares_with_the_nearest_fabric_check_before_it(tmp_path: Path) -> None:
    write_config(tmp_path, {**valid_pipeline(), "fabric_check": ["dev", "staging"], "ami_gate": ["staging", "prod"]})
    pipeline = load_pipeline(tmp_path)
    assert [pipeline.ami_gate_source(env) for env in ("dev", "staging", "prod")] == [None, "dev", "staging"]
    assert load_pipeline().ami_gate == []  # shipped: off, as fabric_check is


def test_the_older_codestar_connections_arn_is_accepted(tmp_path: Path) -> None:
    arn = ARN.replace("codeconnections", "codestar-connections")
    write_config(tmp_path, {**valid_pipeline(), "connection_arn": arn})
    assert load_pipeline(tmp_path).connection_arn == arn


def test_missing_pipeline_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert pipeline_error(tmp_path) == [
        f"{SHOWN}: file not found; fix: create it with the tooling account, region, connection_arn, repository, "
        "branch and promotion (docs/operations.md: The pipeline)"
    ]


def test_empty_pipeline_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, "")
    assert pipeline_error(tmp_path) == [
        f"{SHOWN}: (top level): the file is empty; fix: write the pipeline's fields, starting with 'account: <tooling account id>'"
    ]


def test_yaml_error_names_line_and_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, "account: '444444444444'\npromotion: [dev, staging\n")
    (line,) = pipeline_error(tmp_path)
    assert line.startswith(f"{SHOWN}: line 3, column 1: YAML error: ")
    assert line.endswith("; fix: correct the YAML syntax")


def test_shipped_pipeline_config_loads_and_promotes_existing_environments() -> None:
    pipeline = load_pipeline()
    assert pipeline.promotion == ["dev", "staging", "prod"]
    assert set(pipeline.promotion) <= set(config.available_environments())


def test_the_pipeline_file_is_not_an_environment() -> None:
    assert config.available_environments() == ["dev", "prod", "staging"]


# --- one environment at a time ---------------------------------------------------------------------------------
# AWS PCS creates one cluster at a time per account and region (AWS PCS API Reference, CreateCluster: "There can
# only be 1 cluster in a Creating state per AWS Region per AWS account"). Two Slurm environments of one account and
# region must not deploy together: the pipeline never deploys two environments together, so the config needs no
# rule for it. These tests hold that true.


def test_the_pipeline_config_has_no_way_to_deploy_environments_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``promotion`` is one list, deployed in its order; there is no wave or parallel field to ask for more."""
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, {**valid_pipeline(), "waves": [["dev", "staging"], ["prod"]]})
    assert pipeline_error(tmp_path) == [f"{SHOWN}: waves: unknown key; fix: remove it or use one of {KEYS}"]


def test_environments_deploy_one_after_another_never_together(pipeline_synth: PipelineSynth) -> None:
    """Each environment's stacks deploy in a CodePipeline stage of their own, one per environment of
    ``promotion``, in its order; CodePipeline starts a stage only after the one before it succeeded, so no
    two environments (and no two PCS clusters) are ever being created at once."""
    owners = []
    for stage in pipeline_synth.stages:
        stacks = [a["Configuration"]["StackName"] for a in stage["Actions"] if a["ActionTypeId"]["Provider"] == "CloudFormation"]  # fmt: skip
        environments = {name.rsplit("-", 1)[0] for name in stacks}
        assert len(environments) <= 1, f"{stage['Name']} deploys {sorted(environments)} together"
        owners += [(stage["Name"], *environments)] if environments else []
    assert owners == [(name, name) for name in pipeline_synth.config.promotion]
    # and within an environment's stage the post-deploy check is the last action: the next stage waits for it
    for name in pipeline_synth.config.promotion:
        actions = pipeline_synth.stage(name)["Actions"]
        check = next(a for a in actions if a["Name"] == "PostDeployCheck")
        assert check["RunOrder"] == max(a["RunOrder"] for a in actions)
