"""The ``gpu-platform`` command: one Typer app, one function per subcommand.

Exit codes everywhere: 0 fine, 1 findings (ERROR, or WARNING with --strict), 2 usage or config
error. A config error, missing credentials or an AWS error is one line on stderr, never a
traceback (set GPU_PLATFORM_DEBUG=1 to see one for an unexpected error).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from config.loader import CONFIG_DIR, ConfigError
from ops.fabric.command import fabric_test
from ops.job.command import app as job_app

NO_CREDENTIALS = (
    "no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (the shipped configs use "
    "placeholder account ids: set yours in config/<env>.yaml)"
)

app = typer.Typer(
    name="gpu-platform",
    help="Operate the GPU platform: validate the config, check an account, estimate cost, show what runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

app.add_typer(job_app, name="job")
# The fabric check runs through the job document; it builds on job's modules, so it is registered here, not by job.
job_app.command("fabric-test", epilog="Example: gpu-platform job fabric-test --env staging --fleet training")(
    fabric_test
)

EnvOption = Annotated[str, typer.Option("--env", "-e", help="environment: the name of a config/<env>.yaml")]
JsonOption = Annotated[bool, typer.Option("--json", help="print one JSON document on stdout")]
ConfigDirOption = Annotated[Path, typer.Option("--config-dir", help="folder of the <env>.yaml files")]


@app.command(epilog="Example: gpu-platform validate --env dev --strict")
def validate(
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env", "-e", help="environment(s) to check, comma-separated or repeated (dev,prod); all by default"
        ),
    ] = None,
    json_out: JsonOption = False,
    strict: Annotated[bool, typer.Option("--strict", help="exit 1 on WARNINGs too")] = False,
    config_dir: ConfigDirOption = CONFIG_DIR,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="git revision of the deployed config (default HEAD where config/ is in git): edits since then that "
            "replace a resource in use are ERRORs; a revision that cannot be read is an ERROR",
        ),
    ] = None,
    allow_replacement: Annotated[
        bool, typer.Option("--allow-replacement", help="report those edits as WARNINGs (done the safe way)")
    ] = False,
) -> None:
    """Check the config as synth does, plus clock checks (Capacity Block windows), placeholders and edits that would
    replace a resource in use (against git); no AWS."""
    from ops.findings import exit_code
    from ops.validate import validate as run

    names = [name.strip() for value in env or [] for name in value.split(",") if name.strip()]
    findings = run(
        names or None,
        config_dir,
        since=since or "HEAD",
        allow_replacement=allow_replacement,
        since_required=since is not None,
    )
    code = exit_code(findings, strict)
    if json_out:
        print(json.dumps({"findings": [f.as_dict() for f in findings], "exit_code": code}, indent=2))
    else:
        console = Console(highlight=False)
        colour = {"ERROR": "red", "WARNING": "yellow", "INFO": "blue"}
        for f in findings:
            fix = f"; fix: {f.fix}" if f.fix else ""
            console.print(f"[{colour[f.level.value]}]{f.level.value}[/] {f.check}: {f.message}{fix}", soft_wrap=True)
        counts = {level: sum(f.level.value == level for f in findings) for level in colour}
        summary = ", ".join(f"{n} {level}" for level, n in counts.items() if n) or "no findings"
        console.print(f"{'config valid' if code == 0 else 'config has findings'}: {summary}")
    raise typer.Exit(code)


@app.command(epilog="Example: gpu-platform cost --env prod --json")
def cost(
    env: EnvOption,
    json_out: JsonOption = False,
    live: Annotated[
        bool, typer.Option("--live", help="Spot and Capacity Block prices from the account (needs credentials)")
    ] = False,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """Hourly and monthly cost per fleet and in total, at min/desired/max, against all On-Demand."""
    from ops.cost.command import cost_command

    raise typer.Exit(cost_command(env, json_out, live, config_dir))


@app.command(epilog="Example: gpu-platform preflight --env dev --json")
def preflight(
    env: EnvOption,
    json_out: JsonOption = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="exit 1 on WARNINGs and on checks that could not run too (for CI)")
    ] = False,
    config_dir: ConfigDirOption = CONFIG_DIR,
) -> None:
    """Will a deploy succeed in this account: identity, zones, quotas, reservations, AMIs (needs credentials)."""
    from ops.preflight.command import preflight_command

    raise typer.Exit(preflight_command(env, json_out, config_dir, strict=strict))


@app.command(epilog="Example: gpu-platform status --env dev --json")
def status(env: EnvOption, json_out: JsonOption = False, config_dir: ConfigDirOption = CONFIG_DIR) -> None:
    """What runs now: fleets, instances, GPU utilization, alarms, Spot notices (needs credentials)."""
    from ops.status_command import status_command

    raise typer.Exit(status_command(env, json_out, config_dir))


def _fail(line: str) -> int:
    print(line, file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app and turn known failures into one line and exit 2."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

    try:
        # Outside standalone mode click returns the code a command exits with (typer.Exit).
        result = app(args=argv, standalone_mode=False)
    except typer.Exit as done:
        return done.exit_code
    except SystemExit as done:  # click's own exits (--help)
        return int(done.code or 0)
    except ConfigError as err:
        for line in err.lines:
            print(line, file=sys.stderr)
        return 2
    except (NoCredentialsError, PartialCredentialsError):
        return _fail(NO_CREDENTIALS)
    except ClientError as err:
        info = err.response.get("Error", {})
        return _fail(f"AWS {err.operation_name}: {info.get('Code')}: {info.get('Message')}")
    except BotoCoreError as err:
        return _fail(f"AWS: {err}")
    except typer.Abort:
        return _fail("gpu-platform: aborted")
    except typer.TyperException as err:  # usage errors: the parser's own message, exit 2
        show = getattr(err, "show", None)
        if show is None:
            return _fail(f"gpu-platform: {err}")
        show()
        return int(getattr(err, "exit_code", 2))
    except Exception as err:
        if os.environ.get("GPU_PLATFORM_DEBUG"):
            raise
        return _fail(
            f"gpu-platform: unexpected {type(err).__name__}: {err}; set GPU_PLATFORM_DEBUG=1 for the traceback"
        )
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
