"""The identity of a resource that other stacks read through a weak reference (``Fn::GetStackOutput``).

A stack reads another's resources through outputs, and ``cdk deploy`` skips a stack whose template did not
change: when a producer is replaced (a target group's port, a file system's deployment type), its readers
would keep the deleted one. Each reader therefore carries the identity of what it reads: a digest of the
config values that feed the producer's create-only properties, so its template changes whenever a
replacement does, in the same deploy (tests/update/test_update_matrix.py follows each reference).
"""

from __future__ import annotations

import hashlib
import json

from config.fleets import Fleet
from config.schema import Environment


def _digest(*parts: object) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _network(env: Environment) -> tuple[object, ...]:
    net = env.network
    return (env.name, net.vpc_cidr, net.egress, net.gpu_subnet_mask, net.public_subnet_mask, env.availability_zones)


def service_identity(env: Environment, fleet: Fleet) -> str:
    """A served fleet's load balancer and target group (Scheme, Port, VpcId, subnets)."""
    service = fleet.service
    assert service is not None, f"fleet {fleet.name} serves nothing"
    return _digest(_network(env), fleet.name, service.port, service.load_balancer.internal)


def file_system_identity(env: Environment) -> str:
    """The Lustre file system (DeploymentType, SubnetIds, KmsKeyId: the key follows the deployment type)."""
    fs = env.storage.file_system
    return _digest(_network(env), fs.deployment_type, fs.availability_zone)
