"""Schema of the ``image:`` section: the golden AMI, its build and every version it pins.

Every version the image installs (driver, CUDA, cuDNN, NCCL, EFA, PyTorch, ...) is pinned
here, in ``versions``, and nowhere else: the component documents under
``scripts/image/components/`` take them as parameters without defaults, and the image
stack passes this mapping to them and tags it on the AMI. The parameter names are those of
``config/image_components.py``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from config import image_components
from config.base import ENV_NAME, Strict
from config.catalog import UnknownInstanceType, get_instance_type

#: AWS's public parameter of the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04, x86_64): the OS of
#: the nodes (scripts/node/layout.py NODE_OS), which the image components check (scripts/image/lib/node-os.sh).
DLAMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"

#: AWS's public parameter of the Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.11 (Ubuntu 24.04, x86_64): what the
#: fleets launch until the first golden AMI exists. It has the driver, CUDA, EFA and NCCL, and PyTorch in /opt/pytorch,
#: which jobs and the served model find on their PATH (scripts/node/layout.py WORKLOAD_PATH).
BOOTSTRAP_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.11-ubuntu-24.04/latest/ami-id"
)

#: config/image_components.py: the components, their parameters and the recipe order.
COMPONENTS = image_components

#: The versions the component author validated together; a config without ``image.versions`` gets these.
DEFAULT_VERSIONS: dict[str, str] = {
    "NvidiaDriverVersion": "595.91.07",
    "CudaVersion": "13.0.3",
    "CudnnVersion": "9.24.0.43",
    "NcclVersion": "2.30.7",
    "EfaInstallerVersion": "1.50.0",
    "AwsOfiNcclVersion": "1.21.1",
    "DcgmVersion": "4.7.0",
    "LustreClientVersion": "2.15.6",
    "TorchVersion": "2.14.1",
    "TorchvisionVersion": "0.29.1",
    "CloudWatchAgentVersion": "1.300073.2b1889",
}

#: Every version parameter the components of every image take, in the order of DEFAULT_VERSIONS.
VERSION_PARAMETERS: tuple[str, ...] = tuple(DEFAULT_VERSIONS)

#: The versions only the image for a Slurm environment carries (config/image_components.py SLURM_COMPONENTS):
#: AWS PCS's agent and PCS's Slurm build, written as AWS names its installers (aws-pcs-agent-v1.3.1-1.tar.gz;
#: aws-pcs-slurm-25.05-installer-25.05.5-1.tar.gz, whose 25.05 is the cluster's slurm.slurm_version). No defaults:
#: AWS publishes installer releases per Slurm version, so the building environment pins both in ``versions`` where
#: it or an environment it builds for has a ``slurm:`` section (``slurm_version_problems``, config/sharing.py);
#: these values only serve as examples in its messages.
SLURM_VERSION_EXAMPLES: dict[str, str] = {"PcsAgentVersion": "1.3.1-1", "PcsSlurmVersion": "25.05.5-1"}
SLURM_VERSION_PARAMETERS: tuple[str, ...] = tuple(SLURM_VERSION_EXAMPLES)
_TAKEN = {p for params in COMPONENTS.VERSION_PARAMETERS.values() for p in params}
if {*VERSION_PARAMETERS, *SLURM_VERSION_PARAMETERS} != _TAKEN:  # a component gained or lost a pin: keep in step
    raise ImportError(
        f"config/image.py DEFAULT_VERSIONS and SLURM_VERSION_EXAMPLES "
        f"({sorted([*VERSION_PARAMETERS, *SLURM_VERSION_PARAMETERS])}) differ from the version parameters "
        f"of config/image_components.py ({sorted(_TAKEN)})"
    )

#: Component parameters that are not versions, and where each comes from instead.
_SET_ELSEWHERE = {
    "PipIndexUrl": "image.pip_index_url",
    "PcsRegion": "the image stack (the building environment's region: AWS's PCS installers are downloaded there)",
    "ExpectedGpuCount": "the image stack (the builder's GPU count in the instance catalog)",
    "ExpectEfa": "the image stack (true where an EFA fleet launches the image: in this environment or image.share_with)",
}

# A version is substituted into the components' bash scripts: no spaces, quotes or shell syntax.
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+~_-]*$")
#: An AWS PCS installer release as its file name writes it: VERSION-RELEASE (1.3.1-1, 25.05.5-1); never ``latest``.
_PCS_RELEASE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+$")
_PUBLIC_PARAMETER = re.compile(r"^/aws/service/[A-Za-z0-9_./-]+$")
_CRON = re.compile(r"^cron\((\S+ ){5}\S+\)$")
_HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/+-]*)?$")
#: Fleets' root volumes are at least 100 GiB, and a volume cannot be smaller than the AMI's snapshot.
MAX_ROOT_VOLUME_GIB = 100


def _public_parameter(value: str, example: str) -> str:
    if not _PUBLIC_PARAMETER.match(value):
        raise ValueError(
            f"{value!r} is not a public AWS SSM parameter; fix: use a parameter path under /aws/service/, e.g. {example}"
        )
    return value


#: Fields that only a building environment (``build: true``) uses.
BUILD_FIELDS = (
    "parent_image_parameter",
    "builder_instance_type",
    "versions",
    "pip_index_url",
    "schedule",
    "root_volume_gib",
)


class Image(Strict):
    """The golden AMI and its Image Builder pipeline.

    - ``build``: whether this environment runs the pipeline. A build downloads from apt,
      NVIDIA, PyPI and the EFA installer's bucket, so only an environment with internet
      egress (``network.egress: nat``) can build; an isolated one sets ``build: false`` and
      receives the AMIs of the building environment that lists it in ``share_with``.
    - ``share_with``: names of the environments (``build: false``) that receive each AMI this
      one builds: a copy in their account and region, its id in their AMI parameter.
    - ``bootstrap_ami_parameter``: public SSM parameter of the AMI the fleets use until the
      first golden AMI is built (``/imagebuilder/gpu-platform/<env>/ami/latest`` starts with its value).
      It must be GPU-ready on its own, hence the Deep Learning AMI.
    - ``parent_image_parameter``: public SSM parameter of the AMI each build starts from
      (``ssm:<parameter>`` in the recipe, resolved by Image Builder at every build).
    - ``builder_instance_type``: the GPU instance type that builds and tests the image.
    - ``versions``: every pinned version (parameter name -> version); AWS PCS's too (``SLURM_VERSION_PARAMETERS``)
      where the environment or one it builds for has a ``slurm:`` section.
    - ``pip_index_url``: the package index PyTorch is installed from.
    - ``schedule``: when the pipeline checks for a new parent image (Image Builder cron, UTC).
    - ``root_volume_gib``: the image's root volume.

    The fields of ``BUILD_FIELDS`` describe the build: an environment that does not build
    must not set them (they would be silently ignored).
    """

    build: bool = True
    share_with: list[str] = Field(default_factory=list)
    bootstrap_ami_parameter: str = BOOTSTRAP_AMI_PARAMETER
    parent_image_parameter: str = DLAMI_PARAMETER
    builder_instance_type: str = "g5.2xlarge"
    versions: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_VERSIONS))
    pip_index_url: str = "https://pypi.org/simple"
    schedule: str = "cron(0 3 ? * sun *)"
    root_volume_gib: Annotated[
        int,
        Field(
            ge=30,
            le=MAX_ROOT_VOLUME_GIB,
            description=f"GiB; the parent's snapshot must fit, and a fleet root volume, at least {MAX_ROOT_VOLUME_GIB} "
            "GiB, must hold the image",
        ),
    ] = MAX_ROOT_VOLUME_GIB

    @field_validator("bootstrap_ami_parameter", "parent_image_parameter")
    @classmethod
    def _parameter(cls, value: str) -> str:
        return _public_parameter(value, DLAMI_PARAMETER)

    @field_validator("builder_instance_type")
    @classmethod
    def _builder(cls, value: str) -> str:
        try:
            get_instance_type(value)
        except UnknownInstanceType as err:
            raise ValueError(f"{err}; fix: use a GPU instance type of the catalog, e.g. g5.2xlarge") from None
        return value

    @field_validator("versions", mode="before")
    @classmethod
    def _versions(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # pydantic reports the wrong type
        problems = [p for key, version in value.items() if (p := _version_problem(str(key), version))]
        missing = [key for key in VERSION_PARAMETERS if key not in value]
        if missing:
            pins = ", ".join(f"{key}: {DEFAULT_VERSIONS[key]}" for key in missing)
            problems.append(
                f"@: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing; "
                f"fix: pin every version here, e.g. {pins}"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return value

    @field_validator("pip_index_url")
    @classmethod
    def _index(cls, value: str) -> str:
        if not _HTTPS_URL.match(value):
            raise ValueError(
                f"{value!r} is not an https:// URL; fix: use a package index URL such as https://pypi.org/simple"
            )
        return value

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        if not _CRON.match(value):
            raise ValueError(
                f"{value!r} is not an Image Builder cron expression; "
                "fix: write cron(minutes hours day-of-month month day-of-week year), e.g. cron(0 3 ? * sun *)"
            )
        return value

    @field_validator("share_with")
    @classmethod
    def _share_with(cls, value: list[str]) -> list[str]:
        problems = []
        seen: dict[str, int] = {}
        for i, name in enumerate(value):
            if not ENV_NAME.match(name):
                problems.append(
                    f"@[{i}]: {name!r} is not an environment name; fix: name an environment by its file, e.g. staging"
                )
            elif name in seen:
                problems.append(
                    f"@[{i}]: {name!r} is already listed at share_with[{seen[name]}]; fix: list each environment once"
                )
            seen.setdefault(name, i)
        if problems:
            raise ValueError("\n".join(problems))
        return value

    @model_validator(mode="after")
    def _receiving(self) -> Image:
        if self.build:
            return self
        problems = []
        if self.share_with:
            problems.append(
                f"@share_with: {self.share_with} but build is false: only a building environment shares its AMIs; "
                "fix: remove share_with, or set build: true (which needs network.egress: nat)"
            )
        problems += [
            f"@{name}: set, but this environment does not build (build: false), so it would be ignored; "
            "fix: remove it, the AMI comes from the building environment that lists this one in image.share_with"
            for name in BUILD_FIELDS
            if name in self.model_fields_set
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return self


def _version_problem(key: str, version: Any) -> str | None:
    """The ``@key: ...`` problem of one ``versions`` entry, or None."""
    known = (*VERSION_PARAMETERS, *SLURM_VERSION_PARAMETERS)
    if key not in known:
        if key in _SET_ELSEWHERE:
            return f"@{key}: not a version; fix: remove it, {key} is set by {_SET_ELSEWHERE[key]}"
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.9)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"@{key}: unknown version parameter; fix: {hint}remove it or use one of {', '.join(known)}"
    example = DEFAULT_VERSIONS.get(key) or SLURM_VERSION_EXAMPLES[key]
    if version is None or version == "":
        return f"@{key}: the version is empty; fix: pin one, e.g. {key}: {example}"
    if isinstance(version, bool) or not isinstance(version, str):
        return (
            f"@{key}: {version!r} is not a string (YAML reads 2.10 as the number 2.1); "
            f"fix: quote the version, e.g. {key}: '{example}'"
        )
    if key in SLURM_VERSION_PARAMETERS and not _PCS_RELEASE.match(version):
        return (
            f"@{key}: {version!r} is not an AWS PCS installer release; fix: pin a release AWS publishes, "
            f"VERSION-RELEASE as its installer's file name writes it, e.g. {key}: '{example}'"
        )
    if not _VERSION.match(version):
        return (
            f"@{key}: {version!r} is not a version; "
            f"fix: use digits, letters and . + ~ _ - only, starting with a digit, e.g. {example}"
        )
    return None


def slurm_version_problems(image: Image, slurm_version: str | None) -> list[str]:
    """``pcs_pin_problems`` of a builder with a ``slurm:`` section (without: config/sharing.py decides)."""
    if not image.build or slurm_version is None:
        return []  # a receiving environment sets no versions (BUILD_FIELDS)
    runs = f"slurm.slurm_version is {slurm_version!r}"
    return pcs_pin_problems(image.versions, slurm_version, runs, or_else=", or change slurm.slurm_version")


def pcs_pin_problems(versions: Mapping[str, str], slurm_version: str, runs: str, or_else: str = "") -> list[str]:
    """``@image.versions...`` lines where an image whose nodes run ``slurm_version`` (``runs`` says whose) lacks AWS
    PCS's pins (``SLURM_VERSION_PARAMETERS``) or pins a Slurm build of another version (``or_else``: another fix)."""
    missing = [key for key in SLURM_VERSION_PARAMETERS if key not in versions]
    if missing:
        examples = {**SLURM_VERSION_EXAMPLES, "PcsSlurmVersion": f"{slurm_version}.N-R"}
        pins = ", ".join(f"{key}: '{examples[key]}'" for key in missing)
        return [
            f"@image.versions: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing, and {runs}: "
            f"the image carries AWS PCS's agent and Slurm {slurm_version}; fix: pin {'it' if len(missing) == 1 else 'them'} "
            f"beside the other versions, e.g. {pins} (releases as AWS names its installers: "
            f"aws-pcs-agent-v1.3.1-1.tar.gz, aws-pcs-slurm-{slurm_version}-installer-{slurm_version}.N-R.tar.gz)"
        ]
    release = versions["PcsSlurmVersion"]
    if release.rsplit(".", 1)[0] != slurm_version:
        return [
            f"@image.versions.PcsSlurmVersion: {release!r} is AWS PCS's Slurm {release.rsplit('.', 1)[0]} installer, "
            f"but {runs} and PCS nodes run their cluster's Slurm; fix: pin a release of "
            f"aws-pcs-slurm-{slurm_version}-installer{or_else}"
        ]
    return []
