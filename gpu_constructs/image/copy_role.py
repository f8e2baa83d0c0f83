"""In an account that receives AMIs from another account's Image Builder: the role it copies them with."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from config.sharing import DISTRIBUTION_ROLE_NAME
from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.image.key import SNAPSHOT_KEY_USE

#: The service-linked role Image Builder distributes with when a pipeline has no execution role.
IMAGE_BUILDER_SERVICE_ROLE = "aws-service-role/imagebuilder.amazonaws.com/AWSServiceRoleForImageBuilder"


class ImageCopyRole(Construct):
    """``EC2ImageBuilderDistributionCrossAccountRole``, assumable only by the building account's Image Builder.

    When the building account's distribution names this account in ``TargetAccountIds``,
    Image Builder's service-linked role there assumes this role to copy the AMI into this
    account and, for ``SsmParameterConfigurations`` with ``AmiAccountId`` = this account,
    to write the copy's id into ``parameter_name`` here. The trust policy names the source
    account and holds it to that service-linked role (``aws:PrincipalArn``), so no person
    or other role of the building account can assume it.

    One customer-managed policy, in place of the AWS managed
    ``Ec2ImageBuilderCrossAccountDistributionAccess`` (whose actions it keeps, held to AMIs
    and snapshots of the source's region and this one):

    - copy: ``ec2:CopyImage``; ``ec2:DescribeImages`` (also what the ``aws:ec2:image``
      parameter type validates with); tag the copies and set their attributes
      (``ec2:CreateTags``, ``ec2:ModifyImageAttribute``);
    - the AMI parameter: ``ssm:PutParameter`` on that one parameter;
    - the source snapshots' key: decrypt and re-encrypt through the copy (keys of the source
      account in its region; the source key's policy names this role, no other key does).
      The copy is encrypted with this account's default EBS key, whose AWS managed policy
      already lets EC2 use it for any principal of the account.

    Attributes:
        role.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        source_account: str,
        source_region: str,
        parameter_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        arn = f"arn:{stack.partition}"
        image_builder = f"{arn}:iam::{source_account}:role/{IMAGE_BUILDER_SERVICE_ROLE}"
        self.role = iam.Role(
            self,
            "Role",
            role_name=DISTRIBUTION_ROLE_NAME,
            assumed_by=iam.AccountPrincipal(source_account).with_conditions(
                {"ArnEquals": {"aws:PrincipalArn": image_builder}}
            ),
            description=f"Image Builder of account {source_account} copies golden AMIs here and writes their id",
        )
        source_keys = f"{arn}:kms:{source_region}:{source_account}:key/*"
        regions = sorted({source_region, stack.region})
        # Image and snapshot ARNs carry no account: the source AMI (its region) and the copy (this one).
        copied = [f"{arn}:ec2:{r}::{kind}/*" for r in regions for kind in ("image", "snapshot")]
        copies = f"{arn}:ec2:{stack.region}::image/*"
        policy = iam.ManagedPolicy(
            self,
            "Copy",
            description="Copy golden AMIs from the building account into this one and write the copy's id",
            roles=[self.role],
            statements=_copy_statements(
                stack, copied=copied, copies=copies, source_keys=source_keys, parameter_name=parameter_name
            ),
        )
        _acknowledge_copy_scopes(
            policy, copied=copied, copies=copies, source_keys=source_keys, source_account=source_account
        )


def _copy_statements(
    stack: Stack, *, copied: list[str], copies: str, source_keys: str, parameter_name: str
) -> list[iam.PolicyStatement]:
    """Copy ``copied`` into ``copies``, describe, tag, write ``parameter_name``, use the source snapshots' keys."""
    arn = f"arn:{stack.partition}"
    return [
        iam.PolicyStatement(sid="CopyAmis", actions=["ec2:CopyImage"], resources=copied),
        iam.PolicyStatement(
            sid="DescribeAmis",
            actions=["ec2:DescribeImages"],
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
        ),
        iam.PolicyStatement(
            sid="TagAmiCopies", actions=["ec2:CreateTags", "ec2:ModifyImageAttribute"], resources=[copies]
        ),
        iam.PolicyStatement(
            sid="WriteAmiParameter",
            actions=["ssm:PutParameter"],
            resources=[f"{arn}:ssm:{stack.region}:{stack.account}:parameter{parameter_name}"],
        ),
        iam.PolicyStatement(sid="SourceSnapshotKey", actions=SNAPSHOT_KEY_USE, resources=[source_keys]),
        iam.PolicyStatement(
            sid="SourceSnapshotKeyGrants",
            actions=["kms:CreateGrant"],
            resources=[source_keys],
            conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
        ),
    ]


def _acknowledge_copy_scopes(
    policy: iam.ManagedPolicy, *, copied: list[str], copies: str, source_keys: str, source_account: str
) -> None:
    """The wildcards of the copy policy, each with why it is the narrowest scope there is."""
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        "ec2:DescribeImages has no resource type (Service Authorization Reference); it is read-only and held to "
        "this region. Image Builder checks the copy with it, and the aws:ec2:image parameter type validates with it.",
    )
    for pattern in dict.fromkeys([*copied, copies]):
        acknowledge(
            policy,
            f"AwsSolutions-IAM5[Resource::{pattern}]",
            "A copy creates a new AMI and snapshots whose ids are unknown until it runs, from a source AMI that "
            "each build replaces; AMI and snapshot ARNs carry no account, so the region is the narrowest scope. "
            "These are the actions of AWS's Ec2ImageBuilderCrossAccountDistributionAccess for this role.",
        )
    acknowledge(
        policy,
        f"AwsSolutions-IAM5[Resource::{source_keys}]",
        f"The source snapshots' key is created in account {source_account}, so its id is unknown here; that "
        "account's key policies decide, and only its AMI key names this role.",
    )
