"""Every import goes down the layers of docs/architecture.md, never up or sideways.

The layers, bottom to top, and what each may import besides itself:

    foundation  harness (the package's __init__), harness.core         nothing of the project
    models      harness.models (sources, runners, tokenizer, judge)    foundation
    tasks       tasks                                                   foundation, models
    training    training                                                foundation, models, tasks
    pipeline    harness.pipeline, harness.imports                       foundation, models, tasks
    reports     leaderboards, harness.diagnose                          foundation, tasks, training
    app         harness.cli, harness.__main__, harness.commands,
                harness.demo                                            every layer

The graph is the one tests/test_import_graph.py builds (every import statement, deferred or not).
Reports read stored results through the foundation's schemas, never through the pipeline that wrote
them, so a leaderboard can be rebuilt by a checkout that cannot evaluate.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_import_graph import import_graph

# (layer, module prefixes), bottom to top. A module belongs to the layer of its longest prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("harness", "harness.core")),
    ("models", ("harness.models",)),
    ("tasks", ("tasks",)),
    ("training", ("training",)),
    ("pipeline", ("harness.pipeline", "harness.imports")),
    ("reports", ("leaderboards", "harness.diagnose")),
    (
        "app",
        (
            "harness.cli",
            "harness.__main__",
            "harness.commands",
            "harness.demo",
        ),
    ),
]
NAMES = [name for name, _ in LAYERS]
ALLOWED: dict[str, set[str]] = {
    "foundation": set(),
    "models": {"foundation"},
    "tasks": {"foundation", "models"},
    "training": {"foundation", "models", "tasks"},
    "pipeline": {"foundation", "models", "tasks"},
    "reports": {"foundation", "tasks", "training"},
    "app": set(NAMES[:-1]),
}


def layer_of(module: str) -> str | None:
    """The layer of ``module``: the one with the longest prefix that is the module or a package above it."""
    best: tuple[int, str] | None = None
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            exact_only = prefix == "harness"  # the top package's __init__ only, not everything under it
            matches = module == prefix or (not exact_only and module.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), name)
    return None if best is None else best[1]


def violations(graph: dict[str, set[str]], allowed: dict[str, set[str]] = ALLOWED) -> list[str]:
    """Each import that leaves its layer for one the rules do not allow, as 'a (layer) -> b (layer)'."""
    found = []
    for module, targets in sorted(graph.items()):
        source = layer_of(module)
        for target in sorted(targets):
            dest = layer_of(target)
            if source is None or dest is None or dest == source:
                continue
            if dest not in allowed[source]:
                found.append(f"{module} ({source}) -> {target} ({dest})")
    return found


def test_every_product_module_has_a_layer() -> None:
    unplaced = sorted(m for m in import_graph() if layer_of(m) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS and docs/architecture.md): {unplaced}"


def test_imports_only_go_down() -> None:
    found = violations(import_graph())
    assert not found, "imports that go up or sideways:\n" + "\n".join(found)


def test_each_layer_is_downward_only() -> None:
    """Every allowed layer is below the layer itself: the rules can never admit a circle."""
    for name, allowed in ALLOWED.items():
        assert all(NAMES.index(lower) < NAMES.index(name) for lower in allowed), name


# One module per layer, for planting an upward import into a copy of the tree.
PLANT_FROM = {
    "foundation": "harness/core/errors.py",
    "models": "harness/models/checkpoints.py",
    "tasks": "tasks/base.py",
    "training": "training/modes.py",
    "pipeline": "harness/pipeline/table.py",
    "reports": "leaderboards/labels.py",
}
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("layer", list(PLANT_FROM))
def test_a_planted_upward_import_is_caught(tmp_path: Path, layer: str) -> None:
    """For each layer, an import of the layer just above it (and of the CLI) is reported."""
    above = NAMES[NAMES.index(layer) + 1]
    targets = {
        "harness/cli.py": "harness.cli",
        "harness/pipeline/store.py": "harness.pipeline.store",
        "harness/models/sources/base.py": "harness.models.sources.base",
        "tasks/registry.py": "tasks.registry",
        "training/loop.py": "training.loop",
        "leaderboards/build.py": "leaderboards.build",
    }
    by_layer = {layer_of(m): (path, m) for path, m in targets.items()}
    for package in ("harness", "tasks", "training", "leaderboards"):
        for path in (ROOT / package).rglob("*.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    planted = tmp_path / PLANT_FROM[layer]
    assert layer_of(".".join(Path(PLANT_FROM[layer]).with_suffix("").parts)) == layer
    upward = [by_layer[above][1], "harness.cli"]
    if above == "reports":  # the pipeline's layer above is reports; also try a sideways one
        upward.append("leaderboards.build")
    planted.write_text(
        planted.read_text(encoding="utf-8")
        + "".join(f"\ndef _planted_{i}():\n    import {m}\n" for i, m in enumerate(upward)),
        encoding="utf-8",
    )
    found = violations(import_graph(tmp_path))
    for module in upward:
        assert any(line.endswith(f"-> {module} ({layer_of(module)})") for line in found), (module, found)
    # The same tree without the plant is clean, so the finding is the plant's.
    planted.write_text((ROOT / PLANT_FROM[layer]).read_text(encoding="utf-8"), encoding="utf-8")
    assert violations(import_graph(tmp_path)) == []


def test_removing_a_rule_admits_what_it_forbade() -> None:
    """The rules are not vacuous: widening any layer's allowed set to every layer lets some
    planted-style import through that the real rule refuses (checked on a synthetic graph)."""
    for name in NAMES[:-1]:
        above = NAMES[NAMES.index(name) + 1]
        src = next(p for p in LAYERS if p[0] == name)[1][-1] + ".x"
        dst = next(p for p in LAYERS if p[0] == above)[1][-1] + ".y"
        graph = {src: {dst}, dst: set()}
        assert violations(graph), name
        widened = {**ALLOWED, name: set(NAMES)}
        assert not violations(graph, widened), name
