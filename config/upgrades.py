"""Facts about earlier releases that an upgrade of a deployed environment depends on (docs/operations.md,
Upgrading a deployed environment). Plain data: the CDK side and the operator command (no CDK) both read it."""

from __future__ import annotations

#: The AWS::SSM::Parameter that held the fleets' AMI parameter in releases before the seed
#: (gpu_constructs/image/ami_parameter_seed.py), in the Image stack.
LEGACY_LOGICAL_ID = "AmiParameter3D3A0D31"

#: The last release that keeps that resource with DeletionPolicy Retain: a stack that holds it without Retain
#: deploys this release first, so that removing the resource leaves the parameter in place.
LAST_RELEASE_RETAINING_IT = "d8fda28"
