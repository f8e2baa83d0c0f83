"""The constructs of an ImageStack whose environment builds the golden AMI, one function each.

Each one creates its construct directly in the stack (``scope``) under the id the stack has always given it;
``ImageStack`` calls them in template order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment, ImageSharing
from config.catalog import InstanceType
from config.image import COMPONENTS
from config.naming import ResourceNames
from config.sharing import DISTRIBUTION_ROLE_NAME
from gpu_constructs.image.build_alerts import BuildFailureAlerts, BuildLogPlaces
from gpu_constructs.image.build_logs import (
    BUILD_LOG_PREFIX,
    BuildLogs,
    build_logs,
    image_log_group_name,
    pipeline_log_group_name,
)
from gpu_constructs.image.builder_role import BuildAccess, ImageBuilderInstanceRole
from gpu_constructs.image.component import ComponentDocument, ImageComponent
from gpu_constructs.image.distribution import DistributionTarget, ImageDistribution
from gpu_constructs.image.infrastructure import ImageInfrastructure
from gpu_constructs.image.key import ImageKey
from gpu_constructs.image.pipeline import ImagePipeline
from gpu_constructs.image.recipe import ImageRecipe, RecipeStep

#: Root device of the Ubuntu 24.04 parents (Deep Learning AMI and Canonical's AMI alike).
ROOT_DEVICE = "/dev/sda1"
#: The test stage: DCGM diagnostics, the NCCL all-reduce and the torch checks take well under this.
TEST_TIMEOUT_MINUTES = 120


def image_name_of(env: Environment) -> str:
    """The name of the image, its recipe, infrastructure, distribution and pipeline: ``<prefix>-gpu-node``."""
    return f"{ResourceNames.of(env).prefix}-gpu-node"


def ami_key(scope: Construct, env: Environment, sharing: ImageSharing) -> ImageKey:
    """The key of the AMI's snapshots, usable by the distribution role of every account the AMI is copied to."""
    copy_accounts = sorted({t.account for t in sharing.targets if t.account != env.account})
    return ImageKey(
        scope,
        "AmiKey",
        alias=f"alias/gpu-platform/{env.name}/ami",
        description=f"GPU platform {env.name}: golden AMI snapshots (copied to {', '.join(copy_accounts) or 'no other account'})",
        copy_accounts=copy_accounts,
        copy_role_name=DISTRIBUTION_ROLE_NAME,
    )


def components(scope: Construct, env: Environment) -> dict[str, ImageComponent]:
    """Component key -> its component, in recipe order: those of every image, and where the image is for a Slurm
    environment (its PCS pins, config/sharing.py), AWS PCS's agent and Slurm (``COMPONENTS.SLURM_COMPONENTS``)."""
    prefix = ResourceNames.of(env).prefix
    return {key: _component(scope, key, prefix=prefix) for key in COMPONENTS.recipe_order(slurm=carries_pcs(env))}


def carries_pcs(env: Environment) -> bool:
    """Whether ``env``'s image carries AWS PCS's software: its builder pins it where it or an environment it builds
    for has a ``slurm:`` section, and only there (config/image.py, config/sharing.py)."""
    return "PcsSlurmVersion" in env.image.versions


def _component(scope: Construct, key: str, *, prefix: str) -> ImageComponent:
    """The component of one document of ``scripts/image/components/``."""
    document = ComponentDocument.parse(COMPONENTS.document(key))
    return ImageComponent(
        scope, f"Component-{key}", name=f"{prefix}-{key}", description=document.description, document=document.document
    )


def image_recipe(
    scope: Construct,
    env: Environment,
    sharing: ImageSharing,
    *,
    parts: Mapping[str, ImageComponent],
    builder: InstanceType,
    kms_key_arn: str,
) -> ImageRecipe:
    """The recipe: the parent image, then ``parts`` in order, each with its parameters' values."""
    image = env.image
    parameter_values = {
        **image.versions,
        "PipIndexUrl": image.pip_index_url,
        "ExpectedGpuCount": str(builder.gpu_count),
        # Where an EFA fleet (here or in share_with) launches the image, its test checks the EFA
        # software those fleets need; the test instance has no EFA device (Image Builder attaches
        # none), so the devices are checked on each EFA node at launch by the node bootstrap.
        "ExpectEfa": "true" if sharing.efa else "false",
        # AWS's PCS installers are published in each region's bucket; the build downloads them in its own.
        "PcsRegion": env.region,
    }
    pcs = ", AWS PCS agent and Slurm" if carries_pcs(env) else ""
    return ImageRecipe(
        scope,
        "Recipe",
        name=image_name_of(env),
        description=f"GPU platform {env.name}: NVIDIA driver, CUDA, EFA/NCCL, PyTorch, node services{pcs}",
        parent_image=f"ssm:{image.parent_image_parameter}",
        steps=[
            RecipeStep(component, {p: parameter_values[p] for p in COMPONENTS.parameters(key)})
            for key, component in parts.items()
        ],
        root_device_name=ROOT_DEVICE,
        root_volume_gib=image.root_volume_gib,
        kms_key_arn=kms_key_arn,
    )


def log_bucket_name_of(env: Environment) -> str:
    """``gpu-platform-<env>-image-logs-<account>-<region>``."""
    return f"{ResourceNames.of(env).prefix}-image-logs-{env.account}-{env.region}"


def build_log_places(
    scope: Construct,
    env: Environment,
    *,
    logs_key: kms.IKey,
    access_log_bucket: s3.IBucket,
    retention: logs.RetentionDays,
) -> BuildLogs:
    """The build log bucket and the image's and pipeline's log groups.

    Logs outlive a replaced image stack where the environment is protected; elsewhere the
    bucket must be emptied by hand before the stack can be deleted (no auto-delete).
    """
    return build_logs(
        scope,
        image_name=image_name_of(env),
        bucket_name=log_bucket_name_of(env),
        logs_key=logs_key,
        access_log_bucket=access_log_bucket,
        transition_days=env.audit.log_transition_days,
        expiration_days=env.audit.log_expiration_days,
        retention=retention,
        removal_policy=RemovalPolicy.RETAIN if env.protect_stateful_resources else RemovalPolicy.DESTROY,
    )


def builder_role(
    scope: Construct, parts: Iterable[ImageComponent], logs: BuildLogs, logs_key: kms.IKey
) -> ImageBuilderInstanceRole:
    """The build and test instances' role: the recipe's components, the build logs and their key."""
    return ImageBuilderInstanceRole(
        scope,
        "Builder",
        access=BuildAccess(
            components=list(parts),
            log_bucket_arn=logs.bucket_arn,
            log_prefix=BUILD_LOG_PREFIX,
            log_key_arn=logs_key.key_arn,
            log_group_arn=logs.image_logs.log_group_arn,
        ),
    )


def infrastructure(
    scope: Construct,
    env: Environment,
    *,
    builder: InstanceType,
    vpc: ec2.IVpc,
    builder_subnets: ec2.SubnetSelection,
    instance_profile: iam.IInstanceProfile,
    log_bucket_name: str,
) -> ImageInfrastructure:
    """Where builds run: ``builder`` instances in the first builder subnet, in a group of their own."""
    return ImageInfrastructure(
        scope,
        "Infrastructure",
        name=image_name_of(env),
        description=f"GPU platform {env.name}: {builder.instance_type} builders in a private GPU subnet",
        instance_types=[builder.instance_type],
        instance_profile=instance_profile,
        subnet_id=_first_subnet(vpc, builder_subnets),
        security_group_ids=[_builder_security_group(scope, vpc).security_group_id],
        log_bucket_name=log_bucket_name,
        log_prefix=BUILD_LOG_PREFIX,
        resource_tags={**env.tags, "Name": f"{ResourceNames.of(env).prefix}-image-builder"},
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


def distribution(scope: Construct, env: Environment, sharing: ImageSharing) -> ImageDistribution:
    """The AMI, tagged with what it holds, here and in every target, each copy's id into its parameter."""
    image, image_name = env.image, image_name_of(env)
    return ImageDistribution(
        scope,
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
        parameter_name=ResourceNames.of(env).ami_parameter,
        targets=[
            DistributionTarget(account=t.account, region=t.region, parameter_name=t.parameter_name)
            for t in sharing.targets
        ],
    )


def image_pipeline(
    scope: Construct,
    env: Environment,
    *,
    recipe: ImageRecipe,
    builders: ImageInfrastructure,
    copies: ImageDistribution,
    logs: BuildLogs,
) -> ImagePipeline:
    """The weekly (``image.schedule``) pipeline of the recipe, on ``builders``, distributed as ``copies``."""
    return ImagePipeline(
        scope,
        "Pipeline",
        name=image_name_of(env),
        description=f"GPU platform {env.name}: weekly golden AMI for the GPU fleets, GPU-tested",
        recipe_arn=recipe.arn,
        infrastructure_arn=builders.arn,
        distribution_arn=copies.arn,
        schedule=env.image.schedule,
        test_timeout_minutes=TEST_TIMEOUT_MINUTES,
        image_log_group_name=logs.image_logs.log_group_name,
        pipeline_log_group_name=logs.pipeline_logs.log_group_name,
    )


def failure_alerts(scope: Construct, env: Environment, topic: sns.ITopic) -> BuildFailureAlerts:
    """A failed or stopped build to ``topic``, with where its logs are."""
    image_name = image_name_of(env)
    return BuildFailureAlerts(
        scope,
        "BuildFailed",
        rule_name=ResourceNames.of(env).image_build_failed_rule,
        image_name=image_name,
        topic=topic,
        logs=BuildLogPlaces(
            image_log_group=image_log_group_name(image_name),
            pipeline_log_group=pipeline_log_group_name(image_name),
            log_bucket=log_bucket_name_of(env),
            log_prefix=BUILD_LOG_PREFIX,
        ),
    )
