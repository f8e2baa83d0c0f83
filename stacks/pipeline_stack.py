"""PipelineStack: CDK Pipelines from the repository through the environments of the promotion list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Environment as AwsEnvironment
from aws_cdk import Stack, Stage, pipelines
from aws_cdk import aws_codebuild as codebuild
from constructs import Construct

from config import Environment
from config.fleets import FleetRole, Scheduler
from config.pipeline_schema import Pipeline, PipelineRoles
from config.sharing import ImageSharing
from gpu_constructs.pipeline.pipeline_acknowledgments import acknowledge_pipeline_grants
from gpu_constructs.pipeline.pipeline_artifacts import PipelineArtifacts
from gpu_constructs.pipeline.pipeline_steps import (
    FABRIC_AMI_VARIABLE,
    ami_gate,
    fabric_check,
    manual_approval,
    post_deploy_check,
    synth_step,
)
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
    check; a stage listed in ``manual_approval`` waits for a person first; one listed in
    ``ami_gate`` then deploys only if its golden AMI is the one an earlier fabric check ran on.

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
        pipeline_roles: Mapping[str, PipelineRoles],
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
        # CodeBuild clones the repository itself: a git checkout keeps the scripts' executable bits
        # and symlinks, which CodePipeline's zip of the source would drop.
        source = pipelines.CodePipelineSource.connection(
            config.repository, config.branch, connection_arn=config.connection_arn, code_build_clone_output=True
        )
        self.pipeline = self._code_pipeline(source, cli_version)
        app = Stage.of(self)
        if app is None:
            raise TypeError(f"{self.node.path}: the pipeline stack needs an app above it for its environments' stages")
        self.stages: list[PlatformStage] = []
        self._checks: dict[str, pipelines.CodeBuildStep] = {}
        self._fabric: dict[str, pipelines.CodeBuildStep] = {}
        self._gates: dict[str, pipelines.CodeBuildStep] = {}
        by_name = {env.name: env for env in environments}
        for name in config.promotion:
            env = by_name[name]
            stage = PlatformStage(app, env=env, image_sharing=image_sharing[name], pipeline_roles=pipeline_roles[name])
            self.stages.append(self._add_stage(stage, config, env, source))
        # Built now rather than at synth, so that what it generates can be hardened and acknowledged.
        self.pipeline.build_pipeline()
        self.artifacts = PipelineArtifacts(self, "Artifacts", bucket=self.pipeline.pipeline.artifact_bucket)
        projects = {f"{n} (post-deploy check)": step.project for n, step in self._checks.items()}
        projects.update({f"{n} (fabric check)": step.project for n, step in self._fabric.items()})
        projects.update({f"{n} (AMI gate)": step.project for n, step in self._gates.items()})
        acknowledge_pipeline_grants(self.pipeline, check_projects=projects)

    def _code_pipeline(self, source: pipelines.CodePipelineSource, cli_version: str) -> pipelines.CodePipeline:
        """The pipeline itself: synth from ``source``, self-mutation, cross-account keys, CodeBuild defaults."""
        return pipelines.CodePipeline(
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

    def _add_stage(
        self, stage: PlatformStage, config: Pipeline, env: Environment, source: pipelines.IFileSetProducer
    ) -> PlatformStage:
        """``env``'s stage (beside this stack in the app) in its wave: approval and gate before, checks after."""
        self._checks[env.name] = post_deploy_check(
            self, environment=env.name, account=env.account, region=env.region, source=source
        )
        post: list[pipelines.Step] = [self._checks[env.name]]
        if env.name in config.fabric_check:
            post.append(self._fabric_check(stage, env, source))
        pre = self._pre_steps(config, stage, env, source)
        self.pipeline.add_stage(stage, pre=pre or None, post=post)
        return stage

    def _fabric_check(
        self, stage: PlatformStage, env: Environment, source: pipelines.IFileSetProducer
    ) -> pipelines.CodeBuildStep:
        """The FabricCheck step of ``env``, after its read-only check; its stage made the role the step assumes."""
        if stage.fleets.fabric_check_role is None:
            raise TypeError(f"{env.name}: fabric_check lists it but its Fleets stack has no fabric check role")
        # The Auto Scaling training fleets: a Slurm fleet's fabric is tested as a Slurm job (docs/operations.md).
        training = [f.name for f in env.fleets if f.role is FleetRole.TRAINING and f.scheduler is Scheduler.NONE]
        step = fabric_check(
            self,
            environment=env.name,
            account=env.account,
            fleets=training,
            source=source,
            after=self._checks[env.name],
        )
        self._fabric[env.name] = step
        return step

    def _pre_steps(
        self, config: Pipeline, stage: PlatformStage, env: Environment, source: pipelines.IFileSetProducer
    ) -> list[pipelines.Step]:
        """What runs before ``env``'s stacks are changed: the approval, then the AMI gate.

        The gate runs after the approval, right before the deploy: an approval can wait for days, and an AMI
        that reaches the parameter while it waits is caught by a gate that runs once it is given.
        """
        pre: list[pipelines.Step] = []
        if env.name in config.manual_approval:
            pre.append(manual_approval(environment=env.name))
        if env.name in config.ami_gate:
            tested_in = config.ami_gate_source(env.name)
            if tested_in is None:  # the config refuses this; never deploy a gated environment without its gate
                raise TypeError(f"{env.name}: ami_gate lists it but no fabric_check environment comes before it")
            if stage.fleets.ami_gate_role is None:
                raise TypeError(f"{env.name}: ami_gate lists it but its Fleets stack has no AMI gate role")
            gate = ami_gate(
                self,
                environment=env.name,
                account=env.account,
                tested_in=tested_in,
                tested_ami=self._fabric[tested_in].exported_variable(FABRIC_AMI_VARIABLE),
                source=source,
            )
            for step in pre:
                gate.add_step_dependency(step)
            self._gates[env.name] = gate
            pre.append(gate)
        return pre
