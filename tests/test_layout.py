"""The suite's one layout (docs/testing.md, "Where a test goes"): a module's tests mirror its path, and a test module
imports no other test module.

- A folder of tests/ that holds test modules is the mirror of a source folder (``tests/<source folder>/``, e.g.
  ``tests/scripts/node/health/`` for ``scripts/node/health/``) or one of the folders by kind: ``tests/flows/`` (a flow
  through many modules, or the whole synthesized app), ``tests/snapshot/`` and ``tests/update/`` (the whole app's
  templates). ``tests/`` itself holds the tests of app.py, of the repository's own files and of the suite's helpers.
- ``gpu_constructs/<package>/<module>.py`` is tested in ``tests/gpu_constructs/<package>/test_<module>.py``. A pure
  renderer (``<package>/render/<module>.py``) is tested in ``tests/gpu_constructs/<package>/render/test_<module>.py``
  or, where a test elsewhere already covers it, by a test module that imports it.
- What test modules share lives in helper modules (no ``test_`` prefix) and fixtures in the ``conftest.py`` of the
  folder that needs them, never in a test module that others import.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRUCTS = ROOT / "gpu_constructs"
TESTS = ROOT / "tests"
#: The source folders that tests mirror.
SOURCES = ("config", "gpu_constructs", "stacks", "ops", "scripts", "examples")
#: The folders by kind: tests of the whole app or of a flow through many modules.
KINDS = ("flows", "snapshot", "update")


def _test_modules() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def _modules() -> list[Path]:
    return sorted(p.relative_to(CONSTRUCTS) for p in CONSTRUCTS.rglob("*.py") if p.name != "__init__.py")


def _imported_by_a_test(module: Path) -> bool:
    dotted = "gpu_constructs." + ".".join(module.with_suffix("").parts)
    return any(dotted in t.read_text(encoding="utf-8") for t in _test_modules())


def test_every_construct_module_has_its_test_module() -> None:
    missing = []
    for module in _modules():
        expected = TESTS / "gpu_constructs" / module.parent / f"test_{module.name}"
        if expected.exists():
            continue
        if "render" in module.parts and _imported_by_a_test(module):
            continue
        missing.append(f"gpu_constructs/{module}: add {expected.relative_to(ROOT)}")
    assert not missing, "\n".join(missing)


def test_no_test_module_outlives_its_construct_module() -> None:
    orphans = [
        str(t.relative_to(ROOT))
        for t in (TESTS / "gpu_constructs").rglob("test_*.py")
        if not (CONSTRUCTS / t.parent.relative_to(TESTS / "gpu_constructs") / t.name.removeprefix("test_")).exists()
    ]
    assert not orphans, f"test modules of no construct module: {orphans}"


def test_every_test_folder_mirrors_a_source_folder_or_is_a_kind() -> None:
    strays = set()
    for test in _test_modules():
        folder = test.parent.relative_to(TESTS)
        if folder == Path("."):
            continue
        if folder.parts[0] in KINDS:
            continue
        if folder.parts[0] in SOURCES and (ROOT / folder).is_dir():
            continue
        strays.add(
            f"tests/{folder.as_posix()}: mirrors no source folder; move its tests to tests/<the folder of the module "
            f"they test>/, or to tests/flows/ if they follow a flow through many modules"
        )
    assert not strays, "\n".join(sorted(strays))


def _imported_test_modules(path: Path) -> set[str]:
    """The ``tests.<...>.test_*`` and ``tests.<...>.conftest`` modules that ``path`` imports (a conftest holds
    fixtures, which pytest hands out; what is imported belongs in a helper module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
            if node.module.split(".")[-1].startswith("test_") or node.module.endswith(".conftest"):
                found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if a.name.startswith("test_"))
        elif isinstance(node, ast.Import):
            found.update(
                a.name
                for a in node.names
                if a.name.startswith("tests.") and a.name.split(".")[-1].startswith(("test_", "conftest"))
            )
    return found


def test_no_test_module_imports_another() -> None:
    imports = {
        str(path.relative_to(ROOT)): sorted(imported)
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := _imported_test_modules(path))
    }
    assert not imports, (
        f"test modules imported by others (move what they share to a helper module, fixtures to a conftest.py): "
        f"{imports}"
    )
