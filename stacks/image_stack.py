"""ImageStack: the golden AMI's parameter and the Image Builder pipeline that refreshes it."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment, ImageSharing
from config.catalog import get_instance_type
from config.image import COMPONENTS
from config.naming import ResourceNames
from config.sharing import DISTRIBUTION_ROLE_NAME
from gpu_constructs.image.ami_parameter_seed import AmiParameterSeed
from gpu_constructs.image.build_alerts import BuildFailureAlerts, BuildLogPlaces
from gpu_constructs.image.build_logs import (
    BUILD_LOG_PREFIX,
    build_logs,
    image_log_group_name,
    pipeline_log_group_name,
)
from gpu_constructs.image.image_builder_role import BuildAccess, ImageBuilderInstanceRole
from gpu_constructs.image.image_component import ComponentDocument, ImageComponent
from gpu_constructs.image.image_copy_role import ImageCopyRole
from gpu_constructs.image.image_distribution import DistributionTarget, ImageDistribution
from gpu_constructs.image.image_infrastructure import ImageInfrastructure
from gpu_constructs.image.image_key import ImageKey
from gpu_constructs.image.image_pipeline import ImagePipeline
from gpu_constructs.image.image_recipe import ImageRecipe, RecipeStep
from stacks.base import PlatformStack

#: Root device of the Ubuntu 24.04 parents (Deep Learning AMI and Canonical's AMI alike).
ROOT_DEVICE = "/dev/sda1"
#: The test stage: DCGM diagnostics, the NCCL all-reduce and the torch checks take well under this.
TEST_TIMEOUT_MINUTES = 120


class ImageStack(PlatformStack):
    """The golden AMI of one environment: built here, or received from the building environment.

    Attributes: ``ami_parameter`` (AmiParameterSeed: ``/imagebuilder/gpu-platform/<env>/ami/latest``,
    data type ``aws:ec2:image``, in every environment, created if absent and never owned by the template); where the environment builds (``image.build``):
    ``key`` (ImageKey), ``components`` (component key -> ImageComponent, in recipe order),
    ``recipe``, ``log_bucket``, ``builder_role``, ``infrastructure``, ``distribution``,
    ``pipeline``, ``build_alerts`` (a failed or stopped build to ``alerts_topic``); where it receives
    another account's AMIs: ``copy_role`` (ImageCopyRole). What does not apply is empty or None.

    ``sharing`` says which (config.sharing): a building environment's distribution copies each
    AMI to the accounts of ``sharing.targets`` and writes the copy's id into their parameter;
    a receiving one holds the parameter (bootstrap value until the first copy) and the role
    the building account's Image Builder copies and writes with.

    Build logs go to a bucket of their own, ``gpu-platform-<env>-image-logs-<account>-<region>``
    (hardened like every bucket, SSE-KMS with the ``logs`` key, access logs to
    ``access_log_bucket``, the audit lifecycle), prefix ``image-builder/``. Not into the access
    log bucket itself: that one is SSE-S3 only because S3 server access logging demands it, and
    a bucket named here lets the build role's statement and its acknowledgment name the ARN.
    The AMI's snapshots are encrypted with ``key`` (alias ``alias/gpu-platform/<env>/ami``),
    not the account's default EBS key, whose snapshots cannot be copied to another account;
    ``data_key`` is not used: the fleets re-encrypt their volumes with it at launch.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env: Environment,
        sharing: ImageSharing,
        vpc: ec2.IVpc,
        builder_subnets: ec2.SubnetSelection,
        logs_key: kms.IKey,
        data_key: kms.IKey,
        access_log_bucket: s3.IBucket,
        alerts_topic: sns.ITopic,
    ) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=False, description=f"GPU platform {env.name}: golden AMI"
        )
        names = ResourceNames.of(env)
        image = env.image
        # The first deploy needs an AMI before any golden image exists: the parameter is created
        # with the public Deep Learning AMI if it is absent, and never written by CloudFormation
        # again: each build's distribution overwrites it (a template-owned value would be reset
        # by any update of the resource, and the rollout would follow it back).
        self.ami_parameter = AmiParameterSeed(
            self,
            "AmiParameter",
            parameter_name=names.ami_parameter,
            bootstrap_parameter=image.bootstrap_ami_parameter,
            description=f"GPU platform {env.name}: AMI id of GPU nodes (golden AMI; bootstrap: Deep Learning AMI)",
            logs_key=logs_key,
            log_retention=self.log_retention,
        )
        self.components: dict[str, ImageComponent] = {}
        self.recipe: ImageRecipe | None = None
        self.log_bucket: s3.IBucket | None = None
        self.builder_role: ImageBuilderInstanceRole | None = None
        self.infrastructure: ImageInfrastructure | None = None
        self.distribution: ImageDistribution | None = None
        self.pipeline: ImagePipeline | None = None
        self.build_alerts: BuildFailureAlerts | None = None
        self.key: ImageKey | None = None
        self.copy_role: ImageCopyRole | None = None
        if not image.build:
            # No pipeline: a build needs internet egress (apt, NVIDIA, PyPI, the EFA installer),
            # which an isolated environment has not. The building environment copies each AMI
            # into this account and writes its id into the parameter, through this role.
            source = sharing.source
            assert source is not None, f"{env.name} neither builds nor receives AMIs (config.sharing checks this)"
            if source.account != env.account:
                self.copy_role = ImageCopyRole(
                    self,
                    "AmiCopies",
                    source_account=source.account,
                    source_region=source.region,
                    parameter_name=names.ami_parameter,
                )
            return

        copy_accounts = sorted({t.account for t in sharing.targets if t.account != env.account})
        self.key = ImageKey(
            self,
            "AmiKey",
            alias=f"alias/gpu-platform/{env.name}/ami",
            description=f"GPU platform {env.name}: golden AMI snapshots (copied to {', '.join(copy_accounts) or 'no other account'})",
            copy_accounts=copy_accounts,
            copy_role_name=DISTRIBUTION_ROLE_NAME,
        )

        image_name = f"{names.prefix}-gpu-node"
        self.components = {key: _component(self, key, prefix=names.prefix) for key in COMPONENTS.RECIPE_ORDER}
        builder = get_instance_type(image.builder_instance_type)
        parameter_values = {
            **image.versions,
            "PipIndexUrl": image.pip_index_url,
            "ExpectedGpuCount": str(builder.gpu_count),
            # Where an EFA fleet (here or in share_with) launches the image, its test checks the EFA
            # software those fleets need; the test instance has no EFA device (Image Builder attaches
            # none), so the devices are checked on each EFA node at launch by the node bootstrap.
            "ExpectEfa": "true" if sharing.efa else "false",
        }
        self.recipe = ImageRecipe(
            self,
            "Recipe",
            name=image_name,
            description=f"GPU platform {env.name}: NVIDIA driver, CUDA, EFA/NCCL, PyTorch, node services",
            parent_image=f"ssm:{image.parent_image_parameter}",
            steps=[
                RecipeStep(component, {p: parameter_values[p] for p in COMPONENTS.parameters(key)})
                for key, component in self.components.items()
            ],
            root_device_name=ROOT_DEVICE,
            root_volume_gib=image.root_volume_gib,
            kms_key_arn=self.key.key.key_arn,
        )

        # Logs outlive a replaced image stack where the environment is protected; elsewhere the
        # bucket must be emptied by hand before the stack can be deleted (no auto-delete).
        log_bucket_name = f"{names.prefix}-image-logs-{env.account}-{env.region}"
        build_log = build_logs(
            self,
            image_name=image_name,
            bucket_name=log_bucket_name,
            logs_key=logs_key,
            access_log_bucket=access_log_bucket,
            transition_days=env.audit.log_transition_days,
            expiration_days=env.audit.log_expiration_days,
            retention=self.log_retention,
            removal_policy=RemovalPolicy.RETAIN if env.protect_stateful_resources else RemovalPolicy.DESTROY,
        )
        self.log_bucket = build_log.bucket
        self.builder_role = ImageBuilderInstanceRole(
            self,
            "Builder",
            access=BuildAccess(
                components=list(self.components.values()),
                log_bucket_arn=build_log.bucket_arn,
                log_prefix=BUILD_LOG_PREFIX,
                log_key_arn=logs_key.key_arn,
                log_group_arn=build_log.image_logs.log_group_arn,
            ),
        )
        self.infrastructure = ImageInfrastructure(
            self,
            "Infrastructure",
            name=image_name,
            description=f"GPU platform {env.name}: {builder.instance_type} builders in a private GPU subnet",
            instance_types=[builder.instance_type],
            instance_profile=self.builder_role.instance_profile,
            subnet_id=_first_subnet(vpc, builder_subnets),
            security_group_ids=[_builder_security_group(self, vpc).security_group_id],
            log_bucket_name=self.log_bucket.bucket_name,
            log_prefix=BUILD_LOG_PREFIX,
            resource_tags={**env.tags, "Name": f"{names.prefix}-image-builder"},
        )
        self.distribution = ImageDistribution(
            self,
            "Distribution",
            name=image_name,
            description=f"GPU platform {env.name}: golden GPU node AMI",
            region=env.region,
            ami_name_prefix=image_name,
            ami_tags={
                **env.tags,
                "Name": image_name,
                **image.versions,
                "PipIndexUrl": image.pip_index_url,
                "ParentImage": f"ssm:{image.parent_image_parameter}",
            },
            parameter_name=names.ami_parameter,
            targets=[
                DistributionTarget(account=t.account, region=t.region, parameter_name=t.parameter_name)
                for t in sharing.targets
            ],
        )
        self.distribution.configuration.node.add_dependency(self.ami_parameter.resource)
        self.pipeline = ImagePipeline(
            self,
            "Pipeline",
            name=image_name,
            description=f"GPU platform {env.name}: weekly golden AMI for the GPU fleets, GPU-tested",
            recipe_arn=self.recipe.arn,
            infrastructure_arn=self.infrastructure.arn,
            distribution_arn=self.distribution.arn,
            schedule=image.schedule,
            test_timeout_minutes=TEST_TIMEOUT_MINUTES,
            image_log_group_name=build_log.image_logs.log_group_name,
            pipeline_log_group_name=build_log.pipeline_logs.log_group_name,
        )
        self.build_alerts = BuildFailureAlerts(
            self,
            "BuildFailed",
            rule_name=names.image_build_failed_rule,
            image_name=image_name,
            topic=alerts_topic,
            logs=BuildLogPlaces(
                image_log_group=image_log_group_name(image_name),
                pipeline_log_group=pipeline_log_group_name(image_name),
                log_bucket=log_bucket_name,
                log_prefix=BUILD_LOG_PREFIX,
            ),
        )


def _component(scope: Construct, key: str, *, prefix: str) -> ImageComponent:
    """The component of one document of ``scripts/image/components/``."""
    document = ComponentDocument.parse(COMPONENTS.document(key))
    return ImageComponent(
        scope, f"Component-{key}", name=f"{prefix}-{key}", description=document.description, document=document.document
    )


def _first_subnet(vpc: ec2.IVpc, selection: ec2.SubnetSelection) -> str:
    """The first subnet (first zone) of ``selection``: a build needs one subnet, any GPU subnet will do."""
    selected = vpc.select_subnets(
        availability_zones=selection.availability_zones,
        one_per_az=selection.one_per_az,
        subnet_filters=selection.subnet_filters,
        subnet_group_name=selection.subnet_group_name,
        subnets=selection.subnets,
        subnet_type=selection.subnet_type,
    )
    return selected.subnet_ids[0]


def _builder_security_group(scope: Construct, vpc: ec2.IVpc) -> ec2.SecurityGroup:
    """The build and test instances' own group: no ingress; out, HTTPS and HTTP (Ubuntu's apt mirrors
    serve signed packages over HTTP) through the building environment's NAT. GPU nodes keep theirs
    to what a node calls."""
    group = ec2.SecurityGroup(
        scope,
        "BuilderSecurityGroup",
        vpc=vpc,
        description="Image Builder build and test instances: package sources over HTTPS and HTTP, no ingress",
        allow_all_outbound=False,
    )
    group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS through NAT: AWS, NVIDIA, PyPI, EFA")
    group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP through NAT: apt mirrors")
    return group
