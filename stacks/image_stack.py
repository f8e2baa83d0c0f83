"""ImageStack: the golden AMI's parameter and the Image Builder pipeline that refreshes it."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment, ImageSharing
from config.catalog import get_instance_type
from config.naming import ResourceNames
from gpu_constructs.image.ami_parameter_seed import AmiParameterSeed
from gpu_constructs.image.build_alerts import BuildFailureAlerts
from gpu_constructs.image.builder_role import ImageBuilderInstanceRole
from gpu_constructs.image.component import ImageComponent
from gpu_constructs.image.copy_role import ImageCopyRole
from gpu_constructs.image.distribution import ImageDistribution
from gpu_constructs.image.infrastructure import ImageInfrastructure
from gpu_constructs.image.key import ImageKey
from gpu_constructs.image.pipeline import ImagePipeline
from gpu_constructs.image.recipe import ImageRecipe
from stacks import image_build
from stacks.base import PlatformStack


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
        self.ami_parameter = self._ami_parameter(env, logs_key)
        self._nothing_built()
        if not env.image.build:
            self._receive(env, sharing)
            return
        self._build(
            env,
            sharing,
            vpc=vpc,
            builder_subnets=builder_subnets,
            logs_key=logs_key,
            access_log_bucket=access_log_bucket,
            alerts_topic=alerts_topic,
        )

    def _ami_parameter(self, env: Environment, logs_key: kms.IKey) -> AmiParameterSeed:
        """The AMI parameter the fleets launch from, in every environment.

        The first deploy needs an AMI before any golden image exists: the parameter is created
        with the public Deep Learning AMI if it is absent, and never written by CloudFormation
        again: each build's distribution overwrites it (a template-owned value would be reset
        by any update of the resource, and the rollout would follow it back).
        """
        return AmiParameterSeed(
            self,
            "AmiParameter",
            parameter_name=ResourceNames.of(env).ami_parameter,
            bootstrap_parameter=env.image.bootstrap_ami_parameter,
            description=f"GPU platform {env.name}: AMI id of GPU nodes (golden AMI; bootstrap: Deep Learning AMI)",
            logs_key=logs_key,
            log_retention=self.log_retention,
        )

    def _nothing_built(self) -> None:
        """The attributes of what the environment builds or receives, before it does either."""
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

    def _receive(self, env: Environment, sharing: ImageSharing) -> None:
        """Where the environment does not build: ``copy_role``, which the building account copies each AMI with.

        No pipeline: a build needs internet egress (apt, NVIDIA, PyPI, the EFA installer),
        which an isolated environment has not. The building environment copies each AMI
        into this account and writes its id into the parameter, through this role (where that
        environment is in another account).
        """
        source = sharing.source
        assert source is not None, f"{env.name} neither builds nor receives AMIs (config.sharing checks this)"
        if source.account != env.account:
            self.copy_role = ImageCopyRole(
                self,
                "AmiCopies",
                source_account=source.account,
                source_region=source.region,
                parameter_name=ResourceNames.of(env).ami_parameter,
            )

    def _build(
        self,
        env: Environment,
        sharing: ImageSharing,
        *,
        vpc: ec2.IVpc,
        builder_subnets: ec2.SubnetSelection,
        logs_key: kms.IKey,
        access_log_bucket: s3.IBucket,
        alerts_topic: sns.ITopic,
    ) -> None:
        """The pipeline of a building environment, its constructs in template order (``stacks/image_build.py``)."""
        self.key = image_build.ami_key(self, env, sharing)
        self.components = image_build.components(self, env)
        builder = get_instance_type(env.image.builder_instance_type)
        self.recipe = image_build.image_recipe(
            self, env, sharing, parts=self.components, builder=builder, kms_key_arn=self.key.key.key_arn
        )
        logs = image_build.build_log_places(
            self, env, logs_key=logs_key, access_log_bucket=access_log_bucket, retention=self.log_retention
        )
        self.log_bucket = logs.bucket
        self.builder_role = image_build.builder_role(self, self.components.values(), logs, logs_key)
        self.infrastructure = image_build.infrastructure(
            self,
            env,
            builder=builder,
            vpc=vpc,
            builder_subnets=builder_subnets,
            instance_profile=self.builder_role.instance_profile,
            log_bucket_name=self.log_bucket.bucket_name,
        )
        self.distribution = image_build.distribution(self, env, sharing)
        self.distribution.configuration.node.add_dependency(self.ami_parameter.resource)
        self.pipeline = image_build.image_pipeline(
            self, env, recipe=self.recipe, builders=self.infrastructure, copies=self.distribution, logs=logs
        )
        self.build_alerts = image_build.failure_alerts(self, env, alerts_topic)
