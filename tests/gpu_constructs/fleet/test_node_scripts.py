"""publish_node_scripts: the scripts zip and the examples zip are assets of the stack, and the node role may read
those two objects only."""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from gpu_constructs.fleet.node_scripts import publish_node_scripts
from tests.gpu_constructs.helpers import bare_stack, document, only, template
from tests.policy_eval import Request, role_may


def test_node_role_reads_the_published_object_only() -> None:
    stack = bare_stack()
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    published = publish_node_scripts(stack, node_role=role)
    tmpl = template(stack)
    policy_id, policy = only(tmpl, "AWS::IAM::ManagedPolicy")
    assert policy["Properties"]["Roles"] == [{"Ref": only(tmpl, "AWS::IAM::Role")[0]}]
    bucket, key = stack.resolve(published.location.bucket_name), stack.resolve(published.location.object_key)
    examples = stack.resolve(published.location.examples_object_key)
    assert key.endswith(".zip") and examples.endswith(".zip") and key != examples
    grant = document(tmpl, policy_id)
    assert role_may([grant], None, Request("s3:GetObject", f"arn:aws:s3:::{bucket}/{key}"))
    assert role_may([grant], None, Request("s3:GetObject", f"arn:aws:s3:::{bucket}/{examples}"))
    assert not role_may([grant], None, Request("s3:GetObject", f"arn:aws:s3:::{bucket}/other.zip"))
    assert not role_may([grant], None, Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}"))
