"""What the check reads from AWS, and AWS errors turned into one line each.

Every call goes through a client with standard retries, so throttling is retried before it
becomes an error. The readers return AWS's own records (dicts) and judge nothing.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    ProfileNotFound,
)

#: Standard retry mode backs off on throttling; what is still throttled after it is an error (exit 2).
_RETRIES = Config(retries={"mode": "standard", "max_attempts": 6})
_THROTTLING = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "RequestThrottled"}
)
_ACCESS_DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
_BAD_CREDENTIALS = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException"}
)


class CheckError(Exception):
    """The checks cannot run (or cannot finish); its text is the one line printed."""


def one_line(text: str) -> str:
    """AWS reasons may span lines; a report line must not."""
    return " ".join(str(text).split())


def describe_aws_error(what: str, err: Exception) -> str:
    """One line for an AWS error that stops a check: what failed, why, and what to do."""
    if isinstance(err, NoCredentialsError):
        return f"{what}: no AWS credentials found; fix: configure credentials (AWS_PROFILE, environment variables or a role)"
    if isinstance(err, ProfileNotFound):
        return f"{what}: {err}; fix: set AWS_PROFILE to a profile of ~/.aws/config, or unset it"
    if isinstance(err, HTTPClientError | EndpointConnectionError):
        return f"{what}: {err}; fix: check network access to AWS and the region"
    if not isinstance(err, ClientError):
        return f"{what}: {err}; fix: check the AWS credentials and configuration"
    code = _error_code(err) or "Unknown"
    message = one_line(err.response.get("Error", {}).get("Message", ""))
    call = f"{err.operation_name} failed ({code}: {message})" if message else f"{err.operation_name} failed ({code})"
    if code in _THROTTLING:
        return f"{what}: {call} after retries; fix: run the check again in a few minutes"
    if code in _ACCESS_DENIED:
        return f"{what}: {call}; fix: give the role that runs the check read access (listed in scripts/check_environment.py)"
    if code in _BAD_CREDENTIALS:
        return f"{what}: {call}; fix: refresh the AWS credentials"
    return f"{what}: {call}; fix: correct what AWS reports, then run the check again"


def _error_code(err: ClientError) -> str:
    return err.response.get("Error", {}).get("Code", "")


def _client(session: boto3.Session, service: str) -> Any:
    return session.client(service, config=_RETRIES)


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page.get(key, [])]


# --- session and account ----------------------------------------------------------------------------------------


def open_session(region: str) -> boto3.Session:
    """A session on the usual credential chain; a broken profile is a one-line error, not a traceback."""
    try:
        return boto3.Session(region_name=region)
    except BotoCoreError as err:
        raise CheckError(describe_aws_error("credentials", err)) from None


def verify_account(session: boto3.Session, account: str, environment: str) -> None:
    """Refuse credentials for another account than ``account``: every check would fail, for the wrong reason."""
    try:
        if session.get_credentials() is None:
            raise NoCredentialsError()
        actual = _client(session, "sts").get_caller_identity()["Account"]
    except (ClientError, BotoCoreError) as err:
        raise CheckError(describe_aws_error("credentials", err)) from None
    if actual != account:
        raise CheckError(
            f"credentials: they are for account {actual}, but {environment} is deployed to "
            f"{account}; fix: use credentials for account {account}"
        )


# --- readers ----------------------------------------------------------------------------------------------------


def list_stacks(session: boto3.Session) -> list[dict[str, Any]]:
    """Every CloudFormation stack of the region (DescribeStacks)."""
    return _pages(_client(session, "cloudformation"), "describe_stacks", "Stacks")


def list_groups(session: boto3.Session) -> list[dict[str, Any]]:
    """Every Auto Scaling group of the region."""
    return _pages(_client(session, "autoscaling"), "describe_auto_scaling_groups", "AutoScalingGroups")


def list_alarms(session: boto3.Session, prefix: str) -> list[dict[str, Any]]:
    """Metric and composite alarms whose names start with ``prefix``."""
    pages = (
        _client(session, "cloudwatch")
        .get_paginator("describe_alarms")
        .paginate(AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"])
    )
    return [alarm for page in pages for key in ("MetricAlarms", "CompositeAlarms") for alarm in page.get(key, [])]


def get_parameter(session: boto3.Session, name: str) -> dict[str, Any] | None:
    """The SSM parameter ``name``, or None where it does not exist."""
    try:
        return _client(session, "ssm").get_parameter(Name=name)["Parameter"]
    except ClientError as err:
        if _error_code(err) == "ParameterNotFound":
            return None
        raise


def list_file_systems(session: boto3.Session) -> list[dict[str, Any]]:
    """All FSx file systems of the region (its own function: moto reports no Lifecycle, so tests replace it)."""
    return _pages(_client(session, "fsx"), "describe_file_systems", "FileSystems")


def get_trail_status(session: boto3.Session, name: str) -> dict[str, Any] | None:
    """CloudTrail's GetTrailStatus answer for trail ``name``, or None where the trail does not exist."""
    try:
        return _client(session, "cloudtrail").get_trail_status(Name=name)
    except ClientError as err:
        if _error_code(err) == "TrailNotFoundException":
            return None
        raise
