"""One place per concept: every option defined once and read everywhere, and library code apart from the CLI."""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import fields
from pathlib import Path

import pytest

from hf_graphtf.configuration import GRAPH_OPTION_DEFAULTS, GRAPH_OPTIONS
from hf_graphtf.families import FAMILIES, FAMILY_OF_MODEL_TYPE
from hf_graphtf.training.arguments import ModelArguments

PACKAGE = Path(__file__).resolve().parents[1] / "hf_graphtf"


@pytest.mark.parametrize("config_class", [family.config_class for family in FAMILIES.values()])
def test_each_config_class_declares_exactly_the_options_with_their_defaults(config_class):
    declared = {name: getattr(config_class, name) for name in GRAPH_OPTION_DEFAULTS}
    assert declared == GRAPH_OPTION_DEFAULTS
    own = {name for name in vars(config_class) if name.startswith(("attention_link", "graph_"))}
    assert own == set(GRAPH_OPTION_DEFAULTS), "an option declared here is missing from GRAPH_OPTIONS"
    # written in the class, as a PretrainedConfig declares its fields (not added to it by code)
    body = ast.parse(inspect.getsource(config_class)).body[0].body
    written = {node.target.id: ast.literal_eval(node.value) for node in body if isinstance(node, ast.AnnAssign)}
    assert written == GRAPH_OPTION_DEFAULTS
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


def test_prediction_stands_apart_from_training():
    """Translation with a saved model (`inference`) needs nothing of the training stack; training's test
    evaluation decodes with inference's functions, so a sentence is decoded one way everywhere."""
    imported = _imports(PACKAGE / "inference.py")
    assert not any(name.startswith("hf_graphtf.training") for name in imported), sorted(imported)
    assert "hf_graphtf.translation.inference.decode_token_ids" in _imports(PACKAGE / "training" / "evaluation.py")


def test_library_code_imports_neither_the_cli_nor_the_training_script():
    """The CLI and the training recipe sit on top; the models, data, inference and analysis below them."""
    for path in PACKAGE.rglob("*.py"):
        if path.name == "cli.py":
            continue
        imported = _imports(path)
        assert "hf_graphtf.cli" not in imported, f"{path.name} imports the CLI"
        if "training" not in path.parts:
            entry_points = ("hf_graphtf.training.recipe", "hf_graphtf.training.trainer")
            assert not any(name.startswith(entry_points) for name in imported), path.name


COPIED_FROM = re.compile(r"^# Copied from hf_graphtf\.(\w+)\.(\w+)(?: with (\w+)->(\w+))?$")


def _classes(path: Path) -> dict[str, str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    return {
        node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef)
    }


def copied_from_mismatches(path: Path, package: Path = PACKAGE) -> list[str]:
    """Classes under a ``# Copied from hf_graphtf.<module>.<Class> with A->B`` line that are no longer the
    named class with A replaced by B (Transformers' convention for twin code in flat model files)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    here = _classes(path)
    problems = []
    for number, line in enumerate(lines):
        match = COPIED_FROM.match(line)
        if not match:
            continue
        module, name, old, new = match.groups()
        twin = _classes(package / f"{module}.py").get(name)
        declared = re.match(r"class (\w+)", lines[number + 1])
        if twin is None or declared is None:
            problems.append(f"{path.name}:{number + 1}: {line} names nothing")
            continue
        expected = twin.replace(old, new) if old else twin
        if here.get(declared.group(1)) != expected:
            problems.append(f"{path.name}: {declared.group(1)} differs from {module}.{name}")
    return problems


@pytest.mark.parametrize(("module", "copies"), [("modeling_bart", 5), ("modeling_m2m_100", 4)])
def test_the_twin_modeling_files_stay_in_step(module, copies):
    text = (PACKAGE / f"{module}.py").read_text(encoding="utf-8")
    assert text.count("# Copied from hf_graphtf.modeling_marian.") >= copies
    assert copied_from_mismatches(PACKAGE / f"{module}.py") == []


def test_the_twin_check_catches_a_change_in_one_twin(tmp_path):
    for name in ("modeling_marian.py", "modeling_bart.py"):
        (tmp_path / name).write_text((PACKAGE / name).read_text(encoding="utf-8"), encoding="utf-8")
    marian = tmp_path / "modeling_marian.py"
    marian.write_text(
        marian.read_text(encoding="utf-8").replace("config_class = GraphMarianConfig", "pass", 1),
        encoding="utf-8",
    )
    assert copied_from_mismatches(tmp_path / "modeling_bart.py", package=tmp_path) == [
        "modeling_bart.py: GraphBartPreTrainedModel differs from modeling_marian.GraphMarianPreTrainedModel"
    ]


def test_every_family_is_registered_once_and_read_everywhere():
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    import hf_graphtf  # noqa: F401  (registers the Auto classes from FAMILIES)
    from hf_graphtf.training.arguments import MODEL_FAMILIES

    assert MODEL_FAMILIES == tuple(FAMILIES) == ("marian", "bart", "m2m_100")
    for family in FAMILIES.values():
        assert FAMILY_OF_MODEL_TYPE[family.model_type] is FAMILY_OF_MODEL_TYPE[family.vanilla_model_type] is family
        config = AutoConfig.for_model(family.model_type)
        assert type(config) is family.config_class
        assert AutoModelForSeq2SeqLM._model_mapping[family.config_class] is family.seq2seq_class


def test_a_new_fusion_is_one_registration(monkeypatch):
    """A fourth fusion is one `register_fusion` call: the config accepts it, the graph layer builds its
    modules (under their names) and runs it on the per-module and the fused path, its gate comes out of
    ``output_graph_gates``, and the benchmarks' FLOP count adds its cost."""
    import sys

    import torch
    from model_matrix import source_batch, target_batch, tiny_model

    from hf_graphtf.graph_fusions import FUSIONS, GROUPS, Fusion

    def fuse(layer, high, middle_inc, middle_prev, low):
        groups = torch.stack([high, middle_inc, middle_prev, low], dim=-2)
        weights = torch.softmax(layer.group_scores(groups).squeeze(-1), dim=-1)  # (..., 4)
        return (weights.unsqueeze(-1) * groups).sum(-2), weights

    def modules(d_model):
        return {"group_scores": torch.nn.Linear(d_model, 1)}

    def flops(positions, d_model):
        return 2 * 4 * positions * d_model

    monkeypatch.setitem(
        FUSIONS, "softmax", Fusion("softmax", "softmax over the groups", fuse, None, modules, GROUPS, False, flops)
    )
    for shared in (False, True):  # the per-module path, and the fused shared-qkv path
        model = tiny_model("marian", {"graph_attention": True, "graph_fusion": "softmax", "graph_shared_qkv": shared})
        assert isinstance(model.model.encoder.layers[1].group_scores, torch.nn.Linear)
        input_ids, attention_mask = source_batch()
        out = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch(),
                    output_graph_gates=True)  # fmt: skip
        assert len(out.encoder_graph_gates) == 2 and out.encoder_graph_gates[0].shape[-1] == len(GROUPS)
    with pytest.raises(ValueError, match="graph_fusion must be one of"):
        tiny_model("marian", {"graph_attention": True, "graph_fusion": "nope"})
    sys.path.insert(0, str(PACKAGE.parent / "recipes" / "benchmarks"))
    try:
        from flops import forward_flops
    finally:
        sys.path.pop(0)
    config = type(model.config)(**{**model.config.to_dict(), "graph_shared_qkv": False})
    base = forward_flops(type(config)(**{**config.to_dict(), "graph_fusion": "sum"}), 2, 7, 5)
    assert forward_flops(config, 2, 7, 5) - base == 2 * flops(2 * 7, config.d_model)


def test_family_names_appear_only_in_the_family_table_and_as_defaults():
    """A family is named in `families.py` (and its config's model types); elsewhere only as a default value
    or a per-family tiny-shape fact of the test matrix. A new table keyed by family names fails this test:
    it belongs in `ModelFamily`."""
    import ast
    from collections import Counter

    root = PACKAGE.parent
    allowed = Counter(
        {
            "hf_graphtf/families.py": len(FAMILIES),
            "hf_graphtf/configuration.py": len(FAMILIES),  # each config's vanilla_model_type
            "hf_graphtf/training/arguments.py": 1,  # model_family's default
            "hf_graphtf/self_check/matrix.py": 1,  # TINY_OVERRIDES
            "recipes/make_configs.py": 2,  # the NLLB setting's family, and the default
            "recipes/benchmarks/common.py": 1,  # the scripts' default family
            "recipes/benchmarks/translation_speed.py": 1,  # opus-mt's family: CTranslate2 converts it as Marian
        }
    )
    found: Counter = Counter()
    for path in [*PACKAGE.rglob("*.py"), *(root / "recipes").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in FAMILIES:
                found[str(path.relative_to(root))] += 1
    assert found == allowed


def test_recipes_use_only_what_training_exports():
    """`recipes/` (the training script, benchmarks, experiments) reaches training through
    `hf_graphtf.training`'s public names and the tooling module's (`hf_graphtf.training.tooling`) only: its
    other submodules can change without breaking a script."""
    import ast

    import hf_graphtf.training
    import hf_graphtf.training.tooling

    exported = {
        "hf_graphtf.training": set(hf_graphtf.training.__all__),
        "hf_graphtf.training.tooling": set(hf_graphtf.training.tooling.__all__),
    }
    problems = []
    for path in sorted((PACKAGE.parent / "recipes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module in exported:
                problems += [
                    f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if a.name not in exported[module]
                ]
            elif (module or "").startswith("hf_graphtf.training."):
                problems.append(f"{path.name}:{node.lineno} imports {node.module}")
            elif isinstance(node, ast.Import):
                problems += [
                    f"{path.name}:{node.lineno} imports {a.name}"
                    for a in node.names
                    if a.name.startswith("hf_graphtf.training.")
                ]
    assert problems == []


def test_scoring_stands_apart_from_training():
    """Scoring text (`hf_graphtf.scoring`) needs nothing of training: analysis and the CLI use it alone."""
    import ast

    tree = ast.parse((PACKAGE / "scoring.py").read_text(encoding="utf-8"))
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any("training" in (module or "") for module in modules)
    for module in ("analysis.py", "cli.py"):
        text = (PACKAGE / module).read_text(encoding="utf-8")
        assert "training.metrics" not in text, module


#: files that quote what a run printed or wrote then: they stay as they were
_QUOTED = ("recipes/gpu/results/", "recipes/experiments/archive/", "model_cards/quickstart/")
_MD_PATH = re.compile(r"(?<![\w/.])((?:\.\./)*(?:[\w.-]+/)+[\w.-]+\.md)\b")


def test_no_file_names_a_document_the_repository_lacks():
    """Every path to a Markdown document named in the code, docs and recipes exists (from the repository
    root or from the naming file's folder), and the method is read from docs/method.md, not an outside spec."""
    import subprocess

    root = PACKAGE.parent
    tracked = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True)
    missing = []
    for name in tracked.stdout.split():
        if name.startswith(_QUOTED) or not name.endswith((".py", ".md", ".yaml", ".sh", ".toml", "run")):
            continue
        path = root / name
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "SPEC.md" in text and name != "tests/test_structure.py":
            missing.append(f"{name}: SPEC.md (the method is docs/method.md)")
        for target in set(_MD_PATH.findall(text)):
            if target.startswith("/") or "<" in target:
                continue
            if not any((base / target).exists() for base in (root, path.parent, PACKAGE)):  # package data
                missing.append(f"{name}: {target}")
    assert not missing, missing


#: the modules that name option bundles: each reads them from the registry (`hf_graphtf.variants`)
_VARIANT_TABLES = (
    "recipes/make_configs.py",
    "recipes/benchmarks",
    "recipes/gpu",
    "recipes/experiments",
    "hf_graphtf/self_check",
    "hf_graphtf/cli.py",
)
_OPTION_KEYS = {"attention_link", "attention_link_mode", "attention_link_gate", "graph_attention", "graph_fusion"}


def test_option_bundles_are_spelled_only_in_the_variant_registry():
    """No table outside `hf_graphtf.variants` spells an option bundle as a dict literal: a name means one
    set of options everywhere. (An option set from a flag's value, as `speed_flags.py --attention-link`,
    is not a bundle.)"""
    root = PACKAGE.parent
    spelled = []
    for entry in _VARIANT_TABLES:
        paths = [root / entry] if entry.endswith(".py") else sorted((root / entry).rglob("*.py"))
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Dict):
                    keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
                    constant = all(isinstance(value, ast.Constant) for value in node.values)
                    if keys & _OPTION_KEYS and keys <= set(GRAPH_OPTION_DEFAULTS) and constant:
                        spelled.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not spelled, f"option bundles spelled outside hf_graphtf/variants.py: {spelled}"


def test_every_grid_variant_is_the_registry_variant_of_its_name():
    """A grid's variant (its recipe's options with the grid's overrides) is the registered variant of that
    name, so that a row named al_both means the registry's al_both."""
    import yaml

    from hf_graphtf.variants import normalized, variant

    root = PACKAGE.parent
    for grid_path in sorted((root / "recipes" / "experiments").glob("grid_*.yaml")):
        grid = yaml.safe_load(grid_path.read_text(encoding="utf-8"))
        for name, spec in grid["variants"].items():
            recipe = yaml.safe_load((root / spec["recipe"]).read_text(encoding="utf-8"))
            options = {key: recipe[key] for key in GRAPH_OPTION_DEFAULTS if key in recipe}
            options.update(spec.get("options") or {})
            options.pop("attention_link_kernel", None)  # how the link runs, not which variant it is
            assert normalized(options) == dict(variant(name).options), f"{grid_path.name}: {name}"


def test_the_registry_takes_every_spelling_already_committed():
    from hf_graphtf.variants import variant, variant_named

    assert variant("al-prev-both") is variant("al-both") is variant("paper-link") is variant("al_both")
    assert variant("graph-half+gate").name == "graph_half_gate" == variant("graph-half-gate").name
    assert variant_named({"attention_link": "both", "attention_link_mode": "previous"}).name == "al_both"
    assert variant_named({"graph_attention": True, "graph_fusion": "sum", "graph_half_dim": True}) is None
    with pytest.raises(ValueError, match="unknown variant 'al_all'; the variants are vanilla, al_encoder"):
        variant("al_all")


def test_no_test_file_grows_past_700_lines():
    """Tests live beside the module they test; a file past 700 lines mixes concerns and wants splitting."""
    long = {
        path.name: count
        for path in sorted(Path(__file__).parent.glob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 700
    }
    assert not long, long


def test_the_training_api_is_the_training_api():
    """`hf_graphtf.training.__all__` holds what a user trains with; the tooling's internals live apart."""
    import hf_graphtf.training
    import hf_graphtf.training.tooling

    assert {"main", "run_translation", "parse_recipe_args", "ModelArguments"} <= set(hf_graphtf.training.__all__)
    assert not set(hf_graphtf.training.__all__) & set(hf_graphtf.training.tooling.__all__)


def test_every_family_declares_its_layer_classes_in_its_own_file():
    """Each family module declares the layer classes the package adds (so ``grep "class LinkedMarianAttention"``
    finds them, and a traceback names a class a file holds), each a short subclass of one mixin and the
    family's own Transformers class, the same set in every family (no graph layer where the family does not
    define graph attention). Nothing builds them with ``type()``."""
    import inspect

    from hf_graphtf.attention_link import LinkedAttentionMixin, LinkedDecoderLayerMixin, LinkedEncoderLayerMixin
    from hf_graphtf.families import FAMILIES
    from hf_graphtf.graph_attention import GraphEncoderLayerMixin

    pattern = {  # the package's class -> (its mixin, the family's Transformers class it extends)
        "Linked{}Attention": (LinkedAttentionMixin, "{}Attention"),
        "Linked{}EncoderLayer": (LinkedEncoderLayerMixin, "{}EncoderLayer"),
        "Linked{}DecoderLayer": (LinkedDecoderLayerMixin, "{}DecoderLayer"),
        "Graph{}EncoderLayer": (GraphEncoderLayerMixin, "{}EncoderLayer"),
    }
    for family in FAMILIES.values():
        module = inspect.getmodule(family.seq2seq_class)
        vanilla = inspect.getmodule(family.vanilla_seq2seq_class)
        source = inspect.getsource(module)
        prefix = family.vanilla_seq2seq_class.__name__.removesuffix("ForConditionalGeneration").removesuffix("MTModel")
        declared = {name.format(prefix) for name in pattern if f"\nclass {name.format(prefix)}(" in source}
        expected = {name.format(prefix) for name in pattern if family.supports_graph_attention or "Graph" not in name}
        assert declared == expected, module.__name__
        for name, (mixin, vanilla_name) in pattern.items():
            if name.format(prefix) not in expected:
                continue
            cls = getattr(module, name.format(prefix))
            assert cls.__module__ == module.__name__ and cls.__qualname__ == name.format(prefix)
            assert cls.__bases__ == (mixin, getattr(vanilla, vanilla_name.format(prefix))) and cls.__doc__
        layers = next(value for key, value in vars(module).items() if key.endswith("_LAYERS"))
        assert layers.linked_decoder_layer.linked_attention_class is layers.linked_attention
        assert "type(" not in source


def test_library_code_holds_no_measured_figure():
    """Speed ratios and BLEU costs are measured by scripts in recipes/ and live on the results pages: the code and
    its ``--help`` point there, so a new measurement changes a page, never the library."""
    import re

    figure = re.compile(r"\b\d+\.\d+x\b|[+-]\d+\.\d+ BLEU|\b\d+(\.\d+)?% (faster|slower)")
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if figure.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("carries, like", [("own", "previous"), ("linked", "cumulative")])
def test_a_new_link_mode_is_one_registration(monkeypatch, carries, like):
    """A third mode is one `LinkMode` in `LINK_MODES`: the config accepts it, and both kernels, the cache of
    joined cross-attention keys and the saving of joins read it, so a mode that carries as an existing one
    computes what that one does, training and decoding with the cache alike."""
    import torch
    from model_matrix import source_batch, target_batch, tiny_model

    from hf_graphtf.link_modes import LINK_MODES, LinkMode, get_link_mode

    monkeypatch.setitem(LINK_MODES, "third", LinkMode("third", carries, "'third': a test's mode."))
    input_ids, attention_mask = source_batch()
    for kernel, implementation in (("scores", "eager"), ("concat", "sdpa")):
        outputs = {}
        for mode in ("third", like):
            options = {"attention_link": "both", "attention_link_mode": mode, "attention_link_kernel": kernel}
            model = tiny_model("marian", options, attn_implementation=implementation)
            logits = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch()).logits
            generated = model.generate(
                input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=5, num_beams=2
            )
            outputs[mode] = (logits, generated)
        torch.testing.assert_close(outputs["third"][0], outputs[like][0], rtol=0, atol=0)
        assert torch.equal(outputs["third"][1], outputs[like][1])
    with pytest.raises(ValueError, match="attention_link_mode must be one of"):
        tiny_model("marian", {"attention_link": "both", "attention_link_mode": "fourth"})
    with pytest.raises(ValueError, match="'previous', 'cumulative', 'third'"):
        get_link_mode("fourth")
