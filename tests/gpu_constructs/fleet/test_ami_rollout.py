"""AmiRollout: a change of the AMI parameter fires the rule, the rule starts the runbook as the events role,
that role may only start this runbook and pass the runbook's own role to SSM, and the runbook's role may only
version these fleets' templates and refresh these groups."""

from __future__ import annotations

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from config.fleets import Refresh
from gpu_constructs.fleet.ami_rollout import AmiRollout, FleetRollout, refresh_preferences
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, document, only, template
from tests.policy_eval import Request, decide, role_may

PARAMETER = "/imagebuilder/gpu-platform/dev/ami/latest"
DOCUMENT = "gpu-platform-dev-ami-rollout"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{DOCUMENT}"
TEMPLATE = f"arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/lt-0aaa"
GROUPS = f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:uuid:autoScalingGroupName/"


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    AmiRollout(
        stack,
        "Rollout",
        document_name=DOCUMENT,
        role_name=DOCUMENT,
        rule_name=DOCUMENT,
        parameter_name=PARAMETER,
        fleets=[
            FleetRollout("mixed-efa", "gpu-platform-dev-mixed-efa", ["lt-0aaa"], refresh_preferences(Refresh(), ["a"]))
        ],
        node_role_arn=iam.Role(stack, "Node", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com")).role_arn,
    )
    return template(stack)


def _role_policy(tmpl: Template, description_start: str) -> dict:
    (lid,) = [
        lid
        for lid, p in tmpl.find_resources("AWS::IAM::ManagedPolicy").items()
        if p["Properties"]["Description"].startswith(description_start)
    ]
    return document(tmpl, lid)


def test_parameter_change_starts_the_runbook_as_the_events_role(tmpl: Template) -> None:
    _, rule = only(tmpl, "AWS::Events::Rule")
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.ssm"] and pattern["detail-type"] == ["Parameter Store Change"]
    assert pattern["detail"] == {"name": [PARAMETER], "operation": ["Create", "Update"]}
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == f"arn:aws:ssm:{REGION}:{ACCOUNT}:automation-definition/{DOCUMENT}:$DEFAULT"

    start = _role_policy(tmpl, "EventBridge")
    assert role_may([start], None, Request("ssm:StartAutomationExecution", f"{target['Arn'][:-8]}:$DEFAULT"))
    assert not role_may([start], None, Request("ssm:StartAutomationExecution", target["Arn"].replace(DOCUMENT, "x")))
    passed = {"iam:PassedToService": "ssm.amazonaws.com"}
    rollout_role = ROLE_ARN
    assert role_may([start], None, Request("iam:PassRole", rollout_role, context=passed))
    assert not role_may(
        [start], None, Request("iam:PassRole", rollout_role, context={"iam:PassedToService": "ec2.amazonaws.com"})
    )


def test_runbook_role_is_for_ssm_of_this_account_only(tmpl: Template) -> None:
    (lid,) = [
        lid for lid, r in tmpl.find_resources("AWS::IAM::Role").items() if r["Properties"].get("RoleName") == DOCUMENT
    ]
    trust = document(tmpl, lid, "AssumeRolePolicyDocument")
    ssm = {"Service": "ssm.amazonaws.com"}
    execution = f"arn:aws:ssm:{REGION}:{ACCOUNT}:automation-execution/e-1"
    own = {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": execution}
    assert decide([trust], Request("sts:AssumeRole", "*", ssm, own), resource_policy=True) == "Allow"
    other = {"aws:SourceAccount": "222222222222", "aws:SourceArn": execution.replace(ACCOUNT, "222222222222")}
    assert decide([trust], Request("sts:AssumeRole", "*", ssm, other), resource_policy=True) != "Allow"


def test_runbook_role_versions_only_these_templates_and_refreshes_only_these_groups(tmpl: Template) -> None:
    policy = _role_policy(tmpl, "AMI rollout")
    assert role_may([policy], None, Request("ec2:CreateLaunchTemplateVersion", TEMPLATE))
    assert not role_may([policy], None, Request("ec2:CreateLaunchTemplateVersion", TEMPLATE.replace("0aaa", "0bbb")))
    assert role_may([policy], None, Request("autoscaling:StartInstanceRefresh", f"{GROUPS}gpu-platform-dev-mixed-efa"))
    assert not role_may([policy], None, Request("autoscaling:StartInstanceRefresh", f"{GROUPS}gpu-platform-dev-other"))
    launch = {"ec2:LaunchTemplate": TEMPLATE, "ec2:IsLaunchTemplateResource": True}
    assert role_may([policy], None, Request("ec2:RunInstances", "*", context=launch))
    assert not role_may([policy], None, Request("ec2:RunInstances", "*"))


def test_runbook_reads_the_ami_then_refreshes_each_fleet_with_its_preferences(tmpl: Template) -> None:
    _, doc = only(tmpl, "AWS::SSM::Document")
    steps = doc["Properties"]["Content"]["mainSteps"]
    assert [s["name"] for s in steps] == ["ReadAmi", "RefreshMixedEfa"]
    refresh = steps[1]
    assert refresh["onFailure"] == "Continue"
    payload = refresh["inputs"]["InputPayload"]
    assert payload["ImageId"] == "{{ ReadAmi.ImageId }}"
    assert payload["Preferences"] == {"MinHealthyPercentage": 90, "InstanceWarmup": 600, "SkipMatching": True,
                                      "AutoRollback": True, "CheckpointPercentages": [50, 100],
                                      "CheckpointDelay": 900, "AlarmSpecification": {"Alarms": ["a"]},
                                      "BakeTime": 900}  # fmt: skip


def test_two_fleets_with_the_same_step_name_are_refused() -> None:
    stack = bare_stack()
    fleets = [FleetRollout("a-b", "g1", ["lt-1"]), FleetRollout("a--b", "g2", ["lt-2"])]
    with pytest.raises(ValueError, match="same runbook step name"):
        AmiRollout(stack, "R", document_name="d", role_name="r", rule_name="r", parameter_name=PARAMETER,
                   fleets=fleets, node_role_arn="arn:aws:iam::111111111111:role/n")  # fmt: skip


def test_preferences_carry_a_maximum_only_where_the_config_sets_one() -> None:
    """Left out, Auto Scaling terminates and launches at once; set (a served fleet: 100 and 200), it launches
    the replacement first (RefreshPreferences, Amazon EC2 Auto Scaling API Reference)."""
    assert "MaxHealthyPercentage" not in refresh_preferences(Refresh(), [])
    served = refresh_preferences(Refresh(min_healthy_percentage=100, max_healthy_percentage=200), [])
    assert (served["MinHealthyPercentage"], served["MaxHealthyPercentage"]) == (100, 200)
