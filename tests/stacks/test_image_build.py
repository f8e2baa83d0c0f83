"""The image of an environment with a ``slurm:`` section carries AWS PCS's agent and PCS's Slurm build: its recipe
has the pcs-slurm component, with the config's pins and the build's region, and an environment without Slurm has
neither the component nor anything else changed.

The image stack's own functions (stacks/image_build.py: ``components``, ``image_recipe``, which ``ImageStack``
calls) on a bare stack, for the environments of the test configs: the Slurm one (tests/fixtures/config/slurm) and
dev (tests/fixtures/config), which has no Slurm.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from config import Environment, load_platform
from config.catalog import get_instance_type
from config.image import COMPONENTS
from config.naming import ResourceNames
from gpu_constructs.image.component import strip_leading_comments
from stacks import image_build
from tests.config.helpers import slurm_pair, write_env
from tests.gpu_constructs.helpers import bare_stack, template
from tests.synth import ROOT, SLURM_DIR

KMS_KEY = "arn:aws:kms:us-east-1:111111111111:key/k"


@cache
def _image(config_dir: str, name: str) -> tuple[Environment, dict[str, Any]]:
    """The environment and its image recipe's template (components and recipe), built once per environment."""
    platform = load_platform([name], config_dir=ROOT / config_dir)
    env = platform.environments[name]
    stack = bare_stack()
    parts = image_build.components(stack, env)
    builder = get_instance_type(env.image.builder_instance_type)
    image_build.image_recipe(stack, env, platform.sharing(name), parts=parts, builder=builder, kms_key_arn=KMS_KEY)
    return env, template(stack).to_json()["Resources"]


def _recipe(resources: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]], str]:
    """The recipe's component names in order, its component configurations and its description."""
    names = {k: r["Properties"]["Name"] for k, r in resources.items() if r["Type"] == "AWS::ImageBuilder::Component"}
    (recipe,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::ImageBuilder::ImageRecipe"]
    steps = recipe["Components"]
    return [names[s["ComponentArn"]["Fn::GetAtt"][0]] for s in steps], steps, recipe["Description"]


def test_a_slurm_environment_s_image_carries_the_pcs_component_after_the_agents() -> None:
    env, resources = _image(str(SLURM_DIR), "hpc")
    order, _, description = _recipe(resources)
    prefix = ResourceNames.of(env).prefix
    assert order == [f"{prefix}-{key}" for key in COMPONENTS.recipe_order(slurm=True)]
    assert order.index(f"{prefix}-pcs-slurm") == order.index(f"{prefix}-cloudwatch-agent") + 1
    assert order[-1] == f"{prefix}-gpu-validation"
    assert description.endswith("node services, AWS PCS agent and Slurm")
    (component,) = [r["Properties"] for r in resources.values() if r["Properties"].get("Name") == f"{prefix}-pcs-slurm"]
    assert component["Data"] == strip_leading_comments(COMPONENTS.document("pcs-slurm"))


def test_the_pcs_component_gets_the_config_s_pins_of_the_cluster_s_slurm_and_the_build_s_region() -> None:
    env, resources = _image(str(SLURM_DIR), "hpc")
    order, steps, _ = _recipe(resources)
    step = steps[order.index(f"{ResourceNames.of(env).prefix}-pcs-slurm")]
    given = {p["Name"]: p["Value"] for p in step["Parameters"]}
    assert given == {
        "PcsAgentVersion": [env.image.versions["PcsAgentVersion"]],
        "PcsSlurmVersion": [env.image.versions["PcsSlurmVersion"]],
        "PcsRegion": [env.region],
    }
    assert env.slurm is not None and given["PcsSlurmVersion"][0].startswith(f"{env.slurm.slurm_version}.")
    # The other components take what they take in every image: no PCS parameter reaches them.
    others = {p["Name"] for s in steps if s is not step for p in s.get("Parameters", [])}
    assert not others & {"PcsAgentVersion", "PcsSlurmVersion", "PcsRegion"}


def test_an_environment_without_slurm_has_the_image_it_had() -> None:
    env, resources = _image("tests/fixtures/config", "dev")
    order, steps, description = _recipe(resources)
    prefix = ResourceNames.of(env).prefix
    assert env.slurm is None
    assert order == [f"{prefix}-{key}" for key in COMPONENTS.RECIPE_ORDER]
    assert description == f"GPU platform {env.name}: NVIDIA driver, CUDA, EFA/NCCL, PyTorch, node services"
    assert not any(p["Name"].startswith("Pcs") for s in steps for p in s.get("Parameters", []))
    assert not any(k.startswith("Pcs") for k in env.image.versions)


def test_a_builder_without_slurm_builds_the_pcs_component_for_the_slurm_environment_it_builds_for(tmp_path) -> None:
    """The builder needs no PCS cluster of its own: its pins (config/sharing.py) put the component in its recipe."""
    for name, data in slurm_pair(builder_has_slurm=False).items():
        write_env(tmp_path, name, data)
    env, resources = _image(str(tmp_path), "hpc")
    order, _, description = _recipe(resources)
    assert env.slurm is None
    assert f"{ResourceNames.of(env).prefix}-pcs-slurm" in order and description.endswith("AWS PCS agent and Slurm")
