"""The README's examples run as written, and the committed pages' links lead somewhere."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from recipe_fixtures import one_thread, trained_tiny_model, write_opus_mt_stand_in  # noqa: F401  (autouse fixture)
from transformers import AutoModelForSeq2SeqLM

import hf_graphtf
from hf_graphtf.configuration import GRAPH_OPTIONS
from hf_graphtf.data import load_parallel_corpus
from hf_graphtf.training import parse_recipe_args

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_every_python_block_of_the_readme_runs_in_order(tmp_path_factory, tmp_path, monkeypatch, capsys):
    """The quickstart loads what the main job writes (a tiny trained stand-in here, offline), translates a
    sentence, then builds a model with the options on and saves it with its tokenizer; the NLLB example
    loads NLLB (a local stand-in for the Hub id) with the gated link, which starts exactly where NLLB was."""
    blocks = _blocks("python")
    assert len(blocks) >= 3, "the README lost its quickstart or its NLLB example"
    assert all(len(block.strip().splitlines()) <= 12 for block in blocks), "a quickstart block grew past a screen"
    trained = trained_tiny_model(tmp_path_factory)
    shutil.copytree(trained.output_dir, tmp_path / "outputs" / "quickstart")
    # the NLLB example's Hub id, up to the network boundary: a local stand-in of the same shape of files
    nllb = write_opus_mt_stand_in(tmp_path / "nllb-200-distilled-600M", trained.corpus, "m2m_100")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}

    def run(number: int, block: str) -> None:
        block = block.replace('"facebook/nllb-200-distilled-600M"', repr(str(nllb)))
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)

    run(1, blocks[0])
    namespace.clear()  # the second block runs on its own, as a reader may paste it alone
    run(2, blocks[1])
    printed = capsys.readouterr().out
    assert printed.startswith("[") and "]" in printed  # the translated sentence, as a list
    assert (tmp_path / "my-model" / "model.safetensors").exists()
    assert (tmp_path / "my-model" / "tokenizer.json").exists()  # what a pipeline loading my-model needs
    assert namespace["model"].config.attention_link_mode == "cumulative" and not namespace["model"].training
    assert namespace["model"].config.use_cache  # built from the trained folder's config: decodes with its cache
    assert namespace["translator"](["El rey dijo."], max_new_tokens=4)

    nllb_block = next(number for number, block in enumerate(blocks) if "nllb" in block)
    run(nllb_block + 1, blocks[nllb_block])
    assert isinstance(namespace["model"], hf_graphtf.GraphM2M100ForConditionalGeneration)
    vanilla = AutoModelForSeq2SeqLM.from_pretrained(nllb)
    # "at step 0 NLLB's own loss": to float rounding under sdpa (bit for bit under eager: test_finetuning.py)
    torch.testing.assert_close(namespace["loss"], vanilla(**namespace["batch"]).loss, rtol=1e-6, atol=1e-6)
    english = namespace["english"]
    assert english == namespace["tokenizer"].convert_tokens_to_ids("eng_Latn")
    assert namespace["model"].generate(**namespace["inputs"], forced_bos_token_id=english)[0, 1] == english
    assert capsys.readouterr().out.startswith("[")  # the decoded translation, as a list
    for number, block in enumerate(blocks[nllb_block + 1 :], start=nllb_block + 2):
        run(number, block)


def test_the_readmes_data_line_and_recipe_train_and_score_the_test_split_as_written(tmp_path, recwarn):
    """The README's "Your own data": its data line makes a corpus, and its recipe, copied verbatim with the corpus
    pointed at a small folder, trains and scores the test split with sacreBLEU (the flags make it small and
    short, as a user's first try would), with no warning about pinned memory on a CPU."""
    from hf_graphtf.training import run_translation

    (line,) = _blocks("json")
    corpus = tmp_path / "data" / "my-de-en"
    corpus.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (corpus / f"{split}.jsonl").write_text(line * 12, encoding="utf-8")
    assert load_parallel_corpus(corpus, src_lang="de", tgt_lang="en", split="train")[0]["translation"]["de"]
    recipe = _blocks("yaml")[0].replace("data/my-de-en", str(corpus)).replace("outputs/my-model", str(tmp_path / "out"))
    path = tmp_path / "my_recipe.yaml"
    path.write_text(recipe, encoding="utf-8")
    small = ["--d_model", "16", "--encoder_layers", "1", "--decoder_layers", "1", "--encoder_ffn_dim", "32"]
    small += ["--decoder_ffn_dim", "32", "--encoder_attention_heads", "2", "--decoder_attention_heads", "2"]
    short = ["--max_steps", "2", "--eval_steps", "1", "--save_steps", "1", "--vocab_size", "200"]
    short += ["--generation_max_length", "4", "--use_cpu", "true"]
    model_args, data_args, training_args = parse_recipe_args([str(path), *small, *short])
    assert model_args.attention_link == "both" and data_args.src_lang == "de"
    assert training_args.early_stopping_patience == 8 and training_args.load_best_model_at_end
    assert not training_args.dataloader_pin_memory  # nothing to pin for on a CPU
    results = run_translation(model_args, data_args, training_args)
    assert "bleu" in results["test"] and (tmp_path / "out" / "test_predictions.txt").is_file()
    assert not [warning for warning in recwarn if "pin_memory" in str(warning.message)]


def test_a_recipe_that_asks_for_nothing_says_so_in_one_line(tmp_path, capsys):
    """Without do_train, do_eval or do_predict a run would do nothing (and used to fail deep in, for want of a
    tokenizer): one line says which fields to set."""
    from hf_graphtf.training.recipe import main

    path = tmp_path / "recipe.yaml"
    path.write_text(f"corpus: {tmp_path}\nsrc_lang: de\ntgt_lang: en\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        main([str(path)])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: the recipe asks for nothing to run: set do_train: true")


def test_the_options_table_lists_every_option_with_its_values():
    text = README.read_text(encoding="utf-8")
    for option in GRAPH_OPTIONS:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{option.name}` |")), None)
        assert row is not None, f"{option.name} is missing from the README's options table"
        values = ["False", "True"] if option.choices is None else [f'"{choice}"' for choice in option.choices]
        assert all(f"`{value}`" in row for value in values), row
        assert row.index(f"`{values[0] if option.choices is None else json.dumps(option.default)}`") < row.index(
            " | ", len(f"| `{option.name}` |")
        )


def test_the_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 320
    headings = [line for line in lines if line.startswith("## ")]
    for wanted in ("Results at a glance", "Install", "Quickstart", "Limitations", "Citation", "License"):
        assert any(wanted in heading for heading in headings), wanted
    assert (REPO_ROOT / "LICENSE").read_text(encoding="utf-8").startswith(" " * 33 + "Apache License")


@pytest.mark.parametrize(
    "pages",
    [
        [README],
        [*REPO_ROOT.glob("recipes/*/*.md"), *REPO_ROOT.glob("model_cards/**/*.md"), *REPO_ROOT.glob("docs/*.md")],
    ],
    ids=["README", "linked pages"],
)
def test_committed_pages_link_to_files_that_exist(pages):
    """Relative links in the README and the pages it links (docs, results, benchmarks, model cards) name
    files in the repository: a moved page or figure must not leave a dead link behind."""
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            assert (page.parent / target.split("#")[0]).exists(), f"{page.relative_to(REPO_ROOT)} links {target}"
            checked += 1
    assert checked >= 5
