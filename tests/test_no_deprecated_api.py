"""No deprecated CDK API at synth: ``make synth`` prints no jsii deprecation warning.

tests/conftest.py sets ``JSII_DEPRECATED=fail`` before the jsii runtime starts, so a deprecated API
raises in every synth of the test run instead of printing ``[WARNING] ... is deprecated``: the shared
synths of the test configs and of the shipped config/, and each app or CLI process the suite starts.
jsii raises once per name and process (a second call only counts as warned), hence the controls
below use an API this project never calls, or a process of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys

import aws_cdk as cdk
import pytest

from tests.synth import ROOT, Synth


def test_a_deprecated_call_raises_in_this_test_run() -> None:
    assert os.environ["JSII_DEPRECATED"] == "fail"
    with pytest.raises(RuntimeError, match=r"SecretValue#plainText is deprecated"):
        cdk.SecretValue.plain_text("not a secret")  # deprecated: unsafe_plain_text


def test_the_shipped_config_synthesizes_with_no_deprecated_api(shipped_synth: Synth) -> None:
    # The synth runs in a test process of this run, where a deprecated API raises (above).
    assert {s.env for s in shipped_synth.stacks.values()} == set(shipped_synth.environments)


def test_a_process_the_suite_starts_fails_on_a_deprecated_call() -> None:
    code = "import aws_cdk as cdk; cdk.SecretValue.plain_text('not a secret')"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "is deprecated" in done.stderr, done.stderr
