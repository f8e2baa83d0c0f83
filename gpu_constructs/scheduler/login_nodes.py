"""The Slurm login nodes: a PCS compute node group in no queue, where people arrive and submit."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_pcs as pcs
from constructs import Construct

from config.image import MAX_ROOT_VOLUME_GIB
from config.slurm import Login
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.fleet.fleet_launch_template import ROOT_DEVICE
from gpu_constructs.scheduler.login_user_data import login_user_data
from gpu_constructs.scheduler.slurm_fleet import multipart


class LoginNodes(Construct):
    """``login.count`` On-Demand CPU nodes of ``login.instance_type`` on the golden AMI (it carries the PCS agent
    and Slurm; its NVIDIA driver idles on a CPU type), reached through Session Manager only: no key pair, no
    public address, no ingress but Slurm's. Its own launch template: IMDSv2 only, an encrypted gp3 root volume
    that holds the image (``MAX_ROOT_VOLUME_GIB``), the node group (HTTPS to AWS, so the SSM agent and the PCS
    agent reach their APIs; Lustre) and the Slurm nodes' group, and user data in the MIME multi-part form PCS
    takes: one shell part with the cluster's people (``people_json``), their POSIX users and, with
    ``accounting``, the unit that applies Slurm accounting (login_user_data.py). The node group names the
    template's latest version, so a new AMI, setting or person reaches the login nodes PCS launches next.

    Attributes:
        launch_template, node_group (the L1 AWS::PCS::ComputeNodeGroup).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        login: Login,
        cluster_id: str,
        subnet_ids: Sequence[str],
        machine_image: ec2.IMachineImage,
        instance_profile: iam.IInstanceProfile,
        security_groups: Sequence[ec2.ISecurityGroup],
        volume_key: kms.IKey,
        people_json: str,
        accounting: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        first, *others = security_groups
        user_data = ec2.UserData.for_linux()
        user_data.add_commands(*login_user_data(people_json, accounting=accounting))
        self.launch_template = ec2.LaunchTemplate(
            self,
            "Template",
            machine_image=machine_image,
            user_data=multipart(user_data),
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        MAX_ROOT_VOLUME_GIB,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        kms_key=volume_key,
                        delete_on_termination=True,
                    ),
                )
            ],
            require_imdsv2=True,
            http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,
            http_endpoint=True,
            http_put_response_hop_limit=1,
            security_group=first,
        )
        for group in others:
            self.launch_template.add_security_group(group)
        template = cfn_child(self.launch_template, ec2.CfnLaunchTemplate)
        self.node_group = pcs.CfnComputeNodeGroup(
            self,
            "NodeGroup",
            cluster_id=cluster_id,
            iam_instance_profile_arn=instance_profile.instance_profile_arn,
            instance_configs=[pcs.CfnComputeNodeGroup.InstanceConfigProperty(instance_type=login.instance_type)],
            scaling_configuration=pcs.CfnComputeNodeGroup.ScalingConfigurationProperty(
                min_instance_count=login.count, max_instance_count=login.count
            ),
            subnet_ids=list(subnet_ids),
            purchase_option="ONDEMAND",
            custom_launch_template=pcs.CfnComputeNodeGroup.CustomLaunchTemplateProperty(
                template_id=template.ref, version=template.attr_latest_version_number
            ),
        )
