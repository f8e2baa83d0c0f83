"""The shape of the house, held: no import circle, each layer imports only the layers below it, what runs on a
node imports nothing of the project, and a function fits on a screen (tests/import_graph.py reads the source).

The layers, ground first: ``config`` (the configuration, its schema and names); ``gpu_constructs`` (the
constructs, reading config); ``stacks`` (stacks of constructs); ``app.py`` (the app of stacks, from config). Beside
them, the operators' tools: ``ops`` (the gpu-platform command: config, and what a fleet's node receives as
``gpu_constructs/fleet/render`` renders it; never a construct or a stack) and ``scripts`` (config only). ``scripts/node``, ``scripts/image`` and ``examples`` ship to nodes and images alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.import_graph import (
    cycles,
    dynamic_imports,
    import_graph,
    long_functions,
    modules,
    package_graph,
    raw_imports,
    reach,
    within_one_package,
)

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("config", "gpu_constructs", "stacks", "app", "ops", "scripts", "examples")
#: What each part may import of the project besides itself: the modules under these names.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "config": (),
    "gpu_constructs": ("config",),
    "stacks": ("config", "gpu_constructs"),
    "app": ("config", "stacks"),
    "ops": ("config", "gpu_constructs.fleet.render"),
    "scripts": ("config",),
    "examples": (),
}
#: Shipped to a node or an image on their own: they import nothing of the project, nor of its tests.
SHIPPED_ALONE = ("scripts.node", "scripts.image", "examples")
PROJECT = {*TOPS, "tests"}
SCREEN = 60
#: The functions longer than a screen, each with why it stays one function (no new one joins silently, and one
#: that grows past its length here fails too).
LONG_FUNCTIONS = {
    # The training loop a user copies: set-up, the loop and the checkpoint in reading order, as PyTorch's own examples.
    "examples/train_ddp.py::main": 88,
    # One argparse option a line: the health check's command line as `--help` prints it.
    "scripts/node/gpu_health.py::build_parser": 67,
    # The user data in the order the node runs it; each part is a named renderer already.
    "gpu_constructs/fleet/render/user_data.py::render_user_data": 63,
    # The two AWS actions of a verdict, each kept running when the other failed, with their one-line errors.
    "scripts/node/gpu_health.py::apply_actions": 62,
}


#: What the gpu-platform command runs when it starts, around: config, itself, and the fleet's renderers (with the
#: two packages above them, whose __init__ runs first): never a construct, a stack or the CDK app.
OPS_REACH = ("config", "ops", "gpu_constructs.fleet.render")
OPS_REACH_PARENTS = {"gpu_constructs", "gpu_constructs.fleet"}


@pytest.fixture(scope="module")
def project() -> dict[str, Path]:
    return modules(ROOT, TOPS)


def _under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == prefix or name.startswith(f"{prefix}.") for prefix in prefixes)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    top = lambda module: module.split(".")[0]  # noqa: E731
    return sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        for target in targets
        if top(source) != top(target) and not _under(target, MAY_IMPORT[top(source)])
    )


def project_imports_of_shipped(imports: dict[str, set[str]]) -> list[str]:
    """What a module that ships alone imports of the project, besides its own folder (a relative import there)."""
    found = []
    for module, names in imports.items():
        home = next((folder for folder in SHIPPED_ALONE if _under(module, [folder])), None)
        if home is not None:
            found += [f"{module} imports {n}" for n in names if n.split(".")[0] in PROJECT and not _under(n, [home])]
    return sorted(found)


def ops_reaches_beyond(graph: dict[str, set[str]], known: dict[str, Path]) -> list[str]:
    started = reach(graph, known, [m for m in known if _under(m, ["ops"])])
    return sorted(m for m in started if not _under(m, OPS_REACH) and m not in OPS_REACH_PARENTS)


def folder_modules(folder: Path) -> dict[str, Path]:
    """The modules of a folder run with itself on sys.path (scripts/node, examples), named as they import them."""
    tops = [p.stem for p in folder.glob("*.py")] + [p.parent.name for p in folder.glob("*/__init__.py")]
    return modules(folder, tops)


def test_no_module_and_no_package_imports_itself_around_others(project: dict[str, Path]) -> None:
    graph = import_graph(project)
    assert cycles(graph) == []
    assert [group for group in cycles(package_graph(graph, project)) if not within_one_package(group)] == []
    assert dynamic_imports(project) == []  # an import by a computed name would escape the graph


@pytest.mark.parametrize("folder", ["scripts/node", "examples"])
def test_no_circle_among_what_runs_on_a_node(folder: str) -> None:
    """These import each other by their own names (their folder is on sys.path), an import in a function included."""
    known = folder_modules(ROOT / folder)
    assert len(known) > 3
    assert cycles(import_graph(known)) == []


def test_each_layer_imports_only_the_layers_below_it(project: dict[str, Path]) -> None:
    graph = import_graph(project)
    assert upward_imports(graph) == []
    assert ops_reaches_beyond(graph, project) == []


def test_what_ships_to_a_node_or_an_image_imports_nothing_of_the_project(project: dict[str, Path]) -> None:
    assert any(module.startswith("scripts.node.") for module in project)
    assert project_imports_of_shipped(raw_imports(project)) == []


def test_a_function_fits_on_a_screen_or_says_why_not(project: dict[str, Path]) -> None:
    found = list(long_functions(project, ROOT, SCREEN))
    assert len({name for name, _ in found}) == len(found), found  # no two share a name
    grown = {name: length for name, length in found if length > LONG_FUNCTIONS.get(name, SCREEN)}
    assert grown == {}, "split it into named helpers (or say here why it stays one function)"
    assert sorted(name for name, _ in found) == sorted(LONG_FUNCTIONS), "one is short now: take it off LONG_FUNCTIONS"
    assert len(LONG_FUNCTIONS) < 10


PLANTED = {
    "config/__init__.py": "",
    "config/a.py": "from config.b import B\n",
    "config/b.py": "from typing import TYPE_CHECKING\nfrom config import a\nif TYPE_CHECKING:\n    import ops\nB = 1\n",
    "config/c.py": "from stacks.s import S\n",
    "config/d.py": "import typing\nif typing.TYPE_CHECKING:\n    import ops\nelse:\n    import stacks\n",
    "config/e.py": "import importlib\nfrom ... import nothing\nimportlib.import_module(name)\n",
    "stacks/__init__.py": "",
    "stacks/s.py": "from config import a\nS = 1\n",
    "gpu_constructs/__init__.py": "",
    "gpu_constructs/fleet/__init__.py": "",
    "gpu_constructs/fleet/gpu_fleet.py": "",
    "gpu_constructs/fleet/render/__init__.py": "",
    "gpu_constructs/fleet/render/node_env.py": "from gpu_constructs.fleet import gpu_fleet\n",
    "ops/__init__.py": "from gpu_constructs.fleet.render import node_env\n\nclass C:\n    @property\n    def f(self):\n"
    + "        x = 1\n" * (SCREEN - 1),
    "scripts/node/probe.py": "import json\nfrom config.a import B\nfrom health import parse\n",
    "scripts/node/health/__init__.py": "",
    "scripts/node/health/tools.py": "",
    "scripts/node/health/parse.py": "from . import tools\n\ndef verdict():\n    import probe\n",
    "scripts/node_tools.py": "from config import a\n",
}


def test_the_checks_find_what_is_planted(tmp_path: Path) -> None:
    for name, text in PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    planted = modules(tmp_path, TOPS)
    graph = import_graph(planted)
    assert cycles(graph) == [["config.a", "config.b"]]  # the TYPE_CHECKING import of ops is no edge
    assert [g for g in cycles(package_graph(graph, planted)) if not within_one_package(g)] == [["config", "stacks"]]
    assert dynamic_imports(planted) == ["config.e:3"]  # and `from ... import` above the top package is no edge
    assert upward_imports(graph) == ["config.c imports stacks.s", "config.d imports stacks"]  # else: runs
    assert ops_reaches_beyond(graph, planted) == ["gpu_constructs.fleet.gpu_fleet"]  # through a renderer
    assert project_imports_of_shipped(raw_imports(planted)) == ["scripts.node.probe imports config.a"]
    assert cycles(import_graph(folder_modules(tmp_path / "scripts" / "node"))) == [["health.parse", "probe"]]
    assert list(long_functions(planted, tmp_path, SCREEN)) == [("ops/__init__.py::C.f", SCREEN + 1)]  # its decorator
