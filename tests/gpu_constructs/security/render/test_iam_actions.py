"""ssm_agent_statements: the SSM agent's channels in this region only, and registration of its own instances."""

from __future__ import annotations

from gpu_constructs.security.render.iam_actions import SSM_AGENT_CHANNELS, ssm_agent_statements
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack
from tests.policy_eval import Request, decide


def test_channels_are_held_to_the_region_and_registration_to_this_account() -> None:
    stack = bare_stack()
    statements = [stack.resolve(s.to_statement_json()) for s in ssm_agent_statements(stack, channels_sid="Channels")]
    policy = {"Statement": statements}
    assert statements[0]["Sid"] == "Channels"
    for action in SSM_AGENT_CHANNELS:
        assert decide([policy], Request(action, "*", context={"aws:RequestedRegion": REGION})) == "Allow"
        assert decide([policy], Request(action, "*", context={"aws:RequestedRegion": "eu-west-1"})) != "Allow"
    register = "ssm:UpdateInstanceInformation"
    assert decide([policy], Request(register, f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1")) == "Allow"
    assert decide([policy], Request(register, f"arn:aws:ec2:{REGION}:222222222222:instance/i-1")) != "Allow"
