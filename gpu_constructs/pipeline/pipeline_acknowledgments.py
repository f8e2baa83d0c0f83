"""Acknowledgments of the grants CDK Pipelines generates for the pipeline's own roles.

CDK Pipelines writes every role's policy itself, from its grant helpers: the
wildcard actions (``s3:GetObject*``, ``kms:ReEncrypt*``) and the per-build
resources (log streams, report groups) are its choice, scoped to the pipeline's
own bucket, key, projects and the bootstrap roles. Each acknowledgment below names
the exact finding on the one policy that has it; a new grant (a new wildcard, a
new resource) is therefore a new finding that fails the synth until it is read.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import CfnResource, Stack, pipelines
from aws_cdk import aws_codebuild as codebuild
from constructs import IConstruct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.compliance.cfn_child import cfn_child

_IAM5 = "AwsSolutions-IAM5"
_INLINE = "NIST.800.53.R5-IAMNoInlinePolicy"

ARTIFACT_READ = {
    "Action::s3:GetObject*": "CDK's read grant on the pipeline's artifact bucket (GetObject, its versions, ACL and "
    "tagging reads); the statement names only that bucket.",
    "Action::s3:GetBucket*": "CDK's read grant on the pipeline's artifact bucket (bucket location, versioning); "
    "the statement names only that bucket.",
    "Action::s3:List*": "CDK's read grant on the pipeline's artifact bucket (list objects and versions); the "
    "statement names only that bucket.",
}
ARTIFACT_WRITE = {
    "Action::s3:DeleteObject*": "CDK's write grant on the pipeline's artifact bucket, for the output artifacts this "
    "role stores; the statement names only that bucket.",
    "Action::s3:Abort*": "CDK's write grant on the pipeline's artifact bucket: abort an interrupted multipart upload "
    "of an output artifact; the statement names only that bucket.",
}
ARTIFACT_KEY = {
    "Action::kms:GenerateDataKey*": "CDK's encrypt grant on the artifact bucket's key, the one resource of the "
    "statement: artifacts written by this role are encrypted with it.",
    "Action::kms:ReEncrypt*": "CDK's encrypt grant on the artifact bucket's key, the one resource of the statement.",
}


def _default_policy(role: IConstruct | None) -> IConstruct:
    if role is None:  # CDK Pipelines gives every project and the pipeline a role; a None is a CDK change
        raise TypeError("a CDK Pipelines role expected for its default policy's acknowledgments, found none")
    return role.node.find_child("DefaultPolicy")


def _ack(policy: IConstruct, findings: dict[str, str]) -> None:
    for finding, reason in findings.items():
        acknowledge(policy, f"{_IAM5}[{finding}]", reason)


def _inline(policy: IConstruct, what: str) -> None:
    acknowledge(
        policy,
        _INLINE,
        f"CDK Pipelines attaches the grants it generates for {what} as that role's default policy; the role "
        "serves only this pipeline, so a managed policy would have no other user.",
    )


def _logical_id(construct: IConstruct) -> str:
    return Stack.of(construct).get_logical_id(cfn_child(construct, CfnResource))


def _arn(stack: Stack, service: str) -> str:
    """``arn:aws:<service>:<region>:<account>`` of the pipeline stack, as the finding ids spell it."""
    return f"arn:{stack.partition}:{service}:{stack.region}:{stack.account}"


def _project_findings(project: codebuild.IProject) -> dict[str, str]:
    """The log group and report groups CodeBuild names after ``project``."""
    stack = Stack.of(project)
    project_id = _logical_id(project)
    return {
        f"Resource::{_arn(stack, 'logs')}:log-group:/aws/codebuild/<{project_id}>:*": "Log streams of this "
        "project's own log group, one per build, are named at build time.",
        f"Resource::{_arn(stack, 'codebuild')}:report-group/<{project_id}>-*": "Test report groups of this "
        "project are named after it by CodeBuild.",
    }


def acknowledge_pipeline_grants(
    pipeline: pipelines.CodePipeline, *, check_projects: Mapping[str, codebuild.IProject]
) -> None:
    """Acknowledge, policy by policy, the findings on the roles of a built ``pipeline``.

    ``check_projects``: the project of each step that checks an environment (its post-deploy check, its fabric
    check, its AMI gate), by a label that names the environment and the step.
    """
    code_pipeline = pipeline.pipeline
    objects = {
        f"Resource::<{_logical_id(code_pipeline.artifact_bucket)}.Arn>/*": "Artifacts are objects under keys "
        "CodePipeline generates per execution, in the pipeline's own artifact bucket."
    }
    read = {**ARTIFACT_READ, **objects}
    read_write = {**read, **ARTIFACT_WRITE, **ARTIFACT_KEY}
    stack = Stack.of(pipeline)

    policy = _default_policy(code_pipeline.role)
    _ack(policy, read_write)
    _inline(policy, "the CodePipeline service role")

    # CodePipeline creates the source action's role under the action's construct.
    for action in code_pipeline.node.find_child("Source").node.children:
        policy = _default_policy(action.node.find_child("CodePipelineActionRole"))
        _ack(policy, read_write)
        _inline(policy, "the source action (it stores the source artifact)")

    policy = _default_policy(pipeline.synth_project.role)
    _ack(policy, {**read_write, **_project_findings(pipeline.synth_project)})
    _inline(policy, "the synth project")

    mutation = pipeline.self_mutation_project
    policy = _default_policy(mutation.role)
    _ack(policy, {**read, **ARTIFACT_KEY, **_project_findings(mutation)})
    _ack(
        policy,
        {
            f"Resource::arn:*:iam::{stack.account}:role/*": "Self-mutation assumes the CDK bootstrap roles of the "
            "tooling account to deploy the pipeline stack; the statement is limited to roles tagged "
            "aws-cdk:bootstrap-role deploy, file-publishing or image-publishing.",
            "Resource::*": "cloudformation:DescribeStacks and s3:ListBucket, which the CDK CLI calls on the "
            "bootstrap stack and its bucket before it deploys; both only read.",
        },
    )
    _inline(policy, "the self-mutation project")

    for label, project in check_projects.items():
        policy = _default_policy(project.role)
        _ack(policy, {**read, **ARTIFACT_KEY, **_project_findings(project)})
        _inline(policy, f"the check step {label}")

    assets = pipeline.node.try_find_child("Assets")  # absent while the app has no file assets
    if assets is not None:
        _acknowledge_asset_role(_default_policy(assets.node.find_child("FileRole")), stack, read=read)

    _inline(_default_policy(pipeline.node.find_child("CodeBuildActionRole")), "the CodeBuild actions")


def _acknowledge_asset_role(policy: IConstruct, stack: Stack, *, read: dict[str, str]) -> None:
    """The asset publishing role: reads the cloud assembly, starts its projects, assumes the file-publishing roles."""
    _ack(
        policy,
        {
            **read,
            f"Resource::{_arn(stack, 'logs')}:log-group:/aws/codebuild/*": "The asset publishing projects are "
            "created by CDK Pipelines with generated names; this role writes only their build logs.",
            f"Resource::{_arn(stack, 'codebuild')}:report-group/*": "Report groups of the generated asset "
            "publishing projects; the statement has report actions only.",
            "Resource::*": "codebuild:StartBuild/BatchGetBuilds/StopBuild as CDK Pipelines grants them to the asset "
            "role; the publishing itself goes through the environments' file-publishing roles named in the policy.",
        },
    )
    _inline(policy, "asset publishing")
