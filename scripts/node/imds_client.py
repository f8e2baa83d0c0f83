"""A small IMDSv2 client for the node services (Python stdlib only).

IMDSv2 asks for a session token first (``PUT /latest/api/token`` with a TTL header), then every
``GET`` carries that token. A token ends when its TTL runs out; IMDS then answers ``401``. This
client renews the token shortly before its TTL ends and, should IMDS still answer 401 (the
clock drifted, the instance was stopped and started), fetches a new one and retries once.

Proxies are ignored on purpose: IMDS is link-local and must never be reached through a proxy
that ``HTTP_PROXY`` happens to name.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

DEFAULT_IMDS_URL = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"  # noqa: S105 - a URL path, not a secret
LIFECYCLE_PATH = "/latest/meta-data/instance-life-cycle"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"  # noqa: S105 - a header name, not a secret
MAX_TOKEN_TTL_S = 21600  # IMDS refuses longer TTLs
DEFAULT_TOKEN_TTL_S = 21600
DEFAULT_TIMEOUT_S = 2.0

# Metadata paths the node services read.
INSTANCE_ID_PATH = "/latest/meta-data/instance-id"
REGION_PATH = "/latest/meta-data/placement/region"
ASG_TAG_PATH = "/latest/meta-data/tags/instance/aws:autoscaling:groupName"


class ImdsError(RuntimeError):
    """IMDS could not be reached or answered something other than 200 / 404."""


class ImdsClient:
    """IMDSv2 reads with token renewal. ``get`` returns the body, or ``None`` for a 404."""

    def __init__(
        self,
        base_url: str = DEFAULT_IMDS_URL,
        *,
        token_ttl_s: int = DEFAULT_TOKEN_TTL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= token_ttl_s <= MAX_TOKEN_TTL_S:
            raise ValueError(f"token TTL must be 1..{MAX_TOKEN_TTL_S} seconds, got {token_ttl_s}")
        if urllib.parse.urlsplit(base_url).scheme not in ("http", "https"):
            raise ValueError(f"IMDS URL must be http(s)://..., got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.token_ttl_s = token_ttl_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._token: str | None = None
        self._token_expires_at = 0.0
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.tokens_fetched = 0

    # -- token ---------------------------------------------------------------------------------

    def _renew_margin_s(self) -> float:
        """Renew a little before the TTL ends, so that a request never races the expiry."""
        return min(60.0, self.token_ttl_s / 10)

    def _fetch_token(self) -> str:
        request = urllib.request.Request(  # noqa: S310 - scheme checked in __init__
            self.base_url + TOKEN_PATH,
            method="PUT",
            headers={TTL_HEADER: str(self.token_ttl_s)},
        )
        issued_at = self._clock()
        status, body = self._send(request)
        if status != 200 or not body:
            raise ImdsError(f"IMDS token request answered HTTP {status}")
        self._token = body.strip()
        self._token_expires_at = issued_at + self.token_ttl_s
        self.tokens_fetched += 1
        return self._token

    def token(self) -> str:
        token = self._token
        if token is not None and self._clock() < self._token_expires_at - self._renew_margin_s():
            return token
        return self._fetch_token()

    def invalidate_token(self) -> None:
        self._token = None
        self._token_expires_at = 0.0

    # -- reads ---------------------------------------------------------------------------------

    def get(self, path: str) -> str | None:
        """GET a metadata path: the body on 200, ``None`` on 404; a 401 renews the token once."""
        for attempt in range(2):
            url = self.base_url + path
            request = urllib.request.Request(url, headers={TOKEN_HEADER: self.token()})  # noqa: S310 - scheme checked
            status, body = self._send(request)
            if status == 200:
                return body
            if status == 404:
                return None
            if status == 401 and attempt == 0:
                self.invalidate_token()
                continue
            raise ImdsError(f"IMDS GET {path} answered HTTP {status}")
        raise ImdsError(f"IMDS GET {path} still unauthorized with a new token")  # pragma: no cover

    def _send(self, request: urllib.request.Request) -> tuple[int, str]:
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            body = err.read().decode("utf-8", "replace") if err.fp else ""
            return err.code, body
        except (urllib.error.URLError, OSError) as err:
            raise ImdsError(f"IMDS {request.get_method()} {request.full_url} failed: {err}") from err

    # -- the identity the node services need ---------------------------------------------------

    def instance_id(self) -> str:
        return self._required(INSTANCE_ID_PATH)

    def region(self) -> str:
        return self._required(REGION_PATH)

    def asg_name(self) -> str | None:
        """The ``aws:autoscaling:groupName`` tag; ``None`` unless the launch template enables
        instance metadata tags (``InstanceMetadataTags: enabled``) and the instance is in an ASG."""
        value = self.get(ASG_TAG_PATH)
        return value.strip() if value else None

    def market(self) -> str | None:
        """How the instance was bought: ``spot``, ``on-demand`` or ``scheduled`` (instance-life-cycle)."""
        value = self.get(LIFECYCLE_PATH)
        return value.strip() if value else None

    def _required(self, path: str) -> str:
        value = self.get(path)
        if not value:
            raise ImdsError(f"IMDS has no {path}")
        return value.strip()
