"""PlatformKeys: four rotating keys, each usable by the services that need it and by nobody else's:
an alarm of this environment may use the alerts key, another alarm may not; CloudTrail only for this
account's trails; Auto Scaling's linked role for node volumes, matched by ARN."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from gpu_constructs.security.platform_keys import PlatformKeys
from tests.gpu_constructs.helpers import ACCOUNT, DESTROY, REGION, bare_stack, document, template
from tests.policy_eval import Request, key_policy_may

PREFIX = "gpu-platform-dev"
ALARM = f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{PREFIX}-train-health-check-failed"
AUTOSCALING_ROLE = (
    f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
)


@pytest.fixture(scope="module")
def tmpl() -> Template:
    stack = bare_stack()
    PlatformKeys(
        stack, "Keys", env_name="dev", alarm_prefix=PREFIX, alerts_topic_name=f"{PREFIX}-alerts", removal_policy=DESTROY
    )
    return template(stack)


def _key(tmpl: Template, name: str) -> dict:
    (lid,) = [lid for lid in tmpl.find_resources("AWS::KMS::Key") if lid.startswith(f"Keys{name}")]
    return document(tmpl, lid, "KeyPolicy")


def test_four_keys_rotate_and_wait_30_days_before_deletion(tmpl: Template) -> None:
    tmpl.resource_count_is("AWS::KMS::Key", 4)
    tmpl.all_resources_properties("AWS::KMS::Key", {"EnableKeyRotation": True, "PendingWindowInDays": 30})
    aliases = {a["Properties"]["AliasName"] for a in tmpl.find_resources("AWS::KMS::Alias").values()}
    assert aliases == {f"alias/gpu-platform/dev/{k}" for k in ("logs", "data", "trail", "alerts")}


def _cloudwatch(alarm_arn: str) -> Request:
    return Request(
        "kms:GenerateDataKey",
        "*",
        {"Service": "cloudwatch.amazonaws.com"},
        {"aws:SourceArn": alarm_arn, "aws:SourceAccount": ACCOUNT},
    )


def test_only_this_environments_alarms_may_use_the_alerts_key(tmpl: Template) -> None:
    alerts = _key(tmpl, "Alerts")
    assert key_policy_may(alerts, _cloudwatch(ALARM))
    assert not key_policy_may(alerts, _cloudwatch(ALARM.replace(PREFIX, "gpu-platform-prod")))
    assert not key_policy_may(alerts, _cloudwatch(ALARM.replace(ACCOUNT, "222222222222")))
    # ...and the alarms of this environment get nothing from the other keys.
    assert not key_policy_may(_key(tmpl, "Data"), _cloudwatch(ALARM))


def test_auto_scaling_linked_role_encrypts_node_volumes_with_the_data_key(tmpl: Template) -> None:
    data = _key(tmpl, "Data")
    as_role = {"AWS": AUTOSCALING_ROLE}
    context = {"aws:PrincipalArn": AUTOSCALING_ROLE, "kms:CallerAccount": ACCOUNT}
    assert key_policy_may(data, Request("kms:GenerateDataKeyWithoutPlaintext", "*", as_role, context))
    grant = Request("kms:CreateGrant", "*", as_role, context)
    assert not key_policy_may(data, grant)  # a grant only for an AWS resource
    assert key_policy_may(
        data, Request("kms:CreateGrant", "*", as_role, {**context, "kms:GrantIsForAWSResource": True})
    )
    other = {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/someone", "kms:CallerAccount": ACCOUNT}
    assert not key_policy_may(data, Request("kms:Decrypt", "*", {"AWS": other["aws:PrincipalArn"]}, other))


def test_cloudtrail_may_encrypt_only_this_accounts_trails(tmpl: Template) -> None:
    trail = _key(tmpl, "Trail")

    def write(trail_account: str) -> Request:
        return Request(
            "kms:GenerateDataKey",
            "*",
            {"Service": "cloudtrail.amazonaws.com"},
            {
                "kms:EncryptionContext:aws:cloudtrail:arn": f"arn:aws:cloudtrail:{REGION}:{trail_account}:trail/t",
                "aws:SourceAccount": trail_account,
            },
        )

    assert key_policy_may(trail, write(ACCOUNT))
    assert not key_policy_may(trail, write("222222222222"))


def test_cloudwatch_logs_of_this_account_only_use_the_logs_key(tmpl: Template) -> None:
    logs = _key(tmpl, "Logs")
    service = {"Service": f"logs.{REGION}.amazonaws.com"}

    def encrypt(account: str) -> Request:
        context = {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{REGION}:{account}:log-group:/g"}
        return Request("kms:Encrypt", "*", service, context)

    assert key_policy_may(logs, encrypt(ACCOUNT))
    assert not key_policy_may(logs, encrypt("222222222222"))
