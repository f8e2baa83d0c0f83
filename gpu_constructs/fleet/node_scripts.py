"""The node scripts (``scripts/node/``) and the examples (``examples/``: the example service and training job)
as S3 assets of the fleet stack, and the policy that lets GPU nodes fetch them at boot: the one way the
scripts reach a node, so a script fix ships with the templates it goes with and needs no AMI build."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from gpu_constructs.fleet.render.user_data import NodeScripts

NODE_SCRIPTS_DIR = Path(__file__).resolve().parents[2] / "scripts" / "node"
#: Unpacked on every node under /opt/gpu-platform/examples/ (a service or a job runs them from there).
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
#: Not needed on a node: bytecode caches and the maintainers' notes.
EXCLUDE = ["__pycache__", "*.pyc", "README.md"]


@dataclass(frozen=True)
class PublishedNodeScripts:
    """``location``: where the user data fetches the zip; ``read_policy``: a fleet's group depends on it, so
    no node launches before it may fetch its scripts."""

    location: NodeScripts
    read_policy: iam.ManagedPolicy


def publish_node_scripts(scope: Construct, *, node_role: iam.IRole) -> PublishedNodeScripts:
    """The assets (construct ids ``NodeScripts``, ``NodeExamples``) and ``s3:GetObject`` on their two objects
    for the node role (``NodeScriptsRead``), all created directly in ``scope`` so their logical ids are the
    stack's own. Both assets of a stack go to its one file-asset bucket."""
    asset = s3_assets.Asset(scope, "NodeScripts", path=str(NODE_SCRIPTS_DIR), exclude=EXCLUDE)
    examples = s3_assets.Asset(scope, "NodeExamples", path=str(EXAMPLES_DIR), exclude=["__pycache__", "*.pyc"])
    partition = Stack.of(scope).partition
    read_policy = iam.ManagedPolicy(
        scope,
        "NodeScriptsRead",
        description="GPU nodes read the node scripts and the examples of this stack's assets",
        roles=[node_role],
        statements=[
            iam.PolicyStatement(
                actions=["s3:GetObject"],
                resources=[
                    f"arn:{partition}:s3:::{asset.s3_bucket_name}/{asset.s3_object_key}",
                    f"arn:{partition}:s3:::{examples.s3_bucket_name}/{examples.s3_object_key}",
                ],
            )
        ],
    )
    location = NodeScripts(
        bucket_name=asset.s3_bucket_name, object_key=asset.s3_object_key, examples_object_key=examples.s3_object_key
    )
    return PublishedNodeScripts(location, read_policy)
