"""The fault battery: bad input and interrupted work, each answered by a clear early error or a recovery.

Run it alone with ``python -m pytest -m faults`` (``-m "faults or slow"`` adds the slow ones: real
``kill -9`` during checkpoint writes). The summary line counts the faults tried and handled. Every
case asserts what a user sees: an error naming the field, file, line or byte offset, raised before
any corpus is read or tokenizer trained, or a run that recovers without help.
"""

from __future__ import annotations

import codecs
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from recipe_fixtures import (
    TRAIN_SCRIPT,
    run_python,
    subprocess_env,
    tiny_model_config,
    tiny_recipe,
    write_recipe,
    write_tiny_corpus,
)
from safetensors.torch import load_file

from hf_graphtf import GraphMarianConfig
from hf_graphtf.cli import main as cli_main
from hf_graphtf.data import load_parallel_corpus
from hf_graphtf.data.corpora import CorpusError
from hf_graphtf.model_files import ModelFolderError, check_model_source
from hf_graphtf.training import run_translation
from hf_graphtf.training.arguments import parse_recipe_args
from hf_graphtf.training.checkpoints import STAGING_DIR, newest_complete_checkpoint

pytestmark = pytest.mark.faults

LATIN1_SENTENCE = "La niña comió piña.\n".encode("latin-1")


# --------------------------------------------------------------------------- recipes: refused when read


def _parse(tmp_path: Path, **overrides):
    """Parse a tiny recipe whose corpus does not exist: an error about the corpus would mean the
    check came too late (after data work began)."""
    recipe = tiny_recipe(tmp_path / "no-corpus-here", tmp_path / "out", **overrides)
    return parse_recipe_args([str(write_recipe(tmp_path / "recipe.yaml", recipe))])


BAD_VALUES = [
    ({"encoder_layers": -1}, "encoder_layers"),
    ({"decoder_layers": 0}, "decoder_layers"),
    ({"encoder_attention_heads": 0}, "encoder_attention_heads"),
    ({"d_model": -32}, "d_model"),
    ({"encoder_ffn_dim": 0}, "encoder_ffn_dim"),
    ({"decoder_ffn_dim": -5}, "decoder_ffn_dim"),
    ({"d_model": 30, "encoder_attention_heads": 4}, "divisible by encoder_attention_heads"),
    ({"dropout": 2.0}, "dropout"),
    ({"dropout": -0.1}, "dropout"),
    ({"attention_dropout": 1.0}, "attention_dropout"),
    ({"max_position_embeddings": 16, "max_source_length": 32}, "max_position_embeddings"),
    ({"max_position_embeddings": 32, "generation_max_length": 40}, "generation_max_length"),
    ({"max_source_length": 0}, "max_source_length"),
    ({"max_target_length": -1}, "max_target_length"),
    ({"vocab_size": 0}, "vocab_size"),
    ({"max_train_samples": 0}, "max_train_samples"),
    ({"learning_rate": 0}, "learning_rate"),
    ({"label_smoothing_factor": 1.0}, "label_smoothing_factor"),
    ({"max_tokens_per_batch": 0}, "max_tokens_per_batch"),
    ({"max_train_minutes": 0}, "max_train_minutes"),
    ({"test_num_beams": 0}, "test_num_beams"),
    ({"attention_link": "enc"}, "attention_link"),
    ({"graph_fusion": "max"}, "graph_fusion"),
    ({"model_family": "t5"}, "model_family"),
]


@pytest.mark.parametrize("overrides, field", BAD_VALUES, ids=[str(case[0]) for case in BAD_VALUES])
def test_bad_sizes_and_rates_are_refused_when_the_recipe_is_read(tmp_path, overrides, field):
    with pytest.raises(ValueError, match=field):
        _parse(tmp_path, **overrides)


def test_a_duplicate_recipe_key_is_refused_with_both_lines(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("d_model: 32\ncorpus: x\ndropout: 0.1\nd_model: 64\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 4: 'd_model' is given twice \(first on line 1\)"):
        parse_recipe_args([str(recipe)])


@pytest.mark.parametrize("name", ["recipe.json", "recipe.txt"])
def test_a_recipe_that_is_not_yaml_is_refused_by_its_type(tmp_path, name):
    path = tmp_path / name
    path.write_text('{"d_model": 32}', encoding="utf-8")
    with pytest.raises(ValueError, match="a recipe is a YAML file"):
        parse_recipe_args([str(path)])


def test_a_missing_recipe_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such recipe file"):
        parse_recipe_args([str(tmp_path / "missing.yaml")])


def test_invalid_yaml_and_latin1_recipes_are_named(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("d_model: [32\n", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.yaml: not valid YAML"):
        parse_recipe_args([str(broken)])
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"corpus_name: " + "Biblia en español".encode("latin-1") + b"\n")
    with pytest.raises(ValueError, match="latin.yaml: not UTF-8"):
        parse_recipe_args([str(latin)])


def test_a_recipe_with_a_bom_reads_normally(tmp_path):
    recipe = tiny_recipe(tmp_path / "corpus", tmp_path / "out")
    path = write_recipe(tmp_path / "recipe.yaml", recipe)
    path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    model_args, _, _ = parse_recipe_args([str(path)])
    assert model_args.model_family == "marian"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"encoder_layers": -1}, "encoder_layers"),
        ({"decoder_attention_heads": 0}, "decoder_attention_heads"),
        ({"d_model": 30, "encoder_attention_heads": 4}, "divisible"),
        ({"dropout": 2.0}, "dropout"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"max_position_embeddings": -1}, "max_position_embeddings"),
    ],
)
def test_bad_sizes_are_refused_by_the_config_itself(kwargs, field):
    with pytest.raises(ValueError, match=field):
        GraphMarianConfig(**kwargs)


# --------------------------------------------------------------------------- corpus files


def _write(path: Path, text: str, bom: bool = False) -> Path:
    path.write_bytes((codecs.BOM_UTF8 if bom else b"") + text.encode("utf-8"))
    return path


def test_a_bom_is_dropped_from_a_text_pair_file(tmp_path):
    _write(tmp_path / "train.es", "Hola.\nAdiós.\n", bom=True)
    _write(tmp_path / "train.en", "Hello.\nGoodbye.\n", bom=True)
    pairs = load_parallel_corpus(tmp_path / "train", src_lang="es", tgt_lang="en")["translation"]
    assert pairs[0] == {"es": "Hola.", "en": "Hello."}


def test_a_bom_does_not_turn_a_tsv_header_into_a_pair(tmp_path):
    path = _write(tmp_path / "train.tsv", "en\tes\nHello.\tHola.\n", bom=True)
    pairs = load_parallel_corpus(path, src_lang="es", tgt_lang="en")["translation"]
    assert pairs == [{"es": "Hola.", "en": "Hello."}]


def test_a_bom_is_dropped_from_a_jsonl_file(tmp_path):
    path = _write(tmp_path / "train.jsonl", json.dumps({"translation": {"es": "Hola.", "en": "Hello."}}) + "\n", True)
    assert len(load_parallel_corpus(path, src_lang="es", tgt_lang="en")) == 1


@pytest.mark.parametrize("name", ["train.tsv", "train.jsonl", "train.es"])
def test_latin1_corpus_files_are_refused_with_file_and_offset(tmp_path, name):
    (tmp_path / name).write_bytes(LATIN1_SENTENCE)
    _write(tmp_path / "train.en", "The girl ate pineapple.\n")
    source = tmp_path / "train" if name.endswith(".es") else tmp_path / name
    with pytest.raises(CorpusError, match=rf"{name}: not UTF-8 text \(byte offset 5, line 1"):
        load_parallel_corpus(source, src_lang="es", tgt_lang="en")


@pytest.mark.parametrize(
    "text",
    [
        '[{"translation": {"es": "Hola.", "en": "Hello."}}]\n',
        '[\n  {"translation": {"es": "Hola.", "en": "Hello."}}\n]\n',
    ],
    ids=["one-line array", "pretty-printed array"],
)
def test_a_json_array_file_is_told_to_be_json_lines(tmp_path, text):
    path = _write(tmp_path / "train.json", text)
    with pytest.raises(CorpusError, match="train.json, line 1: .*expected JSON Lines"):
        load_parallel_corpus(path, src_lang="es", tgt_lang="en")


def test_references_of_mixed_kinds_are_refused_with_the_line(tmp_path):
    lines = [
        {"translation": {"es": "Hola.", "en": "Hello."}, "references": {"en": ["Hello.", "Hi."]}},
        {"translation": {"es": "Adiós.", "en": "Goodbye."}, "references": "Goodbye."},
    ]
    path = _write(tmp_path / "test.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(CorpusError, match="test.jsonl, line 2: 'references' is a string here but an object on line 1"):
        load_parallel_corpus(path, src_lang="es", tgt_lang="en")


def test_references_that_are_not_lists_of_sentences_are_refused(tmp_path):
    line = {"translation": {"es": "Hola.", "en": "Hello."}, "references": {"en": "Hello."}}
    path = _write(tmp_path / "test.jsonl", json.dumps(line) + "\n")
    with pytest.raises(CorpusError, match="line 1: 'references' must be an object of language -> list"):
        load_parallel_corpus(path, src_lang="es", tgt_lang="en")


def test_a_split_given_by_two_files_is_refused(tmp_path):
    write_tiny_corpus(tmp_path, {"train": 4, "test": 2})
    _write(tmp_path / "train.tsv", "Hola.\tHello.\n")
    with pytest.raises(CorpusError, match=r"split 'train' is given by more than one file .*train.jsonl.*train.tsv"):
        load_parallel_corpus(tmp_path, src_lang="es", tgt_lang="en", split="train")
    assert len(load_parallel_corpus(tmp_path, src_lang="es", tgt_lang="en", split="test")) == 2  # others load


@pytest.mark.parametrize(
    "text, message",
    [
        ("Hola.\tHello.\nAdiós.\n", "line 2: expected 2 tab-separated columns"),
        ("Hola.\t \n", "line 1: empty en column"),
        ("fr\ten\nBonjour.\tHello.\n", "line 1: header names languages 'fr' and 'en'"),
    ],
)
def test_malformed_tsv_lines_are_named(tmp_path, text, message):
    with pytest.raises(CorpusError, match=message):
        load_parallel_corpus(_write(tmp_path / "train.tsv", text), src_lang="es", tgt_lang="en")


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"translation": {"es": "Hola."}}\n', "line 1: 'translation' lacks language key"),
        ('{"translation": {"es": "Hola.", "en": ""}}\n', "line 1: empty or non-text en translation"),
        ('{"translation": {"es": "Hola.", "en": "Hi."}}\n{"translation": \n', "line 2: invalid JSON"),
        ('{"es": "Hola.", "en": "Hi."}\n', "line 1: no 'translation' column"),
        ("\n", "line 1: empty line"),
    ],
)
def test_malformed_jsonl_lines_are_named(tmp_path, text, message):
    with pytest.raises(CorpusError, match=message):
        load_parallel_corpus(_write(tmp_path / "train.jsonl", text), src_lang="es", tgt_lang="en")


def test_misaligned_text_pair_files_are_refused(tmp_path):
    _write(tmp_path / "train.es", "Hola.\nAdiós.\n")
    _write(tmp_path / "train.en", "Hello.\n")
    with pytest.raises(CorpusError, match="train.es has 2 lines but .*train.en has 1 lines"):
        load_parallel_corpus(tmp_path / "train", src_lang="es", tgt_lang="en")


# --------------------------------------------------------------------------- corpus folders verified before reuse


def _fingerprinted_corpus(directory: Path) -> Path:
    """A tiny corpus folder with a meta.json recording file fingerprints, as build-corpus writes it."""
    from hf_graphtf.data.fingerprints import fingerprint

    write_tiny_corpus(directory, {"train": 6, "test": 2})
    files = {name: fingerprint(directory / name) for name in ("train.jsonl", "test.jsonl")}
    (directory / "meta.json").write_text(json.dumps({"files": files}), encoding="utf-8")
    return directory


def test_a_corpus_file_cut_short_after_the_build_is_refused(tmp_path):
    corpus = _fingerprinted_corpus(tmp_path / "corpus")
    train = corpus / "train.jsonl"
    train.write_text("".join(train.read_text(encoding="utf-8").splitlines(keepends=True)[:3]), encoding="utf-8")
    with pytest.raises(CorpusError, match="train.jsonl has 3 lines, meta.json records 6.*build-corpus"):
        load_parallel_corpus(corpus, src_lang="es", tgt_lang="en", split="train")
    assert len(load_parallel_corpus(corpus, src_lang="es", tgt_lang="en", split="test")) == 2


def test_a_corpus_file_edited_after_the_build_is_refused(tmp_path):
    corpus = _fingerprinted_corpus(tmp_path / "corpus")
    train = corpus / "train.jsonl"
    train.write_text(train.read_text(encoding="utf-8").replace("the", "teh", 1), encoding="utf-8")
    with pytest.raises(CorpusError, match="other content than meta.json records"):
        load_parallel_corpus(corpus, src_lang="es", tgt_lang="en", split="train")


def test_a_damaged_meta_json_is_named(tmp_path):
    corpus = _fingerprinted_corpus(tmp_path / "corpus")
    (corpus / "meta.json").write_text('{"files": ', encoding="utf-8")
    with pytest.raises(CorpusError, match="meta.json: damaged corpus metadata"):
        load_parallel_corpus(corpus, src_lang="es", tgt_lang="en", split="train")


# --------------------------------------------------------------------------- model folders


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory, tiny_tokenizer) -> Path:
    from transformers import AutoModelForSeq2SeqLM

    folder = tmp_path_factory.mktemp("model")
    config = tiny_model_config(len(tiny_tokenizer), attention_link="both")
    AutoModelForSeq2SeqLM.from_config(config).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def test_check_model_source_accepts_a_whole_folder_and_hub_ids(saved_model):
    check_model_source(saved_model)
    check_model_source("Helsinki-NLP/opus-mt-es-en")  # a Hub id: left to Transformers


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda folder: folder / "missing", "no such model folder"),
        (lambda folder: folder, "the folder is empty"),
        (lambda folder: _write(folder / "notes.txt", "x"), "a file, not a model folder"),
    ],
    ids=["missing", "empty", "a file"],
)
def test_unusable_model_sources_are_named_by_the_cli(tmp_path, capsys, make, message):
    source = make(tmp_path)
    assert cli_main(["translate", "--model", str(source), "--input", "-"]) == 2
    error = capsys.readouterr().err
    assert message in error and str(source) in error


def test_a_bare_name_that_is_no_folder_and_no_reachable_hub_model_is_one_line(tmp_path, capsys, monkeypatch):
    """`--model quickstart` meant as a folder: a Hub id to Transformers, which (offline here) fails with a
    chained traceback; the CLI names both readings in one line instead."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli_main(["translate", "--model", "quickstart", "--input", str(_write(tmp_path / "in.txt", "Hola."))]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: quickstart: no folder of that name here, and as a Hub id: ")
    assert len(error.strip().splitlines()) == 1


@pytest.mark.parametrize("tokenizer_name_or_path", [None, "saved"], ids=["tokenizer-from-it", "model-only"])
def test_fine_tuning_from_a_bare_name_the_hub_cannot_give_is_one_error(
    tmp_path, saved_model, monkeypatch, tokenizer_name_or_path
):
    """The same for `model_name_or_path`, whether the tokenizer or the model's config is read from it first."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokenizer = str(saved_model) if tokenizer_name_or_path else None
    recipe = tiny_recipe(write_tiny_corpus(tmp_path / "corpus"), tmp_path / "out", model_name_or_path="opus-mt-typo")
    recipe = {**recipe, "tokenizer_name_or_path": tokenizer, "max_steps": 1}
    with pytest.raises(ModelFolderError, match="^opus-mt-typo: no folder of that name here, and as a Hub id: "):
        run_translation(*parse_recipe_args([str(write_recipe(tmp_path / "recipe.yaml", recipe))]))


def test_a_folder_without_config_lists_what_it_holds(tmp_path, capsys):
    _write(tmp_path / "tokenizer.json", "{}")
    assert cli_main(["translate", "--model", str(tmp_path)]) == 2
    assert "no config.json, so not a saved model folder (it holds tokenizer.json)" in capsys.readouterr().err


def test_a_weights_file_cut_short_is_named(tmp_path, saved_model, capsys):
    damaged = tmp_path / "damaged"
    shutil.copytree(saved_model, damaged)
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(ModelFolderError, match=r"model.safetensors: damaged weights file \(cut short"):
        check_model_source(damaged)
    assert cli_main(["translate", "--model", str(damaged)]) == 2
    assert "model.safetensors: damaged weights file" in capsys.readouterr().err
    weights.write_bytes(b"\x10")
    with pytest.raises(ModelFolderError, match="not even a safetensors header"):
        check_model_source(damaged)


def test_a_folder_without_weights_is_named(tmp_path, saved_model):
    folder = tmp_path / "no-weights"
    shutil.copytree(saved_model, folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelFolderError, match="no model weights"):
        check_model_source(folder)


# --------------------------------------------------------------------------- evaluate / translate inputs


def test_latin1_input_to_translate_and_evaluate_is_named(tmp_path, saved_model, capsys):
    source = tmp_path / "source.txt"
    source.write_bytes(LATIN1_SENTENCE)
    assert cli_main(["translate", "--model", str(saved_model), "--input", str(source)]) == 2
    assert "source.txt: not UTF-8 text (byte offset 5" in capsys.readouterr().err
    hypotheses = _write(tmp_path / "hyp.txt", "The girl ate pineapple.\n")
    code = cli_main(
        ["evaluate", "--hypotheses", str(hypotheses), "--source", str(hypotheses), "--references", str(source)]
    )
    assert code == 2
    assert "source.txt: not UTF-8 text" in capsys.readouterr().err


def test_a_bom_in_a_reference_file_does_not_lower_bleu(tmp_path, capsys):
    text = "The girl ate the pineapple in the garden.\nThe boy ate the bread at home.\n"
    hypotheses = _write(tmp_path / "hyp.txt", text)
    references = _write(tmp_path / "ref.txt", text, bom=True)
    args = ["evaluate", "--hypotheses", str(hypotheses), "--source", str(hypotheses), "--references", str(references)]
    assert cli_main([*args, "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] == 100.0


def test_a_missing_input_file_is_named(tmp_path, saved_model, capsys):
    assert cli_main(["translate", "--model", str(saved_model), "--input", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt: no such file" in capsys.readouterr().err


def test_a_length_limit_past_the_decoder_s_positions_is_refused_before_any_line(tmp_path, saved_model, capsys):
    """Decoding would fail at the position past the table, in a traceback, after every line up to it; the limit
    is refused first, and the job leaves no partial file that would refuse the corrected command."""
    positions = json.loads((saved_model / "config.json").read_text(encoding="utf-8"))["max_position_embeddings"]
    source, output = _write(tmp_path / "in.txt", "w3 w4 w5\n"), tmp_path / "out.txt"
    argv = ["translate", "--model", str(saved_model), "--input", str(source), "--output", str(output), "--quiet"]
    assert cli_main([*argv, "--max-new-tokens", str(positions)]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error == (
        f"error: max_new_tokens {positions} is more than this model's decoder reads ({positions} positions, "
        f"max_position_embeddings): at most {positions - 1} new tokens; set --max-new-tokens {positions - 1} or less"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.txt"]
    assert cli_main([*argv, "--max-new-tokens", "3"]) == 0
    assert len(output.read_text(encoding="utf-8").splitlines()) == 1


# --------------------------------------------------------------------------- checkpoints and resume


def _fake_checkpoint(folder: Path, source: Path | None = None) -> Path:
    """A checkpoint folder: a copy of a real one, or empty."""
    if source is not None:
        shutil.copytree(source, folder)
    else:
        folder.mkdir(parents=True)
    return folder


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda ckpt: (ckpt / "trainer_state.json").unlink(), "no trainer_state.json"),
        (lambda ckpt: (ckpt / "trainer_state.json").write_text("{", encoding="utf-8"), "unreadable trainer_state"),
        (lambda ckpt: (ckpt / "config.json").unlink(), "no config.json"),
        (lambda ckpt: (ckpt / "model.safetensors").unlink(), "no model weights"),
        (
            lambda ckpt: (ckpt / "model.safetensors").write_bytes((ckpt / "model.safetensors").read_bytes()[:500]),
            "damaged weights file",
        ),
        (lambda ckpt: [path.unlink() for path in ckpt.iterdir() if not path.name.endswith(".py")], "no trainer_state"),
    ],
    ids=["no state", "bad state", "no config", "no weights", "cut weights", "only code"],
)
def test_resume_skips_and_names_incomplete_checkpoints(tmp_path, trained_run, damage, reason):
    output = tmp_path / "out"
    good = _fake_checkpoint(output / "checkpoint-2", trained_run / "checkpoint-2")
    bad = _fake_checkpoint(output / "checkpoint-4", trained_run / "checkpoint-2")
    damage(bad)
    checkpoint, skipped = newest_complete_checkpoint(output)
    assert checkpoint == str(good)
    assert skipped[0][0] == str(bad) and reason in skipped[0][1]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A tiny 2-step run with a checkpoint at step 2 (in-process: a few seconds)."""
    from hf_graphtf.training import main as train_main

    base = tmp_path_factory.mktemp("faults-run")
    corpus = write_tiny_corpus(base / "corpus")
    recipe = write_recipe(base / "recipe.yaml", tiny_recipe(corpus, base / "out", max_steps=2, do_predict=False))
    train_main([str(recipe)])
    return base / "out"


def _train(tmp_path: Path, *flags: str, **overrides) -> subprocess.CompletedProcess:
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        write_tiny_corpus(corpus)
    recipe = write_recipe(tmp_path / "recipe.yaml", tiny_recipe(corpus, tmp_path / "out", **overrides))
    return run_python(str(TRAIN_SCRIPT), str(recipe), *flags)


def test_interrupted_saves_and_runs_recover_without_help(tmp_path):
    """A run killed while writing checkpoint-4 (its half-written files in the staging area, or a
    checkpoint-4 folder of an older version without trainer_state.json) resumes from checkpoint-2,
    says so, and finishes; a second run of the finished job keeps its results; resuming with other
    model options is refused, naming them; ``--overwrite_output_dir`` starts over."""
    first = _train(tmp_path, max_steps=2, do_predict=False)
    assert first.returncode == 0, first.stderr[-3000:]
    output = tmp_path / "out"
    assert not (output / STAGING_DIR).exists() and (output / "checkpoint-2" / "trainer_state.json").is_file()
    half_written = output / STAGING_DIR / "checkpoint-4"
    shutil.copytree(output / "checkpoint-2", half_written)
    (half_written / "trainer_state.json").unlink()
    old_partial = output / "checkpoint-4"
    shutil.copytree(output / "checkpoint-2", old_partial)
    (old_partial / "trainer_state.json").unlink()

    resumed = _train(tmp_path, max_steps=4)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = resumed.stdout + resumed.stderr
    assert "a checkpoint whose saving was interrupted" in log
    assert f"Not resuming from {old_partial}: no trainer_state.json" in log
    assert f"Resuming training from {output / 'checkpoint-2'}" in log
    assert "missing keys" not in log  # tied embeddings and the LM head are not missing
    results = json.loads((output / "results.json").read_text(encoding="utf-8"))
    assert results["train"]["global_step"] == 4 and results["train"]["train_loss"] > 0
    assert (output / "checkpoint-4" / "trainer_state.json").is_file() and not (output / STAGING_DIR).exists()

    again = _train(tmp_path, max_steps=4)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "had already finished (max_steps 4 reached)" in again.stdout + again.stderr
    rerun = json.loads((output / "results.json").read_text(encoding="utf-8"))
    assert rerun["train"] == results["train"] and rerun["test"]["bleu"] == results["test"]["bleu"]

    other = _train(tmp_path, max_steps=6, attention_link="none", d_model=64)
    assert other.returncode != 0
    assert "attention_link (checkpoint 'both', recipe 'none')" in other.stderr
    assert "d_model (checkpoint 32, recipe 64)" in other.stderr and "--overwrite_output_dir" in other.stderr

    fresh = _train(tmp_path, "--overwrite_output_dir", "true", max_steps=2, attention_link="none", do_predict=False)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "Starting over (overwrite_output_dir)" in fresh.stdout + fresh.stderr
    assert sorted(path.name for path in output.glob("checkpoint-*")) == ["checkpoint-2"]
    assert json.loads((output / "config.json").read_text())["attention_link"] == "none"


# --------------------------------------------------------------------------- the same seed gives the same model


_TOKENIZER_SCRIPT = """
import sys
from hf_graphtf.data import load_parallel_corpus
from hf_graphtf.tokenization import train_joint_tokenizer
data = load_parallel_corpus(sys.argv[1], src_lang="es", tgt_lang="en", split="train")
tokenizer = train_joint_tokenizer(data, src_lang="es", tgt_lang="en", vocab_size=int(sys.argv[2]), show_progress=False)
print(tokenizer.backend_tokenizer.to_str())
"""


@pytest.mark.slow
def test_two_processes_train_the_same_tokenizer(tmp_path):
    """Equal-score pieces, last-bit score differences and the added alphabet once made every process
    number the vocabulary differently; five processes now write one identical file. (Slow: 35 s. The
    default run compares the tokenizer two training processes write, in the test below.)"""
    corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 400}, seed=3)
    outputs = {run_python("-c", _TOKENIZER_SCRIPT, str(corpus), "200").stdout for _ in range(5)}
    assert len(outputs) == 1 and outputs.pop().strip()


def test_two_runs_of_one_recipe_give_the_same_weights(tmp_path):
    weights = []
    for run in ("a", "b"):
        corpus = write_tiny_corpus(tmp_path / "corpus")  # same seed, same file
        recipe = tiny_recipe(corpus, tmp_path / run, max_steps=3, do_eval=False, do_predict=False, eval_strategy="no")
        result = run_python(str(TRAIN_SCRIPT), str(write_recipe(tmp_path / f"{run}.yaml", recipe)))
        assert result.returncode == 0, result.stderr[-3000:]
        weights.append(load_file(tmp_path / run / "model.safetensors"))
        assert (tmp_path / run / "tokenizer.json").read_bytes() == (tmp_path / "a" / "tokenizer.json").read_bytes()
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        torch.testing.assert_close(weights[0][name], weights[1][name], rtol=0, atol=0, msg=name)


@pytest.mark.slow
def test_two_data_parallel_runs_give_the_same_model_and_translations(tmp_path):
    """The experiment grid trains with two gloo processes and restores runs by rerunning them, which
    needs a rerun to be the same computation: weights, validation and test translations bit for bit."""
    corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 256, "valid": 16, "test": 16})
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    outputs = []
    for run in ("a", "b"):
        recipe = tiny_recipe(
            corpus, tmp_path / run, max_steps=12, max_tokens_per_batch=120, eval_steps=6, save_steps=6, warmup_steps=2
        )
        command = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
        command += ["--mixed_precision", "no", "--dynamo_backend", "no", str(TRAIN_SCRIPT)]
        command.append(str(write_recipe(tmp_path / f"{run}.yaml", recipe)))
        result = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        outputs.append(tmp_path / run)
    first, second = outputs
    weights = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    for name in weights[0]:
        torch.testing.assert_close(weights[0][name], weights[1][name], rtol=0, atol=0, msg=name)
    assert (first / "test_predictions.txt").read_bytes() == (second / "test_predictions.txt").read_bytes()
    eval_scores = [json.loads((folder / "results.json").read_text())["eval"]["eval_bleu"] for folder in outputs]
    assert eval_scores[0] == eval_scores[1]


# --------------------------------------------------------------------------- slow: real kills during saves


@pytest.mark.slow
def test_kill_9_at_random_moments_never_breaks_resume(tmp_path):
    """Kill a training process at several moments (some inside checkpoint writes: a save every step),
    resume each time, and finish with a whole, loadable model."""
    corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 256, "valid": 8, "test": 8})
    recipe = tiny_recipe(corpus, tmp_path / "out", max_steps=40, save_steps=1, eval_steps=20, save_total_limit=2)
    path = write_recipe(tmp_path / "recipe.yaml", recipe)
    output = tmp_path / "out"
    for delay in (0.05, 0.15, 0.3, 0.45, 0.6):
        before = _newest_step(output)
        process = subprocess.Popen(
            [sys.executable, str(TRAIN_SCRIPT), str(path)],
            env=subprocess_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while _newest_step(output) == before and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)  # until this run has saved a checkpoint of its own: training is under way
        time.sleep(delay)  # then somewhere in the next steps and saves
        process.kill()
        process.wait()
    final = run_python(str(TRAIN_SCRIPT), str(path), timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert results["train"]["global_step"] == 40
    check_model_source(tmp_path / "out")


def _newest_step(output: Path) -> int:
    steps = [int(path.name.split("-")[1]) for path in output.glob("checkpoint-*") if path.name.split("-")[1].isdigit()]
    return max(steps, default=0)


@pytest.mark.parametrize(
    "state, args, reason",
    [
        ({"global_step": 10, "max_steps": 10, "epoch": 2.0}, {"num_train_epochs": 2}, "all 2 epochs trained"),
        ({"global_step": 10, "max_steps": 10, "epoch": 2.0}, {"num_train_epochs": 3}, None),
        ({"global_step": 12, "max_steps": 12, "epoch": 1.2, "num_train_epochs": 2}, {"num_train_epochs": 2}, None),
        ({"global_step": 4, "max_steps": 10}, {"max_steps": 4}, "max_steps 4 reached"),
        ({"global_step": 4, "max_steps": 10}, {"max_steps": 8}, None),
        (
            {  # replayed from the log: the best validation BLEU, then three evaluations without a higher one
                "global_step": 4,
                "log_history": [{"step": step, "eval_bleu": bleu} for step, bleu in enumerate([9.0, 8.0, 9.0, 7.0], 1)],
            },
            {
                "max_steps": 8,
                "early_stopping_patience": 3,
                "load_best_model_at_end": True,
                "eval_strategy": "steps",
                "save_strategy": "steps",
            },
            "early stopping (3 evaluations without improvement)",
        ),
    ],
    ids=["epochs done", "more epochs asked", "max_steps stop mid-epoch", "steps done", "more steps asked", "patience"],
)
def test_a_finished_run_is_recognised(tmp_path, state, args, reason):
    from hf_graphtf.training.arguments import TranslationTrainingArguments
    from hf_graphtf.training.resume import finished_training

    (tmp_path / "trainer_state.json").write_text(json.dumps(state), encoding="utf-8")
    training_args = TranslationTrainingArguments(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", **args
    )
    assert finished_training(str(tmp_path), training_args) == reason


def test_the_training_script_reports_a_bad_recipe_in_one_line(tmp_path):
    recipe = write_recipe(tmp_path / "recipe.yaml", tiny_recipe(tmp_path / "corpus", tmp_path / "out", dropout=2.0))
    result = run_python(str(TRAIN_SCRIPT), str(recipe))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: GraphMarianConfig.dropout must be a probability")
    assert "Traceback" not in result.stderr
