"""The training recipe end to end: script, resume, errors, distributed run, metrics, schedule, Hub upload."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
import torch
from recipe_fixtures import (
    BLOCK_PACKAGE,
    REPO_ROOT,
    TRAIN_SCRIPT,
    one_thread,  # noqa: F401  (autouse fixture)
    subprocess_env,
    tiny_recipe,
    trained_tiny_model,
    write_recipe,
    write_tiny_corpus,
)
from transformers import AutoTokenizer, EvalPrediction, TrainerCallback

from hf_graphtf.families import FAMILIES
from hf_graphtf.scoring import bleu_by_length, corpus_scores, length_bucket_labels
from hf_graphtf.training import parse_recipe_args, run_translation
from hf_graphtf.training.data import load_splits
from hf_graphtf.training.hub import HUB_IGNORE_PATTERNS
from hf_graphtf.training.metrics import IGNORE_INDEX, build_compute_metrics
from hf_graphtf.training.resume import RUN_ATTENTION_FILE
from hf_graphtf.training.schedule import noam_learning_rate, noam_peak_learning_rate

RECIPES = sorted((REPO_ROOT / "recipes" / "configs").glob("*.yaml")) + [REPO_ROOT / "recipes" / "quickstart.yaml"]


def _args(tmp_path: Path, **overrides):
    corpus = write_tiny_corpus(tmp_path / "corpus")
    recipe = write_recipe(tmp_path / "recipe.yaml", tiny_recipe(corpus, tmp_path / "out", **overrides))
    return parse_recipe_args([str(recipe)])


# --------------------------------------------------------------------------- the recipe script


def test_script_trains_evaluates_and_saves_everything(tmp_path_factory):
    """The real script, in a child process: eval BLEU during training, test report, model folder."""
    run = trained_tiny_model(tmp_path_factory)
    out, results = run.output_dir, run.results
    assert "--max_steps" in run.command  # the command-line flag overrode the recipe's max_steps
    assert results["train"]["global_step"] == 4
    state = json.loads((out / "trainer_state.json").read_text())
    assert any("eval_bleu" in entry for entry in state["log_history"])
    assert "eval_bleu" in results["eval"] and "eval_chrf" in results["eval"]
    for key in ("test", "test_multi_reference"):
        assert {"bleu", "chrf", "bleu_by_length", "bleu_signature"} <= set(results[key])
    assert results["test"]["references_per_sentence"] == 1
    assert results["test_multi_reference"]["references_per_sentence"] == 2
    assert list(results["test"]["bleu_by_length"]) == ["1-5", "6-10", "11+"]
    assert sum(row["sentences"] for row in results["test"]["bleu_by_length"].values()) == 8
    assert len(results["samples"]) == 2
    assert len((out / "test_predictions.txt").read_text(encoding="utf-8").splitlines()) == 8
    for name in ("config.json", "model.safetensors", "tokenizer.json", "README.md", "configuration.py"):
        assert (out / name).is_file(), name
    assert "BLEU" in run.stdout and "translation:" in run.stdout
    # saved ready to decode: use_cache as before training (the Trainer sets it false while it trains), in the
    # final folder and every checkpoint, so that a model built from the saved config decodes with its cache
    configs = [out / "config.json", *out.glob("checkpoint-*/config.json")]
    assert len(configs) > 1 and all(json.loads(path.read_text())["use_cache"] is True for path in configs)
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    assert AutoModelForSeq2SeqLM.from_config(AutoConfig.from_pretrained(out)).config.use_cache is True


def test_resume_continues_from_the_last_checkpoint(tmp_path):
    """A second run in the same output_dir picks up checkpoint-2 and trains steps 3-4 only."""

    class StepRecorder(TrainerCallback):
        def __init__(self):
            self.first_step, self.steps = None, 0

        def on_train_begin(self, args, state, control, **kwargs):
            self.first_step = state.global_step

        def on_step_end(self, args, state, control, **kwargs):
            self.steps += 1

    common = {"do_eval": False, "do_predict": False, "eval_strategy": "no"}
    first = _args(tmp_path, max_steps=2, **common)
    run_translation(*first)
    assert (tmp_path / "out" / "checkpoint-2").is_dir()

    second = _args(tmp_path, max_steps=4, **common)
    recorder = StepRecorder()
    results = run_translation(*second, callbacks=[recorder])
    assert results["train"]["resumed_from_checkpoint"].endswith("checkpoint-2")
    assert recorder.first_step == 2 and recorder.steps == 2
    assert results["train"]["global_step"] == 4


def test_a_resumed_run_keeps_the_attention_kernel_it_started_with(tmp_path, monkeypatch, caplog):
    """``auto`` resolves again at every sitting, and what it resolves to is a measured table that can change
    between sittings: the run records its kernel when it starts and keeps it, so one run trains with one
    kernel and its results say which. A kernel the recipe sets wins, with a warning."""
    from hf_graphtf.training import arguments, resume

    common = {"do_eval": False, "do_predict": False, "eval_strategy": "no"}
    run_translation(*_args(tmp_path, max_steps=2, **common))  # fp32 on CPU: auto is sdpa
    record = tmp_path / "out" / resume.RUN_ATTENTION_FILE
    assert json.loads(record.read_text()) == {"attn_implementation": "sdpa"}

    monkeypatch.setattr(arguments, "resolve_attention", lambda requested, *a, **k: "eager")  # the table changed
    resumed = _args(tmp_path, max_steps=3, **common)
    assert resumed[0].attn_implementation == "eager" and resumed[0].attn_implementation_from_auto
    with caplog.at_level("WARNING"):
        results = run_translation(*resumed)
    assert results["train"]["attn_implementation"] == "sdpa" and results["train"]["global_step"] == 3
    assert "the attention kernel this run started with, 'sdpa'" in caplog.text

    explicit = _args(tmp_path, max_steps=4, attn_implementation="eager", **common)
    assert not explicit[0].attn_implementation_from_auto
    results = run_translation(*explicit)
    assert results["train"]["attn_implementation"] == "eager"  # as the recipe sets: the record follows
    assert json.loads(record.read_text()) == {"attn_implementation": "eager"}

    record.unlink()  # a run started before the kernel was recorded: goes on with what auto resolves, and says so
    with caplog.at_level("WARNING"):
        results = run_translation(*_args(tmp_path, max_steps=5, **common))
    assert results["train"]["attn_implementation"] == "eager" and "does not record the attention kernel" in caplog.text


# --------------------------------------------------------------------------- what the Trainer needs from the models


@pytest.mark.parametrize("model_class", ["GraphMarianMTModel", "GraphBartForConditionalGeneration"])
def test_model_forward_signature_names_labels(model_class):
    """`Seq2SeqTrainer` keeps only dataset columns named in ``forward``'s signature (dropping ``labels``
    otherwise), and ``generate()`` refuses keyword arguments missing from it (the Trainer passes
    ``labels``); a ``forward(*args, **kwargs)`` wrapper must therefore expose the wrapped signature."""
    import inspect

    import hf_graphtf

    parameters = inspect.signature(getattr(hf_graphtf, model_class).forward).parameters
    assert {"input_ids", "attention_mask", "decoder_input_ids", "labels"} <= set(parameters)


# --------------------------------------------------------------------------- errors a user can make


def test_corrupt_corpus_file_is_reported_with_its_name(tmp_path):
    model_args, data_args, training_args = _args(tmp_path)
    with open(tmp_path / "corpus" / "train.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"translation": {"es": "sin cerrar"\n')
    with pytest.raises(ValueError, match="train.jsonl"):
        load_splits(data_args, training_args)


def test_missing_split_lists_the_available_ones(tmp_path):
    model_args, data_args, training_args = _args(tmp_path, train_split="train_10k")
    with pytest.raises(ValueError, match=r"no split 'train_10k'.*'test', 'train', 'valid'"):
        load_splits(data_args, training_args)


def test_recipe_with_an_unknown_key_is_refused(tmp_path):
    recipe = write_recipe(tmp_path / "recipe.yaml", {"corpus": "x", "atention_link": "both"})
    with pytest.raises(ValueError, match="unknown argument.*atention_link"):
        parse_recipe_args([str(recipe)])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model_family": "t5"}, "model_family"),
        ({"early_stopping_patience": 2}, "load_best_model_at_end"),
        ({"corpus": None}, "corpus is required"),
    ],
)
def test_inconsistent_recipes_are_refused(tmp_path, overrides, message):
    recipe = write_recipe(tmp_path / "recipe.yaml", {**tiny_recipe(tmp_path, tmp_path / "out"), **overrides})
    with pytest.raises(ValueError, match=message):
        parse_recipe_args([str(recipe)])


@pytest.mark.parametrize(
    "overrides",
    [{"attention_link": "encoders"}, {"graph_fusion": "max"}, {"graph_attention": True, "attention_link": "both"}],
)
def test_bad_model_options_fail_when_the_recipe_is_read(tmp_path, overrides):
    recipe = write_recipe(tmp_path / "recipe.yaml", tiny_recipe(tmp_path, tmp_path / "out", **overrides))
    with pytest.raises(ValueError, match=next(iter(overrides))):
        parse_recipe_args([str(recipe)])


# --------------------------------------------------------------------------- the committed recipes


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_committed_recipes_parse_and_build_a_valid_config(path, tmp_path):
    overrides = [] if torch.cuda.is_available() else ["--bf16", "false", "--tf32", "false"]  # GPU recipes
    model_args, data_args, training_args = parse_recipe_args([str(path), "--output_dir", str(tmp_path), *overrides])
    config_class = FAMILIES[model_args.model_family].config_class
    config_class(vocab_size=data_args.vocab_size, **model_args.size_options(), **model_args.graph_options())
    assert training_args.label_smoothing_factor == 0.1
    assert training_args.lr_scheduler_type == "inverse_sqrt"
    assert (training_args.adam_beta1, training_args.adam_beta2) == (0.9, 0.98)
    assert training_args.predict_with_generate and training_args.load_best_model_at_end
    assert training_args.early_stopping_patience is not None


def test_generated_recipes_match_their_generator():
    """recipes/configs/*.yaml are committed files; the generator must reproduce them exactly."""
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "recipes" / "make_configs.py"), "--check"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- metrics


class _CharTokenizer:
    """Just enough of a tokenizer for `compute_metrics`: ids are characters, 0 is padding."""

    pad_token_id = 0

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def batch_decode(self, ids, skip_special_tokens: bool = True) -> list[str]:
        assert all(i >= 0 for row in ids for i in row), "-100 reached the tokenizer"
        return ["".join(chr(i) for i in row if i != self.pad_token_id) for row in ids]


def _pad(rows: list[list[int]], value: int) -> np.ndarray:
    width = max(len(row) for row in rows)
    return np.array([row + [value] * (width - len(row)) for row in rows])


def test_compute_metrics_ignores_label_padding_and_matches_sacrebleu():
    tokenizer = _CharTokenizer()
    references = ["the king said good bread", "and the people saw the land", "water"]
    hypotheses = ["the king said bread", "the people saw a land", "water"]
    labels = _pad([tokenizer.encode(r) for r in references], IGNORE_INDEX)
    predictions = _pad([tokenizer.encode(h) for h in hypotheses], IGNORE_INDEX)
    metrics = build_compute_metrics(tokenizer)(EvalPrediction(predictions=predictions, label_ids=labels))
    assert metrics["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)
    assert metrics["chrf"] == round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2)


def test_multi_reference_scores_match_sacrebleu_streams():
    hypotheses = ["the king said good bread", "the people saw a land"]
    first = ["the king said good bread", "and the people saw the land"]
    second = ["the king spoke of bread", "the people saw a land"]
    scores = corpus_scores(hypotheses, [[a, b] for a, b in zip(first, second)])
    assert scores["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [first, second]).score, 2)
    assert scores["chrf"] == round(sacrebleu.corpus_chrf(hypotheses, [first, second]).score, 2)
    assert scores["bleu"] > corpus_scores(hypotheses, [[a] for a in first])["bleu"]
    # sentences may have different numbers of references
    uneven = corpus_scores(hypotheses, [[first[0]], [first[1], second[1]]])
    assert uneven["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [first, [None, second[1]]]).score, 2)


def test_bleu_by_length_buckets_score_each_subset():
    sources = ["a b", "a b c d e f g", "a b c", "a " * 30]
    hypotheses = ["the man", "the woman saw the land and water", "the good king", "the people " * 15]
    references = [["the man"], ["the woman saw a land and the water"], ["the great king"], ["the people " * 15]]
    report = bleu_by_length(sources, hypotheses, references, [3, 10, 20])
    assert list(report) == length_bucket_labels([3, 10, 20]) == ["1-3", "4-10", "11-20", "21+"]
    assert [row["sentences"] for row in report.values()] == [2, 1, 0, 1]
    expected = sacrebleu.corpus_bleu([hypotheses[0], hypotheses[2]], [[references[0][0], references[2][0]]]).score
    assert report["1-3"]["bleu"] == round(expected, 2)
    assert report["11-20"]["bleu"] is None


# --------------------------------------------------------------------------- schedule


def test_transformers_inverse_sqrt_is_the_papers_schedule():
    """lr_scheduler_type="inverse_sqrt" with warmup_steps=w is eq. 3 of Vaswani et al. at every step."""
    from transformers import get_scheduler

    d_model, warmup = 512, 40
    peak = noam_peak_learning_rate(d_model, warmup)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    scheduler = get_scheduler("inverse_sqrt", optimizer, num_warmup_steps=warmup)
    for step in range(0, 400):
        assert scheduler.get_last_lr()[0] == pytest.approx(
            noam_learning_rate(step, d_model=d_model, warmup_steps=warmup)
        )
        optimizer.step()
        scheduler.step()


# --------------------------------------------------------------------------- distributed


def test_two_process_cpu_run_with_accelerate(tmp_path):
    """Data-parallel training on CPU (gloo) through `accelerate launch`, reloading the best checkpoint."""
    corpus = write_tiny_corpus(tmp_path / "corpus")
    recipe = tiny_recipe(
        corpus, tmp_path / "out", max_steps=4, max_tokens_per_batch=120, load_best_model_at_end=True,
        metric_for_best_model="loss", greater_is_better=True,  # the worse checkpoint: best is not last
    )  # fmt: skip
    recipe = write_recipe(tmp_path / "recipe.yaml", recipe)  # token batches: each process its own share
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    # --multi_gpu selects the torchrun launcher; with use_cpu (set by the recipe) the processes join a gloo group.
    command = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--mixed_precision", "no", "--dynamo_backend", "no", str(TRAIN_SCRIPT), str(recipe)]
    result = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), cwd=REPO_ROOT, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["training"]["world_size"] == 2
    assert results["train"]["distributed_type"] == "MULTI_CPU"
    assert results["train"]["global_step"] == 4
    # every process reloads the best checkpoint (one left with its last weights would translate its
    # share of the test split with those)
    assert "Could not locate the best model" not in result.stdout + result.stderr
    assert Path(results["train"]["best_checkpoint"]).parent == tmp_path / "out"
    assert results["training"]["max_tokens_per_batch"] == 120 and results["train"]["batches_per_epoch"] > 4
    assert "bleu" in results["test"]
    assert result.stdout.count("Model, tokenizer, card") == 1  # only the main process reports


# --------------------------------------------------------------------------- Hub upload


_BLOCKED_LOAD = (
    BLOCK_PACKAGE
    + """
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

folder = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
assert not any(name.startswith("hf_graphtf") for name in sys.modules)
batch = tokenizer(["El rey dijo pan."], return_tensors="pt")
print(type(model).__name__, model.config.attention_link, len(model.generate(**batch, max_new_tokens=4)[0]))
"""
)


def test_push_to_hub_uploads_a_folder_that_loads_without_the_package(tmp_path, monkeypatch):
    from huggingface_hub import HfApi, RepoUrl
    from huggingface_hub.utils import filter_repo_objects

    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = repo_id
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, *, repo_id, folder_path, ignore_patterns=None, allow_patterns=None, **kwargs):
        calls["upload_folder"] = repo_id
        uploaded = tmp_path / "uploaded"
        files = [p.relative_to(folder_path).as_posix() for p in Path(folder_path).rglob("*") if p.is_file()]
        for name in filter_repo_objects(files, allow_patterns=allow_patterns, ignore_patterns=ignore_patterns):
            (uploaded / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path(folder_path) / name, uploaded / name)

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    args = _args(tmp_path, push_to_hub=True, hub_model_id="someone/tiny-al", max_steps=2, eval_strategy="no")
    run_translation(*args)

    assert calls == {"create_repo": "someone/tiny-al", "upload_folder": "someone/tiny-al"}
    uploaded = tmp_path / "uploaded"
    names = {p.relative_to(uploaded).as_posix() for p in uploaded.rglob("*") if p.is_file()}
    expected = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    expected |= {"README.md", "results.json", "configuration.py", "modeling_marian.py"}
    assert expected <= names
    assert not any(name.startswith("checkpoint-") for name in names)
    assert not set(names) & set(HUB_IGNORE_PATTERNS)
    assert (tmp_path / "out" / RUN_ATTENTION_FILE).is_file() and RUN_ATTENTION_FILE not in names
    card = (uploaded / "README.md").read_text(encoding="utf-8")
    assert 'from_pretrained("someone/tiny-al", trust_remote_code=True)' in card

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in subprocess_env().items() if k != "PYTHONPATH"}
    env["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    result = subprocess.run(
        [sys.executable, "-c", _BLOCKED_LOAD, str(uploaded)], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[:2] == ["GraphMarianMTModel", "both"]


def test_a_recipe_that_names_no_beam_size_trains_and_decodes_greedily(tmp_path):
    """Transformers 5 leaves the generation config's num_beams unset: nothing may compare it with 1."""
    corpus = write_tiny_corpus(tmp_path / "corpus")
    recipe = tiny_recipe(corpus, tmp_path / "out", max_steps=2)
    del recipe["generation_num_beams"]
    assert "test_num_beams" not in recipe
    results = run_translation(*parse_recipe_args([str(write_recipe(tmp_path / "minimal.yaml", recipe))]))
    assert results["train"]["global_step"] == 2 and "bleu" in results["test"]
    saved = json.loads((tmp_path / "out" / "generation_config.json").read_text(encoding="utf-8"))
    assert saved.get("num_beams", 1) == 1


def test_a_rerun_before_any_checkpoint_reuses_the_saved_tokenizer_and_says_what_it_does(tmp_path, capsys):
    """Off a terminal the slow first steps announce themselves; a rerun into the same folder with no
    checkpoint yet (a run stopped while loading) does not train the tokenizer again, unless the data differ."""
    corpus = write_tiny_corpus(tmp_path / "corpus")
    recipe = tiny_recipe(corpus, tmp_path / "out", max_steps=1, do_eval=False, do_predict=False, save_strategy="no")
    recipe.pop("eval_strategy")
    path = write_recipe(tmp_path / "recipe.yaml", recipe)
    run_translation(*parse_recipe_args([str(path)]))
    err = capsys.readouterr().err
    assert "[hf-graphtf] loading the corpus" in err and "training a unigram tokenizer of up to 300 pieces on 64" in err
    # the toy corpus holds fewer pieces than asked for: said, with the count that came out
    pieces = len(AutoTokenizer.from_pretrained(tmp_path / "out"))
    assert pieces < 300 and f"the tokenizer has {pieces} pieces: all that 64 pairs hold" in err
    saved = (tmp_path / "out" / "tokenizer.json").read_bytes()
    run_translation(*parse_recipe_args([str(path)]))
    assert "using the tokenizer saved in" in capsys.readouterr().err
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == saved
    run_translation(*parse_recipe_args([str(path), "--vocab_size", "200"]))
    assert "tokenizer of up to 200 pieces" in capsys.readouterr().err


def test_the_evaluate_metric_loads_from_its_folder_and_gives_the_runs_scores(tmp_path_factory, monkeypatch):
    """`evaluate.load` of the package's metric folder (offline, as a user or the Hub would load it) gives
    the scores a training run wrote: BLEU, chrF, chrF++, Moses-tokenized BLEU, with one or two references."""
    import evaluate
    import sacrebleu

    from hf_graphtf.translation_scores import METRIC_PATH

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    metric = evaluate.load(METRIC_PATH)
    trained = trained_tiny_model(tmp_path_factory)
    hypotheses = (trained.output_dir / "test_predictions.txt").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in (trained.corpus / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    single = [row["translation"]["en"] for row in rows]
    scores = metric.compute(predictions=hypotheses, references=single, tgt_lang="en")
    test = trained.results["test"]
    for key in ("bleu", "chrf", "chrf_pp", "bleu_tokenized", "bleu_signature"):
        assert scores[key] == test[key], key
    assert scores["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [single]).score, 2)
    multi = [
        [row["translation"]["en"], *[r for r in row["references"]["en"] if r != row["translation"]["en"]]]
        for row in rows
    ]
    both = metric.compute(predictions=hypotheses, references=multi, tokenized=False)
    assert both["bleu"] == trained.results["test_multi_reference"]["bleu"] and "bleu_tokenized" not in both


def test_sentences_cut_to_the_maximum_lengths_are_counted_and_said(tmp_path, capsys):
    """Truncation is what every Transformers training script does; here it is not silent. Each split's cut
    sources and targets are counted against a re-tokenization of the raw text, said in one line before
    training, and kept in results.json."""
    corpus = write_tiny_corpus(tmp_path / "corpus")
    recipe = {**tiny_recipe(corpus, tmp_path / "out", max_steps=1, eval_steps=1, save_steps=1), "max_target_length": 6}
    run_translation(*parse_recipe_args([str(write_recipe(tmp_path / "recipe.yaml", recipe))]))
    err = capsys.readouterr().err
    cuts = json.loads((tmp_path / "out" / "results.json").read_text())["data"]["cut_to_max_length"]

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    for role, split in (("train", "train"), ("validation", "valid"), ("test", "test")):
        lines = [json.loads(line) for line in (corpus / f"{split}.jsonl").read_text().splitlines()]
        targets = [len(tokenizer(text_target=line["translation"]["en"])["input_ids"]) for line in lines]
        sources = [len(tokenizer(line["translation"]["es"])["input_ids"]) for line in lines]
        expected = {"pairs": len(lines), "sources": sum(n > 32 for n in sources)}
        expected["targets"] = sum(n > 6 for n in targets)
        assert cuts[role] == expected and expected["targets"] > 0, role
        assert f"{role}: of {len(lines)} pairs, {expected['targets']} targets longer than max_target_length (6)" in err
    assert "sources longer than" not in err  # none is longer than 32 tokens
    assert "(validation BLEU compares translations with the cut references)" in err
    assert "(only the test loss sees it: test BLEU uses the whole references)" in err


def test_evaluation_sources_that_occur_in_the_training_split_are_counted_and_said(tmp_path, capsys):
    """A user's corpus whose test split repeats training sentences scores memory; the run says so and keeps
    the counts. Case and spacing aside, as the Bible builders' deduplication compares sources."""
    corpus = write_tiny_corpus(tmp_path / "corpus")
    train = [json.loads(line) for line in (corpus / "train.jsonl").read_text().splitlines()]
    test = [json.loads(line) for line in (corpus / "test.jsonl").read_text().splitlines()]
    test[2]["translation"]["es"] = train[5]["translation"]["es"].upper().replace(" ", "  ")  # a repeat
    test[4]["translation"]["es"] = train[9]["translation"]["es"]
    (corpus / "test.jsonl").write_text("".join(json.dumps(record) + "\n" for record in test))
    recipe = tiny_recipe(corpus, tmp_path / "out", max_steps=1, eval_steps=1, save_steps=1)
    run_translation(*parse_recipe_args([str(write_recipe(tmp_path / "recipe.yaml", recipe))]))
    err = capsys.readouterr().err
    data = json.loads((tmp_path / "out" / "results.json").read_text())["data"]
    assert data["sources_also_in_train"] == {"validation": 0, "test": 2}
    assert f"test: 2 of {len(test)} sources also occur in the training split" in err
    assert "validation: 0 of" not in err


def test_the_final_validation_reuses_the_best_checkpoints_evaluation():
    """With load_best_model_at_end the model training ends with is the best checkpoint's, evaluated at its step
    already: the run reports that evaluation instead of running it again (a LoRA run, merged since, and a run
    without a best checkpoint evaluate again)."""
    from types import SimpleNamespace

    from hf_graphtf.training.recipe import best_checkpoint_evaluation

    history = [
        {"step": 2, "epoch": 1.0, "eval_loss": 3.0, "eval_bleu": 5.0},
        {"step": 4, "epoch": 2.0, "eval_loss": 2.0, "eval_bleu": 7.5, "eval_runtime": 1.2},
        {"step": 4, "epoch": 2.0, "loss": 2.5},
    ]
    state = SimpleNamespace(log_history=history, best_model_checkpoint="out/checkpoint-4")
    trainer = SimpleNamespace(state=state, args=SimpleNamespace(load_best_model_at_end=True))
    assert best_checkpoint_evaluation(trainer, adapted=False) == {
        "eval_loss": 2.0,
        "eval_bleu": 7.5,
        "eval_runtime": 1.2,
        "epoch": 2.0,
    }
    assert best_checkpoint_evaluation(trainer, adapted=True) is None
    state.best_model_checkpoint = None
    assert best_checkpoint_evaluation(trainer, adapted=False) is None
