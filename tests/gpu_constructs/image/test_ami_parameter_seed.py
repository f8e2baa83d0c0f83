"""AmiParameterSeed: the AMI parameter is put once, never overwritten, never deleted; the provider may put that
one parameter only."""

from __future__ import annotations

import json

from gpu_constructs.image.ami_parameter_seed import ALREADY_EXISTS, AmiParameterSeed
from tests.gpu_constructs.helpers import (
    ACCOUNT,
    REGION,
    RETENTION,
    bare_stack,
    key,
    managed_policies,
    only,
    resolved,
    template,
)
from tests.policy_eval import Request, role_may

PARAMETER = "/imagebuilder/gpu-platform/dev/ami/latest"
DLAMI_24_04 = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"


def test_put_if_absent_on_create_only_and_scoped_to_the_parameter() -> None:
    stack = bare_stack()
    AmiParameterSeed(stack, "Seed", parameter_name=PARAMETER, description="fleets' AMI",
                     bootstrap_parameter=DLAMI_24_04,
                     logs_key=key(stack), log_retention=RETENTION)  # fmt: skip
    tmpl = template(stack)
    _, seed = only(tmpl, "Custom::AWS")
    props = seed["Properties"]
    create = json.loads(resolved(tmpl, props["Create"]))
    assert (create["action"], create["parameters"]["Name"]) == ("PutParameter", PARAMETER)
    assert create["parameters"]["Overwrite"] is False and create["parameters"]["DataType"] == "aws:ec2:image"
    assert create["ignoreErrorCodesMatching"] == ALREADY_EXISTS
    assert "Update" not in props and "Delete" not in props  # Image Builder owns the value afterwards
    policies = managed_policies(tmpl)
    arn = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{PARAMETER}"
    assert role_may(policies, None, Request("ssm:PutParameter", arn))
    assert not role_may(policies, None, Request("ssm:PutParameter", arn.replace("/dev/", "/prod/")))
    assert not role_may(policies, None, Request("ssm:DeleteParameter", arn))


def test_the_seed_alone_declares_the_parameter_with_todays_bootstrap() -> None:
    """No AWS::SSM::Parameter: on a fresh stack nothing creates the parameter before the seed, so the seed's
    PutParameter puts the configured bootstrap AMI (an earlier release's resource put the Ubuntu 22.04 one)."""
    stack = bare_stack()
    AmiParameterSeed(stack, "Seed", parameter_name=PARAMETER, description="fleets' AMI", bootstrap_parameter=DLAMI_24_04,
                     logs_key=key(stack), log_retention=RETENTION)  # fmt: skip
    tmpl = template(stack)
    assert not tmpl.find_resources("AWS::SSM::Parameter")
    defaults = [p["Default"] for p in tmpl.to_json()["Parameters"].values() if "Default" in p]
    assert DLAMI_24_04 in defaults and not [d for d in defaults if "ubuntu-22.04" in d]
