"""PipelineStack: CDK Pipelines from the repository through the environments of the promotion list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Environment as AwsEnvironment
from aws_cdk import Stack, Stage, pipelines
from aws_cdk import aws_codebuild as codebuild
from constructs import Construct

from config import Environment
from config.fleets import FleetRole
from config.pipeline_schema import Pipeline
from config.sharing import ImageSharing
from gpu_constructs.pipeline.pipeline_acknowledgments import acknowledge_pipeline_grants
from gpu_constructs.pipeline.pipeline_artifacts import PipelineArtifacts
from gpu_constructs.pipeline.pipeline_steps import fabric_check, manual_approval, post_deploy_check, synth_step
from stacks.platform_stage import PlatformStage

#: Construct id and CloudFormation name of the pipeline stack: ``cdk deploy -c pipeline=true gpu-platform-pipeline``.
PIPELINE_STACK_NAME = "gpu-platform-pipeline"
#: The Python every CodeBuild project of the pipeline runs (``runtime-versions`` of codebuild standard:7.0).
PYTHON_VERSION = "3.11"


class PipelineStack(Stack):
    """The pipeline, in the tooling account: Source, Build, UpdatePipeline, Assets, then one stage per environment.

    Each environment's ``PlatformStage`` is created beside this stack, in the app, as a
    laptop synth creates it: same construct paths, so the same templates (the VPC's
    Name tags carry the path) in the same ``cdk.out/assembly-<env>/`` folders. A
    stage deploys only after the one before it deployed and passed its post-deploy
    check; a stage listed in ``manual_approval`` waits for a person first.

    Attributes:
        pipeline: the ``pipelines.CodePipeline`` (built: ``pipeline.pipeline`` is the CodePipeline).
        stages: the ``PlatformStage`` of each environment, in promotion order.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str = PIPELINE_STACK_NAME,
        *,
        config: Pipeline,
        environments: Sequence[Environment],
        image_sharing: Mapping[str, ImageSharing],
        cli_version: str,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=construct_id,
            env=AwsEnvironment(account=config.account, region=config.region),
            description="GPU platform GitOps pipeline: promotes the repository through " + ", ".join(config.promotion),
            tags=dict(config.tags),
        )
        by_name = {env.name: env for env in environments}
        # CodeBuild clones the repository itself: a git checkout keeps the scripts' executable bits
        # and symlinks, which CodePipeline's zip of the source would drop.
        source = pipelines.CodePipelineSource.connection(
            config.repository, config.branch, connection_arn=config.connection_arn, code_build_clone_output=True
        )
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name="gpu-platform",
            synth=synth_step(source=source),
            self_mutation=True,
            cross_account_keys=True,
            enable_key_rotation=True,
            docker_enabled_for_synth=False,
            docker_enabled_for_self_mutation=False,
            publish_assets_in_parallel=False,
            cli_version=cli_version,
            # The synth step runs the whole test suite (two full synths, moto): more memory than the rest.
            synth_code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(compute_type=codebuild.ComputeType.MEDIUM)
            ),
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(
                    build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                    compute_type=codebuild.ComputeType.SMALL,
                    privileged=False,  # no Docker: the app has no container assets
                ),
                # The Python of the dev machine and of the pyproject's requires-python; the
                # image's default Python may change under us.
                partial_build_spec=codebuild.BuildSpec.from_object(
                    {"phases": {"install": {"runtime-versions": {"python": PYTHON_VERSION}}}}
                ),
            ),
        )
        app = Stage.of(self)
        if app is None:
            raise TypeError(f"{self.node.path}: the pipeline stack needs an app above it for its environments' stages")
        self.stages: list[PlatformStage] = []
        checks: dict[str, pipelines.CodeBuildStep] = {}
        fabric: dict[str, pipelines.CodeBuildStep] = {}
        for name in config.promotion:
            env = by_name[name]
            stage = PlatformStage(app, env=env, image_sharing=image_sharing[env.name])
            checks[name] = post_deploy_check(
                self, environment=name, account=env.account, region=env.region, source=source
            )
            post: list[pipelines.Step] = [checks[name]]
            if name in config.fabric_check:  # its stage made the role the step assumes (FleetStack)
                if stage.fleets.fabric_check_role is None:
                    raise TypeError(f"{name}: fabric_check lists it but its Fleets stack has no fabric check role")
                training = [f.name for f in env.fleets if f.role is FleetRole.TRAINING]
                fabric[name] = fabric_check(
                    self, environment=name, account=env.account, fleets=training, source=source, after=checks[name]
                )
                post.append(fabric[name])
            self.pipeline.add_stage(
                stage,
                pre=[manual_approval(environment=name)] if name in config.manual_approval else None,
                post=post,
            )
            self.stages.append(stage)
        # Built now rather than at synth, so that what it generates can be hardened and acknowledged.
        self.pipeline.build_pipeline()
        self.artifacts = PipelineArtifacts(self, "Artifacts", bucket=self.pipeline.pipeline.artifact_bucket)
        projects = {n: step.project for n, step in checks.items()}
        projects.update({f"{n} (fabric check)": step.project for n, step in fabric.items()})
        acknowledge_pipeline_grants(self.pipeline, check_projects=projects)
