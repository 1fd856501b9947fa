"""The translation wing is one sub-package, `hf_graphtf.translation`: its imports run one way, and the old flat
paths keep working for one release, with a warning naming the new one."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

from hf_graphtf import _moved

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_graphtf"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at module level or inside functions alike: a circle through
    a function-level import is still a circle a reader has to untangle."""
    modules = _module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
                targets = submodules or [base]  # `from . import x` imports the module x, not the package
            else:
                continue
            graph[name].update(target for target in targets if target in modules and target != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_import_graph_has_no_circle():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_wing_lives_in_the_translation_package():
    """What loads, batches, exports and decodes lives under hf_graphtf/translation/; what stays flat is the
    model wing (it travels with checkpoints) and the old paths, which only forward."""
    for old in _moved.MOVED_MODULES:
        text = (PACKAGE / f"{old}.py").read_text(encoding="utf-8")
        assert "forward(__name__)" in text and len(text.splitlines()) <= 6, old
    wing = {name.rsplit(".", 1)[1] for name in _module_names() if name.startswith("hf_graphtf.translation.")}
    assert {"dtypes", "dtype_choice", "engines", "inference", "loading", "aoti", "runtimes", "packages"} <= wing


@pytest.mark.parametrize("old", sorted(_moved.MOVED_MODULES))
def test_an_old_path_warns_and_reads_the_new_home(old, monkeypatch):
    new_home = importlib.import_module(_moved.MOVED_MODULES[old][0])
    monkeypatch.delitem(sys.modules, f"hf_graphtf.{old}", raising=False)
    with pytest.warns(DeprecationWarning, match=rf"hf_graphtf\.{old} moved to {re.escape(new_home.__name__)}"):
        module = importlib.import_module(f"hf_graphtf.{old}")
    public = [name for name in vars(new_home) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(new_home, name) for name in public)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_the_renamed_names_answer_under_their_old_names(monkeypatch):
    from hf_graphtf.translation import dtype_choice, dtypes, inference, loading, packages

    old = {}
    for name in ("translation_formats", "translation_modes", "inference", "exported_models"):
        monkeypatch.delitem(sys.modules, f"hf_graphtf.{name}", raising=False)
        with pytest.warns(DeprecationWarning):
            old[name] = importlib.import_module(f"hf_graphtf.{name}")
    translation_formats, translation_modes = old["translation_formats"], old["translation_modes"]
    exported_models, old_inference = old["exported_models"], old["inference"]
    assert translation_formats.TranslationFormat is dtypes.TranslationDtype
    assert translation_formats.TRANSLATION_FORMATS is dtypes.DTYPE_RECORDS
    assert translation_formats.translation_format is dtypes.dtype_record
    assert translation_modes.TranslationMode is dtype_choice.DecodingSetup
    assert exported_models.exportable_formats is packages.exportable_dtypes
    assert old_inference.load_model is inference.load_model and old_inference.default_device is loading.default_device
    assert set(_moved.RENAMED.values()) <= {name for home in (dtypes, dtype_choice, packages) for name in vars(home)}


def test_nothing_in_the_repository_imports_an_old_path():
    """Only users' code should meet the warning: the package, its tests and recipes use the new paths."""
    old_paths = {f"hf_graphtf.{old}" for old in _moved.MOVED_MODULES}
    offenders = [
        f"{name} imports {target}"
        for name, targets in import_graph().items()
        if name not in old_paths
        for target in targets & old_paths
    ]
    old = "|".join(_moved.MOVED_MODULES)
    pattern = re.compile(rf"hf_graphtf\.({old})\b|from hf_graphtf import [^\n]*\b({old})\b")
    for folder in ("tests", "recipes"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
