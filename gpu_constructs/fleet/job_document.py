"""The SSM Command document that starts, inspects and stops a training job on one node.

Run Command hands every parameter to the step as an environment variable ``SSM_<Name>``
(``interpolationType: ENV_VAR``, SSM Agent 3.3.2746.0 or later) and the step passes each one, quoted,
as one argument to the node's job runner (``scripts/node/jobs/runner.py``). No parameter is ever
written into the script text (no ``{{ }}``), so a value never becomes shell code; each one still
has an ``allowedPattern`` so that a bad value is refused by SendCommand, before it reaches a node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_ssm as ssm
from constructs import Construct

from gpu_constructs.fleet.render.user_data import INSTALL_PREFIX

#: The runner module, run as ``python3 -m`` with the node scripts on PYTHONPATH.
RUNNER_MODULE = "jobs.runner"
#: The actions of the runner.
ACTIONS = ("start", "status", "stop")
#: Longest job command (one string, ``shlex.join`` of the user's argv).
COMMAND_MAX_CHARS = 4096
#: The step's own limit: ``start`` returns as soon as the job's unit runs, ``stop`` once it stopped.
STEP_TIMEOUT_SECONDS = 600

#: The runner's options, in order: (option, document parameter).
RUNNER_OPTIONS = (
    ("--job-id", "JobId"),
    ("--nodes", "Nodes"),
    ("--procs-per-node", "ProcsPerNode"),
    ("--rdzv-endpoint", "RendezvousEndpoint"),
    ("--workdir", "WorkingDirectory"),
    ("--max-restarts", "MaxRestarts"),
    ("--command", "Command"),
)


@dataclass(frozen=True)
class JobParameter:
    pattern: str
    description: str
    default: str | None = None  # None: required


def job_parameters(*, rendezvous_port: int, max_restarts: int) -> dict[str, JobParameter]:
    """The document's parameters (all String) with their patterns and defaults."""
    return {
        "Action": JobParameter("^(start|status|stop)$", "start, status or stop the job on this node", "start"),
        "JobId": JobParameter(
            "^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$",
            "The job's name: its systemd unit gpu-job-<JobId>.service, pid file, checkpoints and log streams",
        ),
        "Nodes": JobParameter("^[1-9][0-9]{0,3}$", "torchrun --nnodes: the job's number of nodes", "1"),
        "ProcsPerNode": JobParameter(
            "^[1-9][0-9]{0,2}$", "torchrun --nproc-per-node: the GPU count of the node's instance type", "1"
        ),
        "RendezvousEndpoint": JobParameter(
            "^[0-9.]{7,15}:[0-9]{2,5}$",
            "torchrun --rdzv-endpoint: private IPv4 address of the rendezvous node and the rendezvous port",
            f"127.0.0.1:{rendezvous_port}",
        ),
        "WorkingDirectory": JobParameter(
            "^/fsx(/[A-Za-z0-9._-]+)*$", "The job's working directory on the Lustre file system", "/fsx"
        ),
        "MaxRestarts": JobParameter(
            "^[0-9]{1,3}$", "torchrun --max-restarts: worker group restarts before the job fails", str(max_restarts)
        ),
        # Empty for status and stop (the runner refuses to start an empty command).
        "Command": JobParameter(
            f"^[^\\r\\n]{{0,{COMMAND_MAX_CHARS}}}$",
            "The job's command as one shell-quoted string (shlex.join of its argv); the runner splits it, "
            "no shell runs it",
            "",
        ),
    }


def runner_script() -> list[str]:
    """The step's commands: refuse an agent without ENV_VAR interpolation, then run the runner with
    every parameter as one quoted argument."""
    options = " ".join(f'{option} "${{SSM_{name}-}}"' for option, name in RUNNER_OPTIONS)
    return [
        'if [ -z "${SSM_JobId+x}" ]; then',
        "  echo 'gpu-platform job: SSM_JobId is not set: this SSM Agent does not interpolate parameters into "
        "environment variables; fix: use SSM Agent 3.3.2746.0 or later (the golden AMI)' >&2",
        "  exit 2",
        "fi",
        f'PYTHONPATH={INSTALL_PREFIX} python3 -m {RUNNER_MODULE} "${{SSM_Action-}}" {options}',
    ]


def job_document_content(*, rendezvous_port: int, max_restarts: int) -> dict[str, Any]:
    """The document (schema 2.2): one aws:runShellScript step, Linux only."""
    parameters: dict[str, Mapping[str, str]] = {}
    for name, spec in job_parameters(rendezvous_port=rendezvous_port, max_restarts=max_restarts).items():
        parameters[name] = {
            "type": "String",
            "description": spec.description,
            "interpolationType": "ENV_VAR",
            "allowedPattern": spec.pattern,
            **({"default": spec.default} if spec.default is not None else {}),
        }
    return {
        "schemaVersion": "2.2",
        "description": (
            "Start, inspect or stop a training job on this GPU node: torchrun under a transient systemd unit "
            "gpu-job-<JobId>.service that outlives the command; prints the job's state as one JSON line."
        ),
        "parameters": parameters,
        "mainSteps": [
            {
                "action": "aws:runShellScript",
                "name": "JobRunner",
                "precondition": {"StringEquals": ["platformType", "Linux"]},
                "inputs": {"timeoutSeconds": str(STEP_TIMEOUT_SECONDS), "runCommand": runner_script()},
            }
        ],
    }


class JobDocument(Construct):
    """The environment's job document, named ``document_name``.

    ``UpdateMethod: NewVersion``: a change to the content becomes a new version of the named document
    (CloudFormation's default, Replace, cannot replace a resource with a fixed name).

    Attributes:
        document: the ``AWS::SSM::Document``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, document_name: str, rendezvous_port: int, max_restarts: int
    ) -> None:
        super().__init__(scope, construct_id)
        self.document = ssm.CfnDocument(
            self,
            "Document",
            name=document_name,
            document_type="Command",
            document_format="JSON",
            target_type="/AWS::EC2::Instance",
            update_method="NewVersion",
            content=job_document_content(rendezvous_port=rendezvous_port, max_restarts=max_restarts),
        )
