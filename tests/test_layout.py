"""The layout rule: every module of ``gpu_constructs/`` has its test module in one hop.

``gpu_constructs/<package>/<module>.py`` is tested in ``tests/gpu_constructs/<package>/test_<module>.py``. A
pure renderer (``<package>/render/<module>.py``) is tested in ``tests/gpu_constructs/<package>/render/test_<module>.py``
or, where a test elsewhere already covers it, by a test module that imports it.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRUCTS = ROOT / "gpu_constructs"
TESTS = ROOT / "tests"


def _modules() -> list[Path]:
    return sorted(p.relative_to(CONSTRUCTS) for p in CONSTRUCTS.rglob("*.py") if p.name != "__init__.py")


def _imported_by_a_test(module: Path) -> bool:
    dotted = "gpu_constructs." + ".".join(module.with_suffix("").parts)
    return any(dotted in t.read_text(encoding="utf-8") for t in TESTS.rglob("test_*.py"))


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
