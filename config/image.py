"""Schema of the ``image:`` section: where the fleets' AMI comes from."""

from __future__ import annotations

from pydantic import Field

from config.base import Strict

#: AWS's public parameter for the Deep Learning base AMI with the NVIDIA driver (Ubuntu 22.04, x86_64).
DLAMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"


class Image(Strict):
    """The golden AMI.

    ``bootstrap_ami_parameter`` is the public SSM parameter whose AMI the fleets
    use until the first golden AMI is built (the platform's parameter
    ``/gpu-platform/<env>/ami/latest`` starts with its value).
    """

    bootstrap_ami_parameter: str = Field(default=DLAMI_PARAMETER, pattern=r"^/aws/service/[A-Za-z0-9_./-]+$")
