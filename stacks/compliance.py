"""Compliance rule packs that run on every stack at every synth, and the app they run in."""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks

#: Context key that makes ``app.synth()`` raise on error-level findings (the CLI sets it false).
FAIL_ON_FINDINGS = "@aws-cdk/core:failSynthOnValidationErrors"


def platform_app(**props: Any) -> App:
    """The CDK app every synth of this project builds: ``app.py``, the pipeline and the tests.

    CDK's built-in CloudFormation validator (a WebAssembly port of cfn-lint's rules) is off:
    cfn-lint itself validates every synthesized template, with no error and no warning allowed
    (``make synth``, ``make synth-pipeline``, ``make diff``, ``make deploy``, the pipeline's Build
    step and the tests). Running both would check the same schema rules twice and costs about
    3 s of every synth (``make bench`` prints the figure).
    """
    return App(builtin_cloud_formation_validation=False, **props)


def rule_packs(app: App) -> list:
    return [AwsSolutionsChecks(app), NIST80053R5Checks(app)]


def enforce_rule_packs(app: App) -> None:
    """Make ``app.synth()`` fail on any unacknowledged AwsSolutions or NIST 800-53 rev 5 finding."""
    Validations.of(app).add_plugins(*rule_packs(app))
