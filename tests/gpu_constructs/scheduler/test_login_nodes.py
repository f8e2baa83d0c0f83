"""The login nodes: On-Demand CPU nodes in no queue, on their own launch template as PCS asks for it."""

from __future__ import annotations

from tests.gpu_constructs.scheduler.helpers import ENV, by_path, user_data_text
from tests.synth import StackTemplate, Synth


def test_the_login_nodes_are_on_demand_cpu_nodes_in_no_queue(slurm_synth: Synth, fleets: StackTemplate) -> None:
    login = slurm_synth.environments[ENV].slurm.login  # type: ignore[union-attr]
    ((lid, group),) = by_path(fleets, "AWS::PCS::ComputeNodeGroup", "/Slurm/Login/").items()
    props = group["Properties"]
    assert props["PurchaseOption"] == "ONDEMAND"
    assert props["InstanceConfigs"] == [{"InstanceType": login.instance_type}]
    assert props["ScalingConfiguration"] == {"MinInstanceCount": login.count, "MaxInstanceCount": login.count}
    queued = {
        c["ComputeNodeGroupId"]["Fn::GetAtt"][0]
        for q in fleets.resources("AWS::PCS::Queue").values()
        for c in q["Properties"]["ComputeNodeGroupConfigurations"]
    }
    assert lid not in queued


def test_the_login_template_is_one_pcs_takes_and_session_manager_reaches(fleets: StackTemplate) -> None:
    ((_, template),) = by_path(fleets, "AWS::EC2::LaunchTemplate", "/Slurm/Login/").items()
    data = template["Properties"]["LaunchTemplateData"]
    assert "IamInstanceProfile" not in data and "KeyName" not in data and "InstanceType" not in data
    assert user_data_text(template).startswith("Content-Type: multipart/mixed; boundary=")
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    (root,) = data["BlockDeviceMappings"]
    assert root["Ebs"]["Encrypted"] is True and root["Ebs"]["VolumeType"] == "gp3"
    ((slurm_nodes, _),) = by_path(fleets, "AWS::EC2::SecurityGroup", "/Slurm/SecurityGroups/Nodes/").items()
    groups = data["SecurityGroupIds"]
    assert len(groups) == 2 and {"Fn::GetAtt": [slurm_nodes, "GroupId"]} in groups  # and the node group (HTTPS out)
