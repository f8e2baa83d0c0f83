"""The customer-managed key of the golden AMI's snapshots, usable by the accounts the AMI is copied to."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpu_constructs.security.platform_keys import service_linked_role

#: What a principal that copies or launches from a snapshot needs on its key (Amazon EBS user
#: guide, "Share the KMS key used to encrypt a shared Amazon EBS snapshot"); kms:CreateGrant
#: separately, held to grants for AWS resources.
SNAPSHOT_KEY_USE = [
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
]


class ImageKey(Construct):
    """A KMS key (rotation on, retained) that encrypts the build's root volume, hence the AMI's snapshots.

    A snapshot encrypted with the account's default EBS key (``aws/ebs``) cannot be shared
    or copied to another account; one encrypted with this key can. Its policy keeps CDK's
    account statement (IAM of this account decides who else uses it; Image Builder's
    service-linked role does, through EC2) and adds:

    - this account's Auto Scaling service-linked role, which launches the fleets of this
      environment from the AMI (and re-encrypts their volumes with the data key);
    - in each of ``copy_accounts``, only the role ``copy_role_name`` (the role Image Builder
      assumes there to copy the AMI): the copy decrypts the snapshots with this key and
      re-encrypts them with that account's own default EBS key, so nothing in those accounts
      needs this key after the copy.

    The key is retained whatever the stack's removal policy: the AMIs outlive the stack.

    Attributes:
        key.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alias: str,
        description: str,
        copy_accounts: Sequence[str],
        copy_role_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.key = kms.Key(
            self,
            "Key",
            alias=alias,
            description=description,
            enable_key_rotation=True,
            pending_window=Duration.days(30),
            removal_policy=RemovalPolicy.RETAIN,
        )
        # By ARN in a condition: the role exists only after the account's first Auto Scaling group.
        autoscaling = service_linked_role(stack, "autoscaling.amazonaws.com", "AWSServiceRoleForAutoScaling")
        self.key.add_to_resource_policy(autoscaling.statement("AutoScalingLaunchesFromTheAmi", SNAPSHOT_KEY_USE))
        self.key.add_to_resource_policy(
            autoscaling.statement(
                "AutoScalingGrantsForItsVolumes", ["kms:CreateGrant"], {"Bool": {"kms:GrantIsForAWSResource": "true"}}
            )
        )
        if not copy_accounts:
            return
        accounts = sorted(copy_accounts)
        # Account principals with the role named in a condition: a key policy naming a role
        # that does not exist yet is refused, and the receiving accounts deploy after this one.
        copy_roles = {
            "ArnEquals": {
                "aws:PrincipalArn": [f"arn:{stack.partition}:iam::{a}:role/{copy_role_name}" for a in accounts]
            }
        }
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ReceivingAccountsCopyTheAmi",
                principals=[iam.AccountPrincipal(a) for a in accounts],
                actions=SNAPSHOT_KEY_USE,
                resources=["*"],
                conditions=copy_roles,
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ReceivingAccountsGrantsForTheCopy",
                principals=[iam.AccountPrincipal(a) for a in accounts],
                actions=["kms:CreateGrant"],
                resources=["*"],
                conditions={**copy_roles, "Bool": {"kms:GrantIsForAWSResource": "true"}},
            )
        )
