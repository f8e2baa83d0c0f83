"""Session Manager: the only way to a shell on a node, its sessions logged encrypted."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct


class SessionManagerLogging(Construct):
    """A Session document that streams every session to an encrypted log group.

    Operators start sessions with ``--document-name <document_name>``; the
    session data channel is encrypted with ``key`` as well.

    ``run_as`` (an environment with Slurm): Session Manager's Run As is on for
    sessions of this document, so a session opens as the OS user named by the
    caller's IAM principal tag ``SSMSessionRunAs``, never as ``ssm-user`` (which
    has sudo); a caller without the tag, or whose user the node lacks, gets no
    session (AWS Systems Manager User Guide, "Turn on Run As support for Linux
    and macOS managed nodes"; ``runAsEnabled`` in the Session document schema).

    Attributes:
        log_group, document_name, key.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        document_name: str,
        log_group_name: str,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        run_as: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = key
        self.log_group = logs.LogGroup(
            self,
            "Sessions",
            log_group_name=log_group_name,
            encryption_key=key,
            retention=log_retention,
            removal_policy=removal_policy,
        )
        self.document_name = document_name
        ssm.CfnDocument(
            self,
            "Preferences",
            name=document_name,
            document_type="Session",
            document_format="JSON",
            update_method="NewVersion",
            content={
                "schemaVersion": "1.0",
                "description": "GPU platform shell sessions, logged to an encrypted log group",
                "sessionType": "Standard_Stream",
                "inputs": {
                    "cloudWatchLogGroupName": self.log_group.log_group_name,
                    "cloudWatchEncryptionEnabled": True,
                    "cloudWatchStreamingEnabled": True,
                    "s3BucketName": "",
                    "kmsKeyId": key.key_id,
                    "runAsEnabled": run_as,
                    "idleSessionTimeout": "20",
                    "shellProfile": {"linux": "cd ~ && exec bash -l"},
                },
            },
        )
