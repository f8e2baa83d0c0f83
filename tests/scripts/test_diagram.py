"""scripts/diagram.py: the committed docs/architecture.svg is what the current assembly draws, and every
cross-stack reference of the templates is an arrow of it.

The committed picture is of the shipped config/, whose digest it carries. A user's own config/ gives
another picture: locally the comparison is then skipped with the fix (run make diagram); in CI (CI set),
where config/ is the committed one, a digest that differs is a stale picture and fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.diagram import config_digest, drawn_from, main, references, render, stamp
from tests.synth import Synth

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "architecture.svg"


def test_committed_svg_is_the_current_assembly(shipped_synth: Synth) -> None:
    # The committed picture is of the shipped config's dev environment, as `make diagram` draws it.
    committed = COMMITTED.read_text(encoding="utf-8")
    drawn = drawn_from(committed)
    assert drawn is not None, "docs/architecture.svg names no config digest; fix: run make diagram, and commit it"
    if drawn != config_digest() and not os.environ.get("CI"):
        pytest.skip("config/ is not the config docs/architecture.svg was drawn from; run make diagram to draw yours")
    assert committed == stamp(render(shipped_synth.outdir, "dev"), config_digest()), (
        "docs/architecture.svg is stale; fix: run make diagram (synthesizes, then redraws it), and commit it"
    )


def test_the_digest_names_the_config_it_was_drawn_from(tmp_path: Path) -> None:
    (tmp_path / "dev.yaml").write_text("name: dev\n", encoding="utf-8")
    digest = config_digest(tmp_path)
    assert drawn_from(stamp("<svg>\n</svg>\n", digest)) == digest and drawn_from("<svg>\n</svg>\n") is None
    (tmp_path / "dev.yaml").write_text("name: dev\nfleets: []\n", encoding="utf-8")  # a user's change
    assert config_digest(tmp_path) != digest


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
    assert out.read_text(encoding="utf-8") == stamp(render(synth.outdir, "dev"), config_digest())


def test_missing_assembly_and_help(tmp_path: Path, capsys) -> None:
    assert main(["--assembly", str(tmp_path), "--out", str(tmp_path / "x.svg")]) == 2
    assert capsys.readouterr().err.endswith("fix: run make synth ENV=dev (or pass --assembly)\n")
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "diagram.py"), "--help"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0 and run.stdout.startswith("usage: diagram.py")
    assert list(tmp_path.iterdir()) == []
