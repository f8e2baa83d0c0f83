"""``app.py`` run two ways: as the process the CDK CLI starts, and in the test process.

``run_app_process`` is what ``cdk synth`` does: a new Python with the context in CDK_CONTEXT_JSON,
its exit status and stderr as they are. ``run_app`` calls the same ``app.main`` with an App built
from the same context, in this process, for the many config mistakes whose only difference is the
line they print: a new process costs about a second of CPU (Python, aws_cdk, a jsii runtime) that
says nothing more once one test has shown the process exits 2 with only those lines.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import app as app_module
from stacks.compliance import platform_app

REPO_ROOT = Path(__file__).resolve().parent.parent


def run_app_process(context: dict[str, Any], outdir: Path) -> subprocess.CompletedProcess[str]:
    """``python app.py`` as the CDK CLI starts it."""
    env = dict(os.environ)
    env["PATH"] = f"{REPO_ROOT / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    env["CDK_CONTEXT_JSON"] = json.dumps(context)
    env["CDK_OUTDIR"] = str(outdir)
    return subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_app(context: dict[str, Any], outdir: Path) -> subprocess.CompletedProcess[str]:
    """``app.main`` in this process, on an App with ``context``: its exit status and what it wrote to stderr.

    An exception ``main`` lets through fails the test with its traceback, as it would print one.
    """
    stderr, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        code = app_module.main(platform_app(context=context, outdir=str(outdir)))
    return subprocess.CompletedProcess(["app.py"], code, stdout.getvalue(), stderr.getvalue())
