"""ImageDistribution: the AMI's id to this account's parameter; other accounts receive a copy they own and its
id in their own parameter."""

from __future__ import annotations

from gpu_constructs.image.distribution import DistributionTarget, ImageDistribution
from tests.gpu_constructs.helpers import ACCOUNT, REGION, bare_stack, only, template

PARAMETER = "/imagebuilder/gpu-platform/{}/ami/latest"


def test_copies_go_to_receiving_accounts_with_their_parameter() -> None:
    stack = bare_stack()
    ImageDistribution(stack, "Dist", name="gpu-golden", description="d", region=REGION, ami_name_prefix="gpu-golden",
                      ami_tags={"Project": "gpu-platform"}, parameter_name=PARAMETER.format("dev"),
                      targets=[DistributionTarget("222222222222", REGION, PARAMETER.format("staging")),
                               DistributionTarget("333333333333", "eu-west-1", PARAMETER.format("prod"))])  # fmt: skip
    dists = {
        d["Region"]: d
        for d in only(template(stack), "AWS::ImageBuilder::DistributionConfiguration")[1]["Properties"]["Distributions"]
    }
    assert list(dists) == [REGION, "eu-west-1"]  # this region first
    home = dists[REGION]
    assert home["AmiDistributionConfiguration"]["TargetAccountIds"] == ["222222222222"]
    assert home["AmiDistributionConfiguration"]["Name"] == "gpu-golden-{{ imagebuilder:buildDate }}"
    assert home["SsmParameterConfigurations"] == [
        {"ParameterName": PARAMETER.format("dev"), "DataType": "aws:ec2:image"},
        {"ParameterName": PARAMETER.format("staging"), "DataType": "aws:ec2:image", "AmiAccountId": "222222222222"},
    ]
    assert dists["eu-west-1"]["AmiDistributionConfiguration"]["TargetAccountIds"] == ["333333333333"]
    assert ACCOUNT not in str(dists)  # this account gets no copy of its own AMI, and no KMS key is named
    assert "KmsKeyId" not in str(dists)
