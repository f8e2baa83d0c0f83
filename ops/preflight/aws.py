"""The AWS side of preflight: clients on one session, Service Quotas lookups, one-line AWS errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

#: Standard retry mode backs off on throttling before a call counts as failed.
_RETRIES = Config(retries={"mode": "standard", "max_attempts": 6})

#: The line printed (exit 2) when no credentials are found.
NO_CREDENTIALS = (
    "no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
    "(the shipped configs use placeholder account ids: set yours in config/<env>.yaml)"
)


class Aws:
    """boto3 clients of one session and region, made once each (a test may stub one before the checks run)."""

    def __init__(self, session: boto3.session.Session):
        self.session = session
        self.region = session.region_name
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service, config=_RETRIES)
        return self._clients[service]

    def pages(self, service: str, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
        """Every item under ``key`` of every page of ``operation``."""
        paginator = self.client(service).get_paginator(operation)
        return [item for page in paginator.paginate(**kwargs) for item in page.get(key, [])]

    def quota(self, service_code: str, quota_code: str) -> float | None:
        """The quota's value in this account: the applied value, else AWS's default; None when neither exists."""
        quotas = self.client("service-quotas")
        for call in (quotas.get_service_quota, quotas.get_aws_default_service_quota):
            try:
                return float(call(ServiceCode=service_code, QuotaCode=quota_code)["Quota"]["Value"])
            except ClientError as err:
                if error_code(err) != "NoSuchResourceException":
                    raise
        return None

    def quotas_named(self, service_code: str, matches: Callable[[str], bool]) -> list[dict[str, Any]]:
        """Quotas of ``service_code`` whose name ``matches``: applied values first, then AWS's defaults
        for those not yet applied (ListServiceQuotas lists only quotas with an applied value)."""
        applied = self.pages("service-quotas", "list_service_quotas", "Quotas", ServiceCode=service_code)
        defaults = self.pages("service-quotas", "list_aws_default_service_quotas", "Quotas", ServiceCode=service_code)
        found = {q["QuotaCode"]: q for q in defaults if matches(q["QuotaName"])}
        found.update({q["QuotaCode"]: q for q in applied if matches(q["QuotaName"])})
        return list(found.values())


def error_code(err: ClientError) -> str:
    return err.response.get("Error", {}).get("Code", "")


def describe_failure(err: Exception) -> str:
    """One line for a call that failed: which call, AWS's code and message."""
    if isinstance(err, ClientError):
        message = " ".join(err.response.get("Error", {}).get("Message", "").split())
        return f"{err.operation_name} failed ({error_code(err)}: {message})"
    if isinstance(err, BotoCoreError):
        return " ".join(str(err).split())
    return f"{type(err).__name__}: {err}"
