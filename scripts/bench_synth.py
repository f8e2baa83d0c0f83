#!/usr/bin/env python3
"""Benchmark: full platform synth against an empty CDK app, measured in the same run.

Both are run the way a person runs them, through the pinned CDK CLI
(``cdk synth --quiet``), alternately, ``--runs`` times each; the medians and
their ratio are printed. Target: the full synth within 2x the empty app.
Exit status 1 when the target is missed.

The empty app is a stock ``App()``, so it runs CDK's built-in CloudFormation
validator, which this project turns off (cfn-lint validates its templates; see
``stacks.compliance.platform_app``). How much of the empty app's time that
validator takes is measured too (the empty app once more with
``CDK_VALIDATION=false``) and printed beside the ratio, so that the figure can be
read with and without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 2.0

# The smallest app the CLI will synthesize: one stack with nothing in it.
EMPTY_APP = """\
from aws_cdk import App, Stack

app = App()
Stack(app, "Empty")
app.synth()
"""


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ) | extra
    env["PATH"] = f"{ROOT / 'node_modules' / '.bin'}{os.pathsep}{env['PATH']}"
    env["CDK_DISABLE_CLI_TELEMETRY"] = "true"
    return env


def _time(cmd: list[str], cwd: Path, **env: str) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=_env(**env), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-synth-") as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "empty_app.py").write_text(EMPTY_APP)
        empty_cmd = [
            "cdk",
            "synth",
            "--quiet",
            "--no-notices",
            "--app",
            f"{python} empty_app.py",
            "-o",
            str(tmpdir / "empty.out"),
        ]
        full_cmd = ["cdk", "synth", "--quiet", "--no-notices", "-o", str(tmpdir / "full.out")]
        empty, full, bare = [], [], []
        for _ in range(args.runs):
            empty.append(_time(empty_cmd, tmpdir))
            full.append(_time(full_cmd, ROOT))
            bare.append(_time(empty_cmd, tmpdir, CDK_VALIDATION="false"))
        envs = sorted(p.name.removeprefix("assembly-") for p in (tmpdir / "full.out").glob("assembly-*"))
        stacks = len(list((tmpdir / "full.out").glob("assembly-*/*.template.json")))
    e, f, b = statistics.median(empty), statistics.median(full), statistics.median(bare)
    ratio = f / e
    print(f"empty CDK app synth : {e:6.2f} s  (median of {args.runs}: {', '.join(f'{x:.2f}' for x in empty)})")
    print(f"full platform synth : {f:6.2f} s  (median of {args.runs}: {', '.join(f'{x:.2f}' for x in full)})")
    print(f"                      {len(envs)} environments ({', '.join(envs)}), {stacks} stacks, both rule packs")
    print(
        f"ratio full/empty    : {ratio:6.2f}x  (target <= {TARGET_RATIO:.1f}x: {'met' if ratio <= TARGET_RATIO else 'MISSED'})"
    )
    print(
        f"CDK's built-in validator: {e - b:.2f} s of the empty app (without it {b:.2f} s; full/that {f / b:.2f}x);"
        " off in this app, cfn-lint validates its templates"
    )
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
