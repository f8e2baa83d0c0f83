"""The shape of the house, held: no import circle, each layer imports only the layers below it, what runs on a
node imports nothing of the project, and a function fits on a screen (tests/import_graph.py reads the source).

The layers, ground first: ``config`` (the configuration, its schema and names); ``gpu_constructs`` (the
constructs, reading config); ``stacks`` (stacks of constructs); ``app.py`` (the app of stacks, from config). Beside
them, the operators' tools: ``ops`` (the gpu-platform command: config, and what a fleet's node receives as
``gpu_constructs/fleet/render`` renders it; never a construct or a stack) and ``scripts`` (config only). ``scripts/node``, ``scripts/image`` and ``examples`` ship to nodes and images alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.import_graph import cycles, import_graph, long_functions, modules, package_graph, raw_imports

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


@pytest.fixture(scope="module")
def project() -> dict[str, Path]:
    return modules(ROOT, TOPS)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    top = lambda module: module.split(".")[0]  # noqa: E731
    return sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        for target in targets
        if top(source) != top(target)
        and not any(target == name or target.startswith(f"{name}.") for name in MAY_IMPORT[top(source)])
    )


def project_imports_of_shipped(imports: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} imports {name}"
        for module, names in imports.items()
        if module.startswith(SHIPPED_ALONE)
        for name in names
        if name.split(".")[0] in PROJECT
    )


def test_no_module_and_no_package_imports_itself_around_others(project: dict[str, Path]) -> None:
    graph = import_graph(project)
    assert cycles(graph) == []
    assert cycles(package_graph(graph, project)) == []


def test_each_layer_imports_only_the_layers_below_it(project: dict[str, Path]) -> None:
    assert upward_imports(import_graph(project)) == []


def test_what_ships_to_a_node_or_an_image_imports_nothing_of_the_project(project: dict[str, Path]) -> None:
    assert any(module.startswith("scripts.node.") for module in project)
    assert project_imports_of_shipped(raw_imports(project)) == []


def test_a_function_fits_on_a_screen_or_says_why_not(project: dict[str, Path]) -> None:
    found = dict(long_functions(project, ROOT, SCREEN))
    grown = {name: length for name, length in found.items() if length > LONG_FUNCTIONS.get(name, SCREEN)}
    assert grown == {}, "split it into named helpers (or say here why it stays one function)"
    assert sorted(found) == sorted(LONG_FUNCTIONS), "a function here is short now: take it off LONG_FUNCTIONS"
    assert len(LONG_FUNCTIONS) < 10


def test_the_checks_find_a_planted_circle_an_upward_import_and_a_long_function(tmp_path: Path) -> None:
    files = {
        "config/__init__.py": "",
        "config/a.py": "from config.b import B\n",
        "config/b.py": "from typing import TYPE_CHECKING\nfrom config import a\nif TYPE_CHECKING:\n    import ops\nB = 1\n",
        "config/c.py": "from stacks.s import S\n",
        "stacks/__init__.py": "",
        "stacks/s.py": "from ..config import a\nS = 1\n",
        "scripts/node/probe.py": "import json\nfrom config.a import B\n",
        "ops/__init__.py": "def f():\n" + "    x = 1\n" * SCREEN,
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    planted = modules(tmp_path, TOPS)
    graph = import_graph(planted)
    assert cycles(graph) == [["config.a", "config.b"]]  # the TYPE_CHECKING import of ops is no edge
    assert cycles(package_graph(graph, planted)) == [["config", "stacks"]]
    assert upward_imports(graph) == ["config.c imports stacks.s"]
    assert project_imports_of_shipped(raw_imports(planted)) == ["scripts.node.probe imports config.a"]
    assert dict(long_functions(planted, tmp_path, SCREEN)) == {"ops/__init__.py::f": SCREEN + 1}
