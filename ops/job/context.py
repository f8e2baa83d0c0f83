"""The environment a job command works in: its config, its AWS clients, and the errors that stop a command.

Every failure a person can fix is a ``JobError``: one line naming what is wrong and the fix, and an exit
code (1: the job was refused or failed to start; 2: the config, the credentials or AWS stopped the command).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from config.errors import ConfigError
from config.loader import CONFIG_DIR, display_path, load_environment
from config.naming import ResourceNames
from config.schema import Environment
from ops.preflight.aws import NO_CREDENTIALS, Aws, describe_failure, error_code

#: What the job commands call; named in the fix of an access-denied error.
JOB_ACCESS = (
    "autoscaling:DescribeAutoScalingGroups, ec2:DescribeInstances, ssm:SendCommand (the job document and the "
    "fleet's instances), ssm:ListCommands, ssm:GetCommandInvocation, logs:DescribeLogStreams, logs:FilterLogEvents; "
    "on a Slurm fleet pcs:ListClusters, pcs:ListTagsForResource, pcs:ListComputeNodeGroups, pcs:ListQueues, "
    "pcs:GetQueue and ssm:SendCommand (AWS-RunShellScript on the login nodes)"
)
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}
_REJECTED = {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException"}


class JobError(Exception):
    """A problem a person can fix: ``str()`` is the one line printed, ``code`` the exit code."""

    def __init__(self, line: str, code: int = 2):
        super().__init__(line)
        self.code = code


@dataclass(frozen=True)
class JobContext:
    environment: Environment
    aws: Aws
    config_file: str

    @property
    def names(self) -> ResourceNames:
        return ResourceNames.of(self.environment)


def aws_failure(err: Exception, region: str) -> JobError:
    """One line (exit 2) for an AWS error that stops a job command."""
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return JobError(NO_CREDENTIALS)
    if isinstance(err, ClientError) and error_code(err) in _REJECTED:
        return JobError(
            f"AWS rejected the credentials in {region} ({describe_failure(err)}); fix: refresh them "
            "(aws sso login, or new keys)"
        )
    if isinstance(err, ClientError) and error_code(err) in _DENIED:
        return JobError(f"AWS: {describe_failure(err)}; fix: use credentials that may call {JOB_ACCESS}")
    return JobError(f"AWS: {describe_failure(err)}; fix: check the credentials, the network and the region")


def load_config(env: str, config_dir: Path | None = None) -> tuple[Environment, str]:
    """``env``'s config and its file as shown in messages; no AWS call."""
    folder = config_dir or CONFIG_DIR
    try:
        environment = load_environment(env, folder)
    except ConfigError as err:
        raise JobError("\n".join(err.lines)) from None
    return environment, display_path(folder / f"{env}.yaml")


def open_account(environment: Environment, shown: str, session: boto3.session.Session | None = None) -> JobContext:
    """The account of ``environment``: the credentials must be the config's account, in its region."""
    try:
        aws = Aws(session or boto3.session.Session(region_name=environment.region))
        if aws.session.get_credentials() is None:
            raise JobError(NO_CREDENTIALS)
        account = aws.client("sts").get_caller_identity()["Account"]
    except (BotoCoreError, ClientError) as err:
        raise aws_failure(err, environment.region) from None
    if account != environment.account:
        raise JobError(
            f"{shown}: account: the credentials are for account {account}, not {environment.account}; "
            f"fix: use credentials of account {environment.account} (or set your account id in the config)"
        )
    return JobContext(environment=environment, aws=aws, config_file=shown)


def open_context(env: str, config_dir: Path | None = None, session: boto3.session.Session | None = None) -> JobContext:
    """Load ``env`` and open its account (``load_config``, then ``open_account``)."""
    environment, shown = load_config(env, config_dir)
    return open_account(environment, shown, session)
