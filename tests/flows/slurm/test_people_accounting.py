"""scripts/node/slurm_people.py's accounting step against the real slurmdbd of tests/flows/slurm: teams become accounts with
their fair-share shares, people their associations, the urgent QoS its priority; a second run changes nothing."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.flows.slurm.cluster import SlurmCluster
from tests.flows.slurm.config import URGENT_QOS

pytestmark = pytest.mark.slow  # a real Slurm

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "node" / "slurm_people.py"
#: Teams and people of their own: the harness's vision and nlp stay as the other tests expect them.
TEAMS = {"speech": 30, "robotics": 10}
USERS = [("ada", 5001, "speech"), ("lin", 5002, "robotics"), ("sam", 5003, "speech")]
#: The harness made the QoS with this priority already: the script must leave it as it is.
URGENT_PRIORITY = int(URGENT_QOS[1].split("=")[1])


@pytest.fixture
def people(slurm: SlurmCluster) -> Iterator[Path]:
    path = slurm.path("people.json")
    path.write_text(
        json.dumps(
            {
                "teams": [{"name": name, "shares": shares} for name, shares in TEAMS.items()],
                "users": [{"name": name, "uid": uid, "team": team} for name, uid, team in USERS],
                "urgent_qos": {"name": "urgent", "priority": URGENT_PRIORITY},
            }
        )
    )
    yield path
    slurm.run("sacctmgr", "--immediate", "delete", "user", f"name={','.join(u[0] for u in USERS)}", check=False)
    slurm.run("sacctmgr", "--immediate", "delete", "account", f"name={','.join(TEAMS)}", check=False)


def accounts(slurm: SlurmCluster, people: Path) -> str:
    return slurm.run(sys.executable, str(SCRIPT), "accounts", "--people", str(people))


def associations(slurm: SlurmCluster) -> set[tuple[str, ...]]:
    """The teams' associations: (account, user, fair-share shares, allowed QoS sorted)."""
    out = slurm.run("sacctmgr", "--noheader", "--parsable2", "show", "assoc", "format=account,user,fairshare,qos")
    rows = (line.split("|") for line in out.splitlines())
    return {(a, u, s, ",".join(sorted(q.split(",")))) for a, u, s, q in rows if a in TEAMS}


def test_teams_people_and_urgent_qos_applied_once(slurm: SlurmCluster, people: Path) -> None:
    first = accounts(slurm, people)
    assert "added account speech (fair share 30)" in first and "added ada to account speech" in first
    assert "QoS" not in first  # urgent was there, with this priority
    rows = associations(slurm)
    assert {("speech", "", "30", "normal,urgent"), ("robotics", "", "10", "normal,urgent")} <= rows
    assert {(team, name, "1", "normal,urgent") for name, _, team in USERS} <= rows
    show = ("sacctmgr", "--noheader", "--parsable2", "show")
    defaults = slurm.run(*show, "user", "format=user,defaultaccount").splitlines()
    assert {f"{name}|{team}" for name, _, team in USERS} <= set(defaults)
    assert f"urgent|{URGENT_PRIORITY}" in slurm.run(*show, "qos", "format=name,priority").splitlines()

    # A second boot (or the second login node): every change would print a line; none does, nothing moved.
    assert accounts(slurm, people).strip() == "slurm_people: accounts: nothing to change"
    assert associations(slurm) == rows
