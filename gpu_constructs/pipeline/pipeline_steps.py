"""Steps of the GitOps pipeline: the synth step, each environment's post-deploy check, the opt-in fabric check
and AMI gate.

Each step only calls a script kept in the repository (``scripts/ci/``), so what
CodeBuild runs changes with the code, through review, without a buildspec change.
"""

from __future__ import annotations

from aws_cdk import DefaultStackSynthesizer, Duration, Stack, pipelines
from aws_cdk import aws_iam as iam
from constructs import Construct

from config.pipeline_schema import (
    ami_gate_role_name,
    ami_gate_step_role_name,
    fabric_check_role_name,
    fabric_step_role_name,
)

#: The synth step's one command: install, the test suite, then ``cdk synth -c pipeline=true``.
SYNTH_SCRIPT = "scripts/ci/synth.sh"
#: The post-deploy check's one command: assume the check role, run scripts/check_environment.py.
CHECK_SCRIPT = "scripts/ci/post_deploy_check.sh"
#: The fabric check's one command: assume the environment's fabric check role, fabric-test each training fleet.
FABRIC_SCRIPT = "scripts/ci/fabric_check.sh"
#: The AMI gate's one command: assume the environment's AMI gate role, compare its AMI with the one tested.
GATE_SCRIPT = "scripts/ci/ami_gate.sh"
#: The fabric check's exported variable: the name of the AMI its nodes were booted from (``not tested: ...``
#: when no fleet had two nodes), written by FABRIC_SCRIPT to FABRIC_AMI_FILE.
FABRIC_AMI_VARIABLE = "FABRIC_AMI_NAME"
FABRIC_AMI_FILE = "fabric-ami-name.txt"
#: ``--timeout`` of each benchmark run; a fleet takes at most four runs (all nodes, then up to three waves of
#: pairs), each after a start of at most five minutes.
FABRIC_RUN_TIMEOUT_S = 600
#: CodeBuild's limit on a build, in minutes (5 to 480 in every region).
MAX_BUILD_MINUTES = 480


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


def fabric_check(
    scope: Construct,
    *,
    environment: str,
    account: str,
    fleets: list[str],
    source: pipelines.IFileSetProducer,
    after: pipelines.Step,
) -> pipelines.CodeBuildStep:
    """Run ``gpu-platform job fabric-test --json --allow-idle`` on each training fleet of ``environment``, after
    ``after`` (its read-only check), as the environment's role ``gpu-platform-<env>-fabric-check``.

    The step's project runs as a role named ``gpu-platform-pipeline-<env>-fabric-check``, the one principal that
    role trusts. A fleet below its floor (exit 1) or a run that failed (exit 2) fails the action; a fleet with
    fewer than two nodes passes (``--allow-idle``).
    """
    stack = Stack.of(scope)
    role_arn = f"arn:{stack.partition}:iam::{account}:role/{fabric_check_role_name(environment)}"
    project_role = iam.Role(
        scope,
        f"FabricCheckRole-{environment}",
        role_name=fabric_step_role_name(environment),
        description=f"GPU platform pipeline: the fabric check of {environment}",
        assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
    )
    per_fleet = 4 * (FABRIC_RUN_TIMEOUT_S + 300) // 60
    step = pipelines.CodeBuildStep(
        "FabricCheck",
        input=source,
        # The second command exports, in the build's shell, what the script wrote (buildspec 0.2: one shell).
        commands=[
            f"{FABRIC_SCRIPT} {environment} {' '.join(fleets)}",
            f'export {FABRIC_AMI_VARIABLE}="$(cat "$FABRIC_AMI_FILE")"',
        ],
        env={
            "FABRIC_ROLE_ARN": role_arn,
            "FABRIC_RUN_TIMEOUT_S": str(FABRIC_RUN_TIMEOUT_S),
            "FABRIC_AMI_FILE": FABRIC_AMI_FILE,
        },
        role=project_role,
        role_policy_statements=[
            iam.PolicyStatement(sid="AssumeFabricCheckRole", actions=["sts:AssumeRole"], resources=[role_arn])
        ],
        timeout=Duration.minutes(min(15 + per_fleet * len(fleets), MAX_BUILD_MINUTES)),
    )
    step.add_step_dependency(after)
    return step


def ami_gate(
    scope: Construct,
    *,
    environment: str,
    account: str,
    tested_in: str,
    tested_ami: str,
    source: pipelines.IFileSetProducer,
) -> pipelines.CodeBuildStep:
    """Refuse ``environment``'s deploy unless its golden AMI has the name ``tested_ami`` (the FabricCheck step of
    ``tested_in``: its exported variable), as the environment's role ``gpu-platform-<env>-ami-gate``.

    The step's project runs as a role named ``gpu-platform-pipeline-<env>-ami-gate``, the one principal that role
    trusts; it may assume that role and nothing else in the environment's account.
    """
    stack = Stack.of(scope)
    role_arn = f"arn:{stack.partition}:iam::{account}:role/{ami_gate_role_name(environment)}"
    project_role = iam.Role(
        scope,
        f"AmiGateRole-{environment}",
        role_name=ami_gate_step_role_name(environment),
        description=f"GPU platform pipeline: the AMI gate of {environment}",
        assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
    )
    return pipelines.CodeBuildStep(
        "AmiGate",
        input=source,
        commands=[f"{GATE_SCRIPT} {environment} {tested_in}"],
        env={"GATE_ROLE_ARN": role_arn, "TESTED_AMI_NAME": tested_ami},
        role=project_role,
        role_policy_statements=[
            iam.PolicyStatement(sid="AssumeAmiGateRole", actions=["sts:AssumeRole"], resources=[role_arn])
        ],
        timeout=Duration.minutes(15),
    )


def manual_approval(*, environment: str) -> pipelines.ManualApprovalStep:
    """A person approves in the console before the environment's stacks are changed."""
    return pipelines.ManualApprovalStep(
        "Approve",
        comment=f"Deploy to {environment}: the previous environments deployed and passed their checks.",
    )
