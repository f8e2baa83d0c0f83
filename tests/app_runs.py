"""``app.py`` run two ways: as the process the CDK CLI starts, and in the test process.

``run_app_process`` is what ``cdk synth`` does: a new Python with the context in CDK_CONTEXT_JSON,
its exit status and stderr as they are. ``run_app`` calls the same ``app.main`` with an App built
from the same context, in this process, for the many config mistakes whose only difference is the
line they print: a new process costs about a second of CPU (Python, aws_cdk, a jsii runtime).

In this process stderr is what ``main`` printed, plus a line for each warning and each logged
warning or error a real process would have printed. What the jsii runtime forwards from node comes
on a thread of its own and may land after the call: the real process is therefore run for a mistake
found while reading the config (tests/config/test_config_errors.py) and for one found while the
stages are built (tests/flows/test_fabric_step.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import warnings
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
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)  # with .buffer, like sys.stderr
    stdout = io.StringIO()
    logged = logging.StreamHandler(stderr)
    logged.setLevel(logging.WARNING)  # what logging's last-resort handler prints in a process without a config
    root = logging.getLogger()
    root.addHandler(logged)
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr):
            warnings.simplefilter("always")
            with contextlib.redirect_stdout(stdout):
                code = app_module.main(platform_app(context=context, outdir=str(outdir)))
    finally:
        root.removeHandler(logged)
    shown = [w for w in caught if not issubclass(w.category, HIDDEN_BY_DEFAULT)]
    text = stderr.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    text += "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in shown)
    return subprocess.CompletedProcess(["app.py"], code, stdout.getvalue(), text)


#: Warnings Python's default filters keep off stderr in a script's imports (``python app.py``).
HIDDEN_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
