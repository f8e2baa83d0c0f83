"""The stack outputs for people: each resolves to the resource it names, under the name ``status`` reads."""

from __future__ import annotations

from typing import Any

import pytest

from config.naming import ResourceNames
from tests.synth import Synth

ENVIRONMENTS = ("dev", "staging", "prod")


def outputs(synth: Synth, env: str, stack: str) -> dict[str, dict[str, Any]]:
    """The stack's outputs for people (CDK's own ``PublishOutput...`` references between stacks left out)."""
    found = synth.stack(env, stack).json.get("Outputs", {})
    return {k: v for k, v in found.items() if not k.startswith("PublishOutput")}


def resource(synth: Synth, env: str, stack: str, value: dict[str, Any]) -> dict[str, Any]:
    """The resource an output's ``Ref`` or ``Fn::GetAtt`` points at."""
    logical_id = value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]
    return synth.stack(env, stack).json["Resources"][logical_id]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_output_has_a_description_and_names_its_resource(synth: Synth, env: str) -> None:
    names = ResourceNames.of(synth.environments[env])

    monitoring = outputs(synth, env, "Monitoring")
    assert list(monitoring) == ["DashboardUrl"]
    url = monitoring["DashboardUrl"]["Value"]
    (dashboard,) = synth.stack(env, "Monitoring").resources("AWS::CloudWatch::Dashboard").values()
    region = synth.environments[env].region
    assert url == (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
        f"#dashboards/dashboard/{dashboard['Properties']['DashboardName']}"
    )
    assert url == names.dashboard_url  # what `gpu-platform status` prints

    fleets = outputs(synth, env, "Fleets")
    group_outputs = [o for k, o in fleets.items() if k.startswith("GroupName")]
    groups = {resource(synth, env, "Fleets", o["Value"])["Properties"]["AutoScalingGroupName"] for o in group_outputs}
    assert groups == {names.asg_name(f.name) for f in synth.environments[env].fleets}
    assert len(group_outputs) == len(synth.environments[env].fleets)
    # A served fleet's URL: the scheme of its listener and the DNS name of its load balancer.
    served = [f for f in synth.environments[env].fleets if f.service is not None]
    urls = {k: o for k, o in fleets.items() if k.startswith("ServiceUrl")}
    assert len(urls) == len(served) == len(fleets) - len(group_outputs)
    for fleet in served:
        (url,) = [o for o in urls.values() if f" {fleet.name} fleet" in o["Description"]]
        scheme, dns = url["Value"]["Fn::Join"][1]
        assert scheme == ("https://" if fleet.service and fleet.service.load_balancer.certificate_arn else "http://")
        assert dns["Fn::GetAtt"][1] == "DNSName"
        assert resource(synth, env, "Fleets", dns)["Type"] == "AWS::ElasticLoadBalancingV2::LoadBalancer"

    storage = outputs(synth, env, "Storage")
    bucket = resource(synth, env, "Storage", storage["DataBucketName"]["Value"])
    assert (bucket["Type"], bucket["Properties"]["BucketName"]) == ("AWS::S3::Bucket", names.data_bucket)
    # The same values as the parameters the node's mount script reads (CDK builds the DNS name from the id).
    parameters = {
        p["Properties"]["Name"]: p["Properties"]["Value"]
        for p in synth.stack(env, "Storage").resources("AWS::SSM::Parameter").values()
    }
    prefix = names.ssm_parameter_prefix
    assert storage["LustreDnsName"]["Value"] == parameters[f"{prefix}fsx/dns-name"]
    assert storage["LustreMountName"]["Value"] == parameters[f"{prefix}fsx/mount-name"]
    mount = resource(synth, env, "Storage", storage["LustreMountName"]["Value"])
    assert mount["Type"] == "AWS::FSx::FileSystem"
    assert storage["LustreMountName"]["Value"]["Fn::GetAtt"][1] == "LustreMountName"
    assert {"Ref": storage["LustreMountName"]["Value"]["Fn::GetAtt"][0]} in storage["LustreDnsName"]["Value"][
        "Fn::Join"
    ][1]

    security = outputs(synth, env, "Security")
    topic = resource(synth, env, "Security", security["AlertsTopicArn"]["Value"])
    assert (topic["Type"], topic["Properties"]["TopicName"]) == ("AWS::SNS::Topic", names.alerts_topic)

    for found in (monitoring, fleets, storage, security):
        for output in found.values():
            assert output["Description"].startswith(f"GPU platform {env}: ")
            assert "Export" not in output  # for people: no other stack may come to depend on them
