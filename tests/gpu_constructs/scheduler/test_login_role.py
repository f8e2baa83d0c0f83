"""The login nodes' role: the path PCS requires, Session Manager and registration, nothing of a GPU node's."""

from __future__ import annotations

from gpu_constructs.scheduler.login_role import SlurmLoginRole
from tests.gpu_constructs.helpers import bare_stack, key, template


def test_the_login_role_has_the_path_pcs_requires_and_session_manager_only() -> None:
    stack = bare_stack()
    SlurmLoginRole(
        stack, "Login", session_log_group_arn="arn:aws:logs:us-east-1:111111111111:log-group:s:*", logs_key=key(stack)
    )
    tmpl = template(stack)
    (role,) = tmpl.find_resources("AWS::IAM::Role").values()
    (profile,) = tmpl.find_resources("AWS::IAM::InstanceProfile").values()
    assert role["Properties"]["Path"] == profile["Properties"]["Path"] == "/aws-pcs/"
    actions = {
        action
        for policy in tmpl.find_resources("AWS::IAM::ManagedPolicy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert "pcs:RegisterComputeNodeGroupInstance" in actions
    assert not [a for a in actions if a.split(":")[0] in ("s3", "autoscaling", "cloudwatch", "ecr")]
