"""Shared fixtures for the test suite."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The test models are tiny: one intra-op thread is fastest, and child processes inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Exported packages are built into the user's store (`package_store`): each test process has its own, so that
# the suite neither writes into the home folder nor finds a build of the user's there.
if "HF_GRAPHTF_CACHE" not in os.environ:
    os.environ["HF_GRAPHTF_CACHE"] = tempfile.mkdtemp(prefix="hf_graphtf-test-store-")
    atexit.register(shutil.rmtree, os.environ["HF_GRAPHTF_CACHE"], True)
os.environ.pop("HF_GRAPHTF_TRUST_EXPORTED", None)  # a user's trust must not carry into the tests

import torch  # noqa: E402
from model_matrix import FAMILIES, VOCAB  # noqa: E402

import hf_graphtf  # noqa: E402,F401  (registers the Auto classes)
from hf_graphtf.families import FAMILIES as MODEL_FAMILIES  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(params=sorted(FAMILIES))
def family(request) -> str:
    return request.param


@pytest.fixture(params=sorted(name for name, family in MODEL_FAMILIES.items() if family.supports_graph_attention))
def graph_family(request) -> str:
    """The families graph-group attention is defined for (post-LN)."""
    return request.param


def pytest_collection_modifyitems(config, items):
    """Leave out the (family, option set) cases a family does not define (graph-group attention on a
    pre-LN family, which its config refuses: tests/test_models.py checks the refusal itself)."""
    from hf_graphtf.self_check.matrix import OPTION_MATRIX, supports

    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        options = params.get("options")
        options = OPTION_MATRIX.get(options) if isinstance(options, str) else options
        family = params.get("family")
        if family in FAMILIES and isinstance(options, dict) and not supports(family, options):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="module")
def experiments():
    """The experiment tooling's modules (the package `recipes.experiments`), by module name."""
    import importlib

    names = ("archive", "rows", "grid", "speeds", "comparisons", "figures", "sections", "run_grid", "report")
    return {name: importlib.import_module(f"recipes.experiments.{name}") for name in names}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The toy es-en corpus (`recipe_fixtures.write_tiny_corpus`), written once per test module."""
    from recipe_fixtures import write_tiny_corpus

    return write_tiny_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module", params=sorted(MODEL_FAMILIES))
def stand_in(request, corpus, tmp_path_factory) -> tuple[str, Path]:
    """(family, folder): a locally saved vanilla checkpoint of each family, standing in for its Hub model
    (opus-mt, BART, NLLB-200) in the fine-tuning tests, once per test module."""
    from recipe_fixtures import write_opus_mt_stand_in

    family = request.param
    return family, write_opus_mt_stand_in(tmp_path_factory.mktemp(family) / "vanilla", corpus, family)


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A word-level fast tokenizer over the toy vocabulary (ids match `VOCAB`)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "</s>", "<unk>"] + [f"w{i}" for i in range(3, VOCAB)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


@pytest.fixture(scope="session")
def exported(tmp_path_factory, tiny_tokenizer, worker_id):
    """The one real AOTInductor build of the exported-model tests (`exported_build.build_exported`)."""
    from exported_build import build_exported

    return build_exported(tmp_path_factory, tiny_tokenizer, worker_id)


def pytest_terminal_summary(terminalreporter):
    """A count of the fault battery's cases, and one visible line when the Bible data tests were
    skipped for want of the SWORD packages."""
    reports = [
        report
        for outcome in ("passed", "failed", "error")
        for report in terminalreporter.stats.get(outcome, [])
        if getattr(report, "when", "call") == "call" and "faults" in getattr(report, "keywords", {})
    ]
    if reports:
        handled = sum(report.passed for report in reports)
        terminalreporter.write_line(f"fault battery: {len(reports)} faults tried, {handled} handled")
    from hf_graphtf.data.bible import APT_COMMAND, SwordModulesMissing, ensure_sword_modules

    try:
        ensure_sword_modules()
    except SwordModulesMissing:
        terminalreporter.write_line(
            f"SWORD Bible modules not installed: the Bible corpus tests were skipped (install: {APT_COMMAND})",
            yellow=True,
        )
