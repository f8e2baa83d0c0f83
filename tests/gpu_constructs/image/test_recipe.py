"""ImageRecipe: the parent, the components in order with their parameters, an encrypted gp3 root with the
image key, and a version that moves when any of them does."""

from __future__ import annotations

from aws_cdk import Stack

from gpu_constructs.image.component import ImageComponent
from gpu_constructs.image.recipe import ImageRecipe, RecipeStep
from tests.gpu_constructs.helpers import bare_stack, only, template


def _recipe(driver_version: str) -> tuple[dict, str]:
    stack = bare_stack()
    driver = ImageComponent(stack, "Driver", name="gpu-driver", description="d", document="phases: []\n")
    cuda = ImageComponent(stack, "Cuda", name="cuda", description="c", document="phases: []\n")
    recipe = ImageRecipe(stack, "Recipe", name="gpu-golden", description="golden", parent_image="ssm:/aws/parent",
                         steps=[RecipeStep(driver, {"NvidiaDriverVersion": driver_version}), RecipeStep(cuda)],
                         root_device_name="/dev/sda1", root_volume_gib=150, kms_key_arn="arn:aws:kms:us-east-1:111111111111:key/k")  # fmt: skip
    return only(template(stack), "AWS::ImageBuilder::ImageRecipe")[1]["Properties"], recipe.version


def test_recipe_builds_from_the_parent_with_its_components_in_order() -> None:
    props, version = _recipe("570.86.15")
    assert props["ParentImage"] == "ssm:/aws/parent" and props["Version"] == version
    components = props["Components"]
    assert [c["ComponentArn"]["Fn::GetAtt"][0][:6] for c in components] == ["Driver", "CudaCo"]
    assert components[0]["Parameters"] == [{"Name": "NvidiaDriverVersion", "Value": ["570.86.15"]}]
    (root,) = props["BlockDeviceMappings"]
    assert root["Ebs"] == {"DeleteOnTermination": True, "Encrypted": True, "KmsKeyId": "arn:aws:kms:us-east-1:111111111111:key/k",
                           "VolumeSize": 150, "VolumeType": "gp3"}  # fmt: skip


def test_a_new_parameter_value_gives_a_new_recipe_version() -> None:
    assert _recipe("570.86.15")[1] != _recipe("575.51.03")[1]


def _version(stack: Stack, construct_id: str, component: ImageComponent, parent: str) -> str:
    recipe = ImageRecipe(stack, construct_id, name="gpu-golden", description="golden", parent_image=parent,
                         steps=[RecipeStep(component)], root_device_name="/dev/sda1", root_volume_gib=150)  # fmt: skip
    return recipe.version


def test_a_new_parent_gives_a_new_recipe_version() -> None:
    """Recipes are immutable: a parent moved to another Ubuntu (or any change) must not reuse a name and version."""
    stack = bare_stack()
    driver = ImageComponent(stack, "Driver", name="gpu-driver", description="d", document="phases: []\n")
    assert _version(stack, "R1", driver, "ssm:/aws/parent-22.04") != _version(
        stack, "R2", driver, "ssm:/aws/parent-24.04"
    )


def test_a_changed_component_document_gives_new_component_and_recipe_versions() -> None:
    stack = bare_stack()
    a = ImageComponent(stack, "A", name="gpu-driver", description="d", document="phases: []\n")
    b = ImageComponent(stack, "B", name="gpu-driver", description="d", document="phases: [] # the OS check moved\n")
    assert a.version != b.version
    assert _version(stack, "RA", a, "ssm:/aws/parent") != _version(stack, "RB", b, "ssm:/aws/parent")
