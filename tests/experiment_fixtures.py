"""Helpers of the experiment tests: a tiny grid file, tiny runs that stop on a plateau, synthetic result rows,
a tuning grid."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml
from recipe_fixtures import (
    REPO_ROOT,
    tiny_recipe,
    write_recipe,
    write_tiny_corpus,
)
from safetensors.torch import load_file

from hf_graphtf.tokenization import train_joint_tokenizer
from hf_graphtf.training import parse_recipe_args, run_translation

EXPERIMENTS = REPO_ROOT / "recipes" / "experiments"


def cell_of(row: dict) -> dict:
    """A synthetic results row with its cell (variant, size, seed) read from its run name where the test
    leaves them out, as every row the runner writes has them."""
    variant, size, seed = row["run"].split("-")[:3]
    return {"variant": variant, "size": size, "seed": int(seed.removeprefix("seed")), **row}


def typed_row(experiments, row: dict):
    """A synthetic row as the grid reads it (`Row`); run name and cell made up where the test sets none."""
    fields = {"run": f"{row.get('variant', 'vanilla')}-10k-seed{row.get('seed', 1)}", "grid": "g", **row}
    return experiments["rows"].Row.from_json(cell_of(fields))


def plateau_run(tmp_path: Path, name: str, **overrides):
    """A tiny run evaluated every step whose "best" metric only gets worse: the validation loss, which
    falls step by step here, with greater_is_better. The first evaluation is then the best and patience 3
    stops the run at step 4, whatever the translations."""
    corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 64, "valid": 8, "test": 8})
    tokenizer = tmp_path / "tokenizer"
    if not tokenizer.is_dir():
        lines = [json.loads(line)["translation"] for line in (corpus / "train.jsonl").read_text().splitlines()]
        texts = [pair[side] for pair in lines for side in ("es", "en")]
        train_joint_tokenizer(texts, src_lang="es", tgt_lang="en", vocab_size=300, output_dir=tokenizer)
    recipe = tiny_recipe(
        corpus, tmp_path / name, max_tokens_per_batch=120, dropout=0.0, eval_steps=1, save_steps=1,
        save_total_limit=2, load_best_model_at_end=True, metric_for_best_model="loss", greater_is_better=True,
        early_stopping_patience=3, max_steps=30, test_num_beams=2,
        tokenizer_name_or_path=str(tokenizer),
    )  # fmt: skip
    recipe.update(overrides)
    return run_translation(*parse_recipe_args([str(write_recipe(tmp_path / f"{name}.yaml", recipe))]))


def assert_same_stop_and_model(base: Path, name: str, train: dict, other_name: str, other: dict) -> None:
    """Two runs stopped at the same step, for the same reason, with the same best step and the same saved
    model, bit for bit."""
    keys = ("global_step", "best_step", "stop_reason")
    assert [other[key] for key in keys] == [train[key] for key in keys]
    a = load_file(base / name / "model.safetensors")
    b = load_file(base / other_name / "model.safetensors")
    assert all(torch.equal(a[key], b[key]) for key in a)


def tuning_grid(tmp_path: Path, experiments, seeds: tuple[int, ...] = (1, 2), trains: bool = False, **tuning):
    """A grid of vanilla and al_both that tunes vanilla's dropout as ``tuning`` says. With ``trains``,
    its runs are tiny ones of two steps on a tiny corpus, for the runner; without, it names the
    committed recipes and its results file is written by hand, so that any validation BLEU can be set."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    common: dict = {}
    recipes = {name: f"recipes/configs/bible_es_en_10k_{name}.yaml" for name in ("vanilla", "al_both")}
    if trains:
        corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 64, "valid": 8, "test": 8})
        links = {"vanilla": "none", "al_both": "both"}
        recipes = {
            name: str(
                write_recipe(tmp_path / f"{name}.yaml", tiny_recipe(corpus, tmp_path / "unused", attention_link=link))
            )
            for name, link in links.items()
        }
        common = {"eval_steps": 1, "save_steps": 1, "max_steps": 2}
    spec = {
        "name": "tuned",
        "results": str(tmp_path / "results.jsonl"),
        "output_root": str(tmp_path / "outputs"),
        "seeds": list(seeds),
        "common": common,
        "sizes": {"small": {"train_split": "train"}},
        "tuning": {"variant": "vanilla", "field": "dropout", "seed": 1, **tuning},
        "variants": {name: {"recipe": recipe} for name, recipe in recipes.items()},
    }
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return experiments["grid"].Grid.load(path)


def finish_run(grid, run: str, bleu: float = 0.0, minutes: float = 1.0) -> list[dict]:
    """Append a finished run's row, as the runner would; the grid's rows after it."""
    row = {"grid": grid.name, "run": run, "train_minutes": minutes, "valid": {"bleu": bleu}}
    with grid.results.open("a", encoding="utf-8") as results:
        results.write(json.dumps(cell_of(row)) + "\n")
    return grid.finished_rows()


def early_and_converged(tmp_path, experiments):
    """A converged grid (tuning dropout 0.1, 0.2) that names an early-budget grid of the same variants,
    and a ``finish(grid, variant, seed, test, tag, valid, **fields)`` that appends a finished row to either."""
    converged = tuning_grid(tmp_path / "converged", experiments, values=[0.1, 0.2])
    early_spec = yaml.safe_load(converged.path.read_text(encoding="utf-8"))
    del early_spec["tuning"]
    early_spec.update(name="early", sizes={"small": {"train_split": "train", "max_steps": 600}})
    early_path = tmp_path / "early.yaml"
    early_path.write_text(yaml.safe_dump(early_spec), encoding="utf-8")
    spec = yaml.safe_load(converged.path.read_text(encoding="utf-8"))
    spec.update(common={"early_stopping_patience": 8}, earlier_budgets=[str(early_path)])
    converged.path.write_text(yaml.safe_dump(spec), encoding="utf-8")

    def finish(grid, variant: str, seed: int, test: float, tag: str = "", valid: float = 0.0, **fields) -> None:
        run = f"{variant}-small-seed{seed}" + (f"-{tag}" if tag else "")
        row = {
            "grid": grid.name, "run": run, "variant": variant, "size": "small", "seed": seed,
            "valid": {"bleu": valid}, "test": {"bleu": test, "bleu_tokenized": test},
            "parameters": 100 if variant == "vanilla" else 110,
            "device": "cpu", "target_tokens_per_second": 1000.0, "output_dir": str(tmp_path / "absent" / run),
            **fields,
        }  # fmt: skip
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(cell_of(row)) + "\n")

    grid_class = experiments["grid"].Grid
    return grid_class.load(early_path), grid_class.load(converged.path), finish


def write_grid(base: Path, seeds=(1, 2)) -> Path:
    corpus = write_tiny_corpus(base / "corpus", {"train": 64, "valid": 8, "test": 8})
    recipes = {
        "vanilla": write_recipe(base / "vanilla.yaml", tiny_recipe(corpus, base / "unused", attention_link="none")),
        "al_both": write_recipe(base / "al_both.yaml", tiny_recipe(corpus, base / "unused")),
        "graph_gate": write_recipe(
            base / "graph_gate.yaml", tiny_recipe(corpus, base / "unused", attention_link="none", graph_attention=True)
        ),
    }
    grid = {
        "name": "tiny",
        "results": str(base / "results" / "results.jsonl"),
        "output_root": str(base / "outputs"),
        "seeds": list(seeds),
        "common": {"eval_steps": 1, "save_steps": 1, "test_num_beams": 2},
        "sizes": {"small": {"train_split": "train", "max_steps": 2}},
        "variants": {name: {"recipe": str(path)} for name, path in recipes.items()},
        "core": ["vanilla", "al_both"],
        "tables": [
            {"title": "Attention link", "variants": ["vanilla", "al_both"]},
            {"title": "Graph-group attention", "variants": ["vanilla", "graph_gate"], "cost": True},
        ],
        "figures": {"gates": ["graph_gate"], "entropy": ["vanilla", "al_both"]},
    }
    path = base / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def record_failed_starts(run_grid, monkeypatch) -> list[str]:
    """Replace the runner's process start with a run that "fails" at once (exit 1), so that nothing trains
    and nothing is written; returns the list the names of the runs it was asked to start go to, in order."""
    started: list[str] = []

    class Failed:
        def __init__(self, run):
            self.run = run

        def poll(self):
            return 1

        def wait(self):
            return 1

    monkeypatch.setattr(
        run_grid._Running, "start", classmethod(lambda cls, run, processes: started.append(run.name) or Failed(run))
    )
    return started
