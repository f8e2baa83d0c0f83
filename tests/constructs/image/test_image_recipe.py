"""ImageRecipe: the parent, the components in order with their parameters, an encrypted gp3 root with the
image key, and a version that moves when any of them does."""

from __future__ import annotations

from gpu_constructs.image.image_component import ImageComponent
from gpu_constructs.image.image_recipe import ImageRecipe, RecipeStep
from tests.constructs.conftest import bare_stack, only, template


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
