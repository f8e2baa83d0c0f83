"""The parameters each Image Builder component document under ``scripts/image/components/`` takes: data the
config (config/image.py) and the image stack read, in this one place.

The component documents never carry a version number of their own: every pin (driver,
CUDA, cuDNN, NCCL, EFA installer, ...) is a component *parameter* without a default, so
the image stack passes all of them from the config, the one place versions live. This
module is what the stack (and the tests) use to map config fields to parameters:

- ``VERSION_PARAMETERS``: per component, the version pins it takes. A pin that several
  components need (``CudaVersion``: the toolkit, and DCGM's ``-cudaMAJOR`` package) is
  listed under each of them and must be given the same config value everywhere.
- ``OTHER_PARAMETERS``: per component, the parameters that are not versions (URLs, the
  expected GPU count, ...).

The tests check that these tables and the ``parameters:`` blocks of the documents agree
exactly, in both directions, so neither can drift from the other.

Each ExecuteBash step is a script of its own, so a helper several steps need lives once under
``lib/``: a step says ``# include: lib/<file>.sh`` where it wants it, and :func:`document` gives
the document as Image Builder receives it, with the helper written there. A check the nodes run
too is included from its node module instead (``# include: node/health/<module>.py``, inside a
``python3 -`` here-document), so the image and the nodes run the same code.

What the image carries (the versions it installed, or kept from its parent where the parent was
at the pin or newer) is recorded on the image in ``IMAGE_VERSIONS_FILE``.
"""

from __future__ import annotations

import re
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parents[1] / "scripts"
IMAGE_DIR = SCRIPTS_DIR / "image"
COMPONENTS_DIR = IMAGE_DIR / "components"
"""One ``<component>.yaml`` per concern; the file stem is the component key below."""

IMAGE_VERSIONS_FILE = "/opt/gpu-platform/image-versions.json"
"""JSON object on the image: each key of ``RECORDED_VERSIONS`` -> the version the image carries (written by the
build steps through ``lib/record.sh``; it may be newer than the config's pin where the parent image was)."""

VERSION_PARAMETERS: dict[str, tuple[str, ...]] = {
    "os-updates": (),
    "nvidia-driver": ("NvidiaDriverVersion",),
    "nvidia-services": (),
    "cuda-toolkit": ("CudaVersion",),
    "cuda-libraries": ("CudnnVersion", "NcclVersion"),
    "efa": ("EfaInstallerVersion", "AwsOfiNcclVersion"),
    "pytorch": ("TorchVersion", "TorchvisionVersion"),
    "cloudwatch-agent": ("CloudWatchAgentVersion",),
    "lustre-client": ("LustreClientVersion",),
    "dcgm": ("DcgmVersion", "CudaVersion"),
    "pcs-slurm": ("PcsAgentVersion", "PcsSlurmVersion"),
    "node-runtime": (),
    "gpu-validation": (),
}

OTHER_PARAMETERS: dict[str, tuple[str, ...]] = {
    "os-updates": (),
    "nvidia-driver": (),
    "nvidia-services": (),
    "cuda-toolkit": (),
    "cuda-libraries": (),
    "efa": (),
    "pytorch": ("PipIndexUrl",),
    "cloudwatch-agent": (),
    "lustre-client": (),
    "dcgm": (),
    "pcs-slurm": ("PcsRegion",),
    "node-runtime": (),
    "gpu-validation": ("ExpectedGpuCount", "ExpectEfa"),
}

RECIPE_ORDER: tuple[str, ...] = (
    "os-updates",
    "nvidia-driver",
    "nvidia-services",
    "cuda-toolkit",
    "cuda-libraries",
    "efa",
    "dcgm",
    "lustre-client",
    "pytorch",
    "cloudwatch-agent",
    "node-runtime",
    "gpu-validation",
)
"""The order the recipe should list the components in, and why:

``os-updates`` first, before anything runs apt: it stops and masks apt's daily timers and
unattended-upgrades and holds the running kernel's packages, so nothing installs a kernel (or
holds the dpkg lock) during the build; the driver next, then its services (Fabric Manager, the
persistence daemon), which end with the reboot into it (everything GPU-side builds or checks
against it); the toolkit, cuDNN and NCCL for it, then EFA, the order of AWS's
"get started with EFA and NCCL" guide (drivers, CUDA and cuDNN before the EFA software); DCGM
after the toolkit whose CUDA major it follows; Lustre after the last reboot, so the kernel it
matches is the one the image boots; the test-only ``gpu-validation`` last.

These are the components of every image; ``SLURM_COMPONENTS`` adds those of an image for Slurm environments
(``recipe_order``; stacks/image_build.py ``carries_pcs``).
"""

SLURM_COMPONENTS: dict[str, str] = {"pcs-slurm": "cloudwatch-agent"}
"""The components only an image for Slurm environments carries (its builder pins their versions), each with the component of
``RECIPE_ORDER`` it follows in that image's recipe: ``pcs-slurm`` (AWS PCS's agent and PCS's Slurm build, which its
compute node groups need) after the agents, before the node runtime and the test component. It needs nothing of the
GPU stack; after ``os-updates``, its Slurm build's apt installs cannot move the kernel."""


def recipe_order(*, slurm: bool) -> tuple[str, ...]:
    """The components of an environment's image, in recipe order: ``RECIPE_ORDER``, and where the image is for Slurm
    environments (``slurm``), ``SLURM_COMPONENTS`` each after the component it follows."""
    order: list[str] = []
    for name in RECIPE_ORDER:
        order.append(name)
        order += [extra for extra, after in SLURM_COMPONENTS.items() if slurm and after == name]
    return tuple(order)


RECORDED_VERSIONS: tuple[str, ...] = (
    *dict.fromkeys(p for name in RECIPE_ORDER for p in VERSION_PARAMETERS[name]),
    "CudaDefault",
    "Kernel",
)
"""The keys of ``IMAGE_VERSIONS_FILE`` on every image: every version parameter of ``RECIPE_ORDER``, the CUDA toolkit
/usr/local/cuda points at (``CudaDefault``: the carried ``CudaVersion``, or a parent's newer default that was not
moved back), and the kernel the image boots. The test component checks each."""

SLURM_RECORDED_VERSIONS: tuple[str, ...] = tuple(p for name in SLURM_COMPONENTS for p in VERSION_PARAMETERS[name])
"""The keys ``SLURM_COMPONENTS`` add to ``IMAGE_VERSIONS_FILE`` on an image for Slurm environments: their version
parameters (the component's own validate and test phases check them)."""


def component_names() -> tuple[str, ...]:
    """Every component key, those only a Slurm environment's image carries included, in recipe order."""
    return recipe_order(slurm=True)


def component_path(name: str) -> Path:
    """The document of one component, e.g. ``component_path("efa")``."""
    if name not in VERSION_PARAMETERS:
        known = ", ".join(component_names())
        raise KeyError(f"{name!r} is not an image component; known: {known}")
    return COMPONENTS_DIR / f"{name}.yaml"


def parameters(name: str) -> tuple[str, ...]:
    """All parameters of one component: its version pins, then the others."""
    return VERSION_PARAMETERS[name] + OTHER_PARAMETERS[name]


_INCLUDE = re.compile(
    r"^(?P<indent>[ ]*)# include: (?P<path>lib/[A-Za-z0-9_.-]+|node/health/[A-Za-z0-9_]+\.py)\n", re.MULTILINE
)


def _helper(relative: str) -> str:
    """A helper of ``lib/`` (or a module of ``scripts/node/health/``) without the comment block that opens it
    (its notes for people)."""
    path = (SCRIPTS_DIR if relative.startswith("node/") else IMAGE_DIR) / relative
    if not path.is_file():
        raise FileNotFoundError(f"{relative} is included by a component but {path} does not exist")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def document(name: str) -> str:
    """The document of one component as Image Builder receives it: every ``# include: ...`` line
    replaced by that helper, indented like the line."""

    def expand(match: re.Match[str]) -> str:
        indent = match.group("indent")
        helper = _helper(match.group("path"))
        return "".join(indent + line if line.strip() else line for line in helper.splitlines(keepends=True))

    return _INCLUDE.sub(expand, component_path(name).read_text(encoding="utf-8"))
