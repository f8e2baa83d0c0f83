"""SecurityStack: long-lived keys and audit resources shared by the other stacks."""

from __future__ import annotations

from constructs import Construct

from config import Environment
from gpu_constructs.logs_key import LogsKey
from stacks.base import PlatformStack


class SecurityStack(PlatformStack):
    """Customer-managed keys of the environment.

    Attributes:
        logs_key: encrypts every log group of the platform.
    """

    def __init__(self, scope: Construct, construct_id: str, *, env: Environment) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=True, description=f"GPU platform {env.name}: keys and audit"
        )
        self.logs_key = LogsKey(self, "LogsKey", env_name=env.name, removal_policy=self.removal_policy).key
