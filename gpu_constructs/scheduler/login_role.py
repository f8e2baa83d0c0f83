"""The role of the Slurm login nodes: where people arrive through Session Manager and submit their jobs."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.scheduler.pcs_iam import PCS_ROLE_PATH, pcs_cluster_arns, pcs_registration_statement
from gpu_constructs.security.render.iam_actions import acknowledge_session_manager, session_manager_statements


class SlurmLoginRole(Construct):
    """Session Manager (the channels, the session log group, the logs key of encrypted sessions) and the node's
    registration with its PCS cluster; nothing of a GPU node's data, lifecycle hooks or metrics: the login nodes
    are in no queue and run no job, and the people on them reach data through their jobs.

    Role and instance profile have the ``/aws-pcs/`` path PCS requires of a node group's instance profile.

    Attributes:
        role, instance_profile.
    """

    def __init__(self, scope: Construct, construct_id: str, *, session_log_group_arn: str, logs_key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="GPU platform Slurm login node: Session Manager, registration with the PCS cluster",
            path=PCS_ROLE_PATH,
        )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.role, path=PCS_ROLE_PATH)
        session = iam.ManagedPolicy(
            self,
            "SessionManager",
            roles=[self.role],
            statements=session_manager_statements(
                stack, session_log_group_arn=session_log_group_arn, logs_key_arn=logs_key.key_arn
            ),
        )
        acknowledge_session_manager(session, stack)
        registration = iam.ManagedPolicy(
            self, "PcsRegistration", roles=[self.role], statements=[pcs_registration_statement(stack)]
        )
        acknowledge(
            registration,
            f"AwsSolutions-IAM5[Resource::{pcs_cluster_arns(stack)}]",
            "PCS generates its clusters' ids; a login node registers with the cluster of its node group, which "
            "this stack (outliving the fleets) cannot name.",
        )
