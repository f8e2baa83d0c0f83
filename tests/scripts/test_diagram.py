"""scripts/diagram.py: the committed docs/architecture.svg is what the current assembly draws, and every
cross-stack reference of the templates is an arrow of it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from scripts.diagram import main, references, render
from tests.synth import Synth

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "architecture.svg"


def test_committed_svg_is_the_current_assembly(shipped_synth: Synth) -> None:
    # The committed picture is of the shipped config's dev environment, as `make diagram` draws it.
    synth = shipped_synth
    assert COMMITTED.read_text(encoding="utf-8") == render(synth.outdir, "dev"), (
        "docs/architecture.svg is stale; fix: make diagram (synthesizes, then redraws it), and commit it"
    )


def test_every_cross_stack_reference_is_drawn(synth: Synth) -> None:
    svg = render(synth.outdir, "dev")
    templates = {s.name: s.json for s in synth.stacks.values() if s.env == "dev"}
    pairs = set()
    for consumer, template in templates.items():
        for producer in re.findall(r'"Fn::GetStackOutput": \{"StackName": "([^"]+)"', json.dumps(template)):
            pairs.add((consumer, producer))
    assert pairs, "the dev templates read other stacks' outputs"
    assert set(references(templates)) == pairs
    legend = re.findall(r'class="legend">\d+\. (\S+) uses (\S+): ([^<]+)<', svg)
    assert {(c, p) for c, p, what in legend if what != "deploy order"} == pairs
    for stack in templates:
        assert f'class="name">{stack}</text>' in svg
    # what a reference carries is named after the producer's resource: the fleets read the file system
    assert ("dev-Fleets", "dev-Storage", "FSx for Lustre") in legend
    assert len(re.findall(r'<path d="M\d+,\d+L\d+,\d+" class="(?:ref|order)"', svg)) == len(legend)  # one arrow each


def test_output_is_deterministic_and_written(synth: Synth, tmp_path: Path) -> None:
    out = tmp_path / "a.svg"
    assert main(["--assembly", str(synth.outdir), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == render(synth.outdir, "dev")


def test_missing_assembly_and_help(tmp_path: Path, capsys) -> None:
    assert main(["--assembly", str(tmp_path), "--out", str(tmp_path / "x.svg")]) == 2
    assert capsys.readouterr().err.endswith("fix: run make synth ENV=dev (or pass --assembly)\n")
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "diagram.py"), "--help"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0 and run.stdout.startswith("usage: diagram.py")
    assert list(tmp_path.iterdir()) == []
