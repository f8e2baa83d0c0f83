#!/usr/bin/env python3
"""The GPU platform CDK app: one PlatformStage per environment, or the pipeline that promotes them.

``cdk synth`` synthesizes every environment in ``config/``; ``cdk synth -c env=dev``
only one (``-c env=dev,prod`` several; ``-c config_dir=PATH`` reads another folder).
``cdk synth -c pipeline=true`` synthesizes the pipeline stack instead, with one
stage per environment of ``config/pipeline/pipeline.yaml``'s promotion list under
it: what the pipeline itself deploys. A config mistake prints one line per problem
and exits 2; an unacknowledged rule finding prints the findings and exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import App

from config import ConfigError, Environment, Platform, load_platform
from config.loader import CONFIG_DIR, platform_of
from config.pipeline_schema import Pipeline, load_pipeline, pinned_cdk_cli_version, pipeline_roles
from stacks.compliance import FAIL_ON_FINDINGS, enforce_rule_packs, platform_app
from stacks.platform_stage import PlatformStage

ROOT = Path(__file__).resolve().parent


def add_platform(app: App, environments: Sequence[Environment], *, platform: Platform | None = None) -> App:
    """Add one stage per environment to ``app`` and enforce the rule packs on it.

    ``platform`` holds every environment, for what one stage needs of the others (where its
    AMIs come from or go to); by default the files of ``config/`` with ``environments`` in
    place of theirs.
    """
    platform = platform or platform_of(environments)
    for env in environments:
        PlatformStage(
            app,
            env=env,
            image_sharing=platform.sharing(env.name),
            pipeline_roles=pipeline_roles(env, platform.config_dir),
        )
    enforce_rule_packs(app)
    return app


def add_pipeline(app: App, pipeline: Pipeline, platform: Platform) -> App:
    """Add the pipeline stack (its environments' stages beside it) to ``app`` and enforce the rule packs on it."""
    # Imported here: CDK Pipelines loads the AWS CLI asset library (about half a second), which
    # an environment synth does not need.
    from stacks.pipeline_stack import PipelineStack

    PipelineStack(
        app,
        config=pipeline,
        environments=platform.selected_environments,
        image_sharing={env.name: platform.sharing(env.name) for env in platform.selected_environments},
        pipeline_roles={env.name: pipeline_roles(env, platform.config_dir) for env in platform.selected_environments},
        cli_version=pinned_cdk_cli_version(ROOT / "package.json"),
    )
    enforce_rule_packs(app)
    return app


def selected_names(app_context_env: str | None) -> list[str] | None:
    """``-c env=dev`` or ``-c env=dev,prod`` -> names; absent -> every environment."""
    if not app_context_env:
        return None
    return [n.strip() for n in str(app_context_env).split(",") if n.strip()]


def pipeline_requested(value: object) -> bool:
    """``-c pipeline=true`` (the CLI passes a string) or ``True`` (tests)."""
    return str(value).lower() == "true"


def build(app: App) -> App:
    """The stages or the pipeline the context asks for; raises ConfigError on a config mistake."""
    names = selected_names(app.node.try_get_context("env"))
    config_dir = app.node.try_get_context("config_dir")
    folder = Path(config_dir) if config_dir else CONFIG_DIR
    if not pipeline_requested(app.node.try_get_context("pipeline")):
        # Every file is read (the rules between environments need them all); only ``names`` are synthesized.
        platform = load_platform(names, folder)
        return add_platform(app, platform.selected_environments, platform=platform)
    if names is not None:
        raise ConfigError(
            [
                "-c env: the pipeline deploys the environments of its promotion list, not a selection; "
                "fix: drop -c env, or drop -c pipeline=true to synthesize environments for a laptop deploy"
            ]
        )
    pipeline = load_pipeline(folder)
    return add_pipeline(app, pipeline, load_platform(pipeline.promotion, folder))


def main(app: App | None = None) -> int:
    """Build and synthesize ``app`` (by default the App the CDK CLI describes: cdk.json's context, -c values
    and the output folder, through the environment); 2 on a config mistake, 1 on a rule finding."""
    app = app or platform_app()
    # The CLI asks the app not to fail on rule findings; this project's synth must.
    app.node.set_context(FAIL_ON_FINDINGS, True)
    try:
        build(app)
    except ConfigError as err:
        for line in err.lines:
            print(line, file=sys.stderr)
        return 2
    try:
        app.synth()
    except RuntimeError as err:
        if "ValidationFailed" not in str(err):
            raise
        print(
            f"synth failed: unacknowledged rule findings above (report: {app.outdir}/validation-report.json)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
