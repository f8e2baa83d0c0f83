"""GpuNodeRole: what a GPU node may do and nothing more. Followed through its policies with the evaluator:
metrics only in its namespace, checkpoints writable and datasets read-only, hooks only of the platform's
own groups, parameters only of its environment, job output only into the job log group."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.security.node_role import GpuNodeRole, NodeAccess
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, document, key, managed_policies, only, template
from tests.policy_eval import Request, decide, role_may

BUCKET = f"gpu-platform-dev-data-{ACCOUNT}-{REGION}"
ACCESS = NodeAccess(
    data_bucket_name=BUCKET,
    metrics_namespace="GpuPlatform/dev",
    node_log_group_prefix="/gpu-platform/dev/node/",
    session_log_group_arn=f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/gpu-platform/dev/ssm-sessions:*",
    job_log_group_arn=f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/gpu-platform/dev/jobs:*",
    asg_name_prefix="gpu-platform-dev-",
    ssm_parameter_prefix="/gpu-platform/dev/",
)


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    GpuNodeRole(stack, "Node", access=ACCESS, data_key=key(stack, "Data"), logs_key=key(stack, "Logs"))
    return template(stack)


@pytest.fixture(scope="module")
def policies(tmpl: Template) -> list[dict]:
    return managed_policies(tmpl)


def _may(policies: list[dict], action: str, resource: str, **context: object) -> bool:
    return role_may(policies, None, Request(action, resource, context=context))


def test_role_is_for_ec2_with_an_instance_profile(tmpl: Template) -> None:
    role_id, _ = only(tmpl, "AWS::IAM::Role")
    trust = document(tmpl, role_id, "AssumeRolePolicyDocument")
    assert (
        decide([trust], Request("sts:AssumeRole", "*", {"Service": "ec2.amazonaws.com"}), resource_policy=True)
        == "Allow"
    )
    tmpl.has_resource_properties("AWS::IAM::InstanceProfile", {"Roles": [{"Ref": role_id}]})
    tmpl.resource_count_is("AWS::IAM::Policy", 0)  # one managed policy per concern, no inline one


def test_metrics_only_in_the_platform_namespace(policies: list[dict]) -> None:
    assert _may(policies, "cloudwatch:PutMetricData", "*", **{"cloudwatch:namespace": "GpuPlatform/dev"})
    assert not _may(policies, "cloudwatch:PutMetricData", "*", **{"cloudwatch:namespace": "AWS/EC2"})


def test_datasets_are_read_only_and_checkpoints_writable(policies: list[dict]) -> None:
    objects = f"arn:aws:s3:::{BUCKET}"
    assert _may(policies, "s3:GetObject", f"{objects}/datasets/shard-0")
    assert not _may(policies, "s3:PutObject", f"{objects}/datasets/shard-0")
    assert _may(policies, "s3:PutObject", f"{objects}/checkpoints/job/step-1")
    assert not _may(policies, "s3:DeleteObject", f"{objects}/checkpoints/job/step-1")
    assert not _may(policies, "s3:GetObject", f"{objects}/other/x")
    assert _may(policies, "s3:ListBucket", objects, **{"s3:prefix": "checkpoints/job/"})
    assert not _may(policies, "s3:ListBucket", objects, **{"s3:prefix": "other/"})


def test_lifecycle_hooks_only_of_the_platforms_groups(policies: list[dict]) -> None:
    group = f"arn:aws:autoscaling:{REGION}:{ACCOUNT}:autoScalingGroup:uuid:autoScalingGroupName/"
    assert _may(policies, "autoscaling:CompleteLifecycleAction", f"{group}gpu-platform-dev-train")
    assert not _may(policies, "autoscaling:CompleteLifecycleAction", f"{group}someone-elses")
    assert not _may(policies, "autoscaling:SetDesiredCapacity", f"{group}gpu-platform-dev-train")


def test_parameters_only_of_its_environment(policies: list[dict]) -> None:
    parameter = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/gpu-platform/"
    assert _may(policies, "ssm:GetParameter", f"{parameter}dev/fsx/id")
    assert not _may(policies, "ssm:GetParameter", f"{parameter}prod/fsx/id")
    assert not _may(policies, "ssm:PutParameter", f"{parameter}dev/fsx/id")


def test_job_output_only_into_streams_of_the_job_log_group(policies: list[dict]) -> None:
    group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/gpu-platform/dev/jobs"
    stream = f"{group}:log-stream:train-1/i-0123456789abcdef0"
    assert _may(policies, "logs:CreateLogStream", stream)
    assert _may(policies, "logs:PutLogEvents", stream)
    # Nothing else on the job logs: no reading other jobs' output, no deleting, no retention change.
    for action in ("logs:GetLogEvents", "logs:FilterLogEvents", "logs:DeleteLogStream", "logs:PutRetentionPolicy"):
        assert not _may(policies, action, stream), action
    assert not _may(policies, "logs:DeleteLogGroup", f"{group}:*")
    # ... and not into another environment's job group.
    assert not _may(policies, "logs:PutLogEvents", stream.replace("/dev/", "/prod/"))
