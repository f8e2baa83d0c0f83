"""Compliance rule packs that run on every stack at every synth."""

from __future__ import annotations

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks

#: Context key that makes ``app.synth()`` raise on error-level findings (the CLI sets it false).
FAIL_ON_FINDINGS = "@aws-cdk/core:failSynthOnValidationErrors"


def rule_packs(app: App) -> list:
    return [AwsSolutionsChecks(app), NIST80053R5Checks(app)]


def enforce_rule_packs(app: App) -> None:
    """Make ``app.synth()`` fail on any unacknowledged AwsSolutions or NIST 800-53 rev 5 finding."""
    Validations.of(app).add_plugins(*rule_packs(app))
