"""Steps of the GitOps pipeline: the synth step and each environment's post-deploy check.

Both steps only call a script kept in the repository (``scripts/ci/``), so what
CodeBuild runs changes with the code, through review, without a buildspec change.
"""

from __future__ import annotations

from aws_cdk import DefaultStackSynthesizer, Duration, Stack, pipelines
from aws_cdk import aws_iam as iam
from constructs import Construct

#: The synth step's one command: install, the test suite, then ``cdk synth -c pipeline=true``.
SYNTH_SCRIPT = "scripts/ci/synth.sh"
#: The post-deploy check's one command: assume the check role, run scripts/check_environment.py.
CHECK_SCRIPT = "scripts/ci/post_deploy_check.sh"


def lookup_role_arn(scope: Construct, *, account: str, region: str) -> str:
    """The read-only role ``cdk bootstrap`` creates in every environment (ReadOnlyAccess, no kms:Decrypt).

    Bootstrapping with ``--trust <tooling account>`` lets the tooling account assume it.
    """
    qualifier = DefaultStackSynthesizer.DEFAULT_QUALIFIER
    return f"arn:{Stack.of(scope).partition}:iam::{account}:role/cdk-{qualifier}-lookup-role-{account}-{region}"


def synth_step(*, source: pipelines.IFileSetProducer) -> pipelines.CodeBuildStep:
    """The Build stage: the same commands as CI, then the cloud assembly the pipeline deploys (``cdk.out``)."""
    return pipelines.CodeBuildStep(
        "Synth",
        input=source,
        commands=[SYNTH_SCRIPT],
        primary_output_directory="cdk.out",
        timeout=Duration.minutes(60),
    )


def post_deploy_check(
    scope: Construct, *, environment: str, account: str, region: str, source: pipelines.IFileSetProducer
) -> pipelines.CodeBuildStep:
    """Run ``scripts/check_environment.py <environment> --json`` with read-only credentials of its account.

    A failing check (exit 1) or a check that cannot run (exit 2) fails the action,
    so the next environment is not deployed.
    """
    role_arn = lookup_role_arn(scope, account=account, region=region)
    return pipelines.CodeBuildStep(
        "PostDeployCheck",
        input=source,
        commands=[f"{CHECK_SCRIPT} {environment}"],
        env={"CHECK_ROLE_ARN": role_arn},
        role_policy_statements=[
            iam.PolicyStatement(sid="AssumeReadOnlyCheckRole", actions=["sts:AssumeRole"], resources=[role_arn])
        ],
        timeout=Duration.minutes(15),
    )


def manual_approval(*, environment: str) -> pipelines.ManualApprovalStep:
    """A person approves in the console before the environment's stacks are changed."""
    return pipelines.ManualApprovalStep(
        "Approve",
        comment=f"Deploy to {environment}: the previous environments deployed and passed their checks.",
    )
