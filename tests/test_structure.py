"""One place per concept: every option defined once and read everywhere, and library code apart from the CLI."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from hf_graphtf.configuration import GRAPH_OPTION_DEFAULTS, GRAPH_OPTIONS, GraphBartConfig, GraphMarianConfig
from hf_graphtf.training.arguments import ModelArguments

PACKAGE = Path(__file__).resolve().parents[1] / "hf_graphtf"


@pytest.mark.parametrize("config_class", [GraphMarianConfig, GraphBartConfig])
def test_each_config_class_declares_exactly_the_options_with_their_defaults(config_class):
    declared = {name: getattr(config_class, name) for name in GRAPH_OPTION_DEFAULTS}
    assert declared == GRAPH_OPTION_DEFAULTS
    own = {name for name in vars(config_class) if name.startswith(("attention_link", "graph_"))}
    assert own == set(GRAPH_OPTION_DEFAULTS), "an option declared here is missing from GRAPH_OPTIONS"
    config = config_class()
    for option in GRAPH_OPTIONS:
        assert getattr(config, option.name) == option.default
        with pytest.raises(ValueError, match=option.name):
            option.check(config_class.__name__, "not-a-value" if option.choices is None else True)


def test_the_training_arguments_take_every_option_with_its_default_and_help():
    arguments = {field.name: field for field in fields(ModelArguments)}
    for option in GRAPH_OPTIONS:
        assert arguments[option.name].default == option.default
        assert option.help in arguments[option.name].metadata["help"]
    assert set(ModelArguments(model_family="marian").graph_options()) == set(GRAPH_OPTION_DEFAULTS)


def _imports(path: Path) -> set[str]:
    """Modules a file imports, as absolute names within the package (``hf_graphtf.cli``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(("hf_graphtf", *path.relative_to(PACKAGE).parent.parts))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_library_code_imports_neither_the_cli_nor_the_training_script():
    """The CLI and the training recipe sit on top; the models, data, inference and analysis below them."""
    for path in PACKAGE.rglob("*.py"):
        if path.name == "cli.py":
            continue
        imported = _imports(path)
        assert "hf_graphtf.cli" not in imported, f"{path.name} imports the CLI"
        if "training" not in path.parts:
            assert not any(name.startswith("hf_graphtf.training.trainer") for name in imported), path.name
