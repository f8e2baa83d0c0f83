"""docs/platform.md's first-deploy story, as written: before any golden AMI, the fleets launch the Deep
Learning AMI with PyTorch for the node OS, jobs and the served model find torch there, and status and
preflight say that no golden AMI exists yet and how to build one.

The node side runs for real in tests/scripts/node/jobs/test_job_runner.py (a job on a node with only the bootstrap
AMI's /opt/pytorch); status and preflight against moto in tests/ops. This test holds the paragraph to the
code: every fact it names is the one the code uses.
"""

from __future__ import annotations

import re
from pathlib import Path

from config.image import BOOTSTRAP_AMI_PARAMETER, Image
from config.loader import load_environment
from config.naming import ResourceNames
from tests.scripts.node import helpers  # noqa: F401 - puts scripts/node on sys.path
from tests.synth import Synth

# isort: split
import layout

ROOT = Path(__file__).resolve().parents[2]
STORY = (ROOT / "docs/platform.md").read_text(encoding="utf-8")
PARAGRAPH = STORY[STORY.index("- **`<env>-Image`**") : STORY.index("CloudFormation does not own its value")]


def test_the_paragraph_names_the_default_bootstrap_ami_and_it_is_a_pytorch_dlami_of_the_node_os() -> None:
    assert f"`{BOOTSTRAP_AMI_PARAMETER}`" in PARAGRAPH
    distro, version = layout.NODE_OS
    assert re.fullmatch(
        rf"/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-[0-9.]+-{distro}-{version}/latest/ami-id",
        BOOTSTRAP_AMI_PARAMETER,
    )


def test_an_environment_that_names_no_bootstrap_ami_starts_on_that_ami() -> None:
    assert Image().bootstrap_ami_parameter == BOOTSTRAP_AMI_PARAMETER


def test_on_a_fresh_stack_the_seed_is_what_creates_the_parameter(synth: Synth) -> None:
    """Nothing in the Image stack declares the parameter but the seed, whose PutParameter puts the configured
    bootstrap AMI (tests/flows/test_ami_parameter_seed.py runs that call against moto)."""
    for env, cfg in synth.environments.items():
        stack = synth.stack(env, "Image")
        assert stack.resources("AWS::SSM::Parameter") == {}
        defaults = [p.get("Default") for p in stack.json.get("Parameters", {}).values()]
        assert cfg.image.bootstrap_ami_parameter in defaults


def test_the_paths_it_names_are_the_nodes() -> None:
    assert f"PyTorch in `{layout.BOOTSTRAP_PYTORCH_ENV}`" in PARAGRAPH
    assert f"`{layout.WORKLOAD_VENV}`" in PARAGRAPH
    path = layout.WORKLOAD_PATH.split(":")
    assert path.index(f"{layout.WORKLOAD_VENV}/bin") < path.index(f"{layout.BOOTSTRAP_PYTORCH_ENV}/bin")
    unit = (ROOT / "scripts/node/systemd/gpu-service.service").read_text(encoding="utf-8")
    assert f"Environment=PATH={layout.WORKLOAD_PATH}\n" in unit


def test_the_build_command_it_names_is_the_one_status_prints() -> None:
    dev = load_environment("dev")
    arn = ResourceNames.of(dev).image_pipeline_arn()
    assert arn.endswith(":image-pipeline/gpu-platform-dev-gpu-node")
    generic = re.sub(r"arn:aws:imagebuilder:[^:]+:\d+:image-pipeline/gpu-platform-dev-", "", arn)
    assert (
        "--image-pipeline-arn arn:aws:imagebuilder:<region>:<account>:image-pipeline/gpu-platform-<env>-" + generic
        in (" ".join(PARAGRAPH.split()))
    )
