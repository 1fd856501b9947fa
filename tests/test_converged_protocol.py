"""The converged protocol: training until validation BLEU stops improving, the speed flags, dropout tuning.

A run stops on a validation plateau and says so, the test split is translated by the best checkpoint,
a resumed run stops at the step an uninterrupted one stops at, nothing of it reads a clock, bf16 runs
give finite losses and the same checkpoint format as fp32 ones, and a grid tunes its baseline first.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from recipe_fixtures import (
    REPO_ROOT,
    one_thread,  # noqa: F401  (autouse fixture)
    tiny_recipe,
    write_recipe,
    write_tiny_corpus,
)
from safetensors.torch import load_file

from hf_graphtf.tokenization import train_joint_tokenizer
from hf_graphtf.training import parse_recipe_args, run_translation
from hf_graphtf.training.precision import (
    BF16_CPU_ATTENTION,
    EmulatedPrecisionWarning,
    cpu_has_bf16,
    resolve_attention,
    resolve_precision,
)
from hf_graphtf.training.resume import STOP_REASONS

EXPERIMENTS = REPO_ROOT / "recipes" / "experiments"


def _cell_of(row: dict) -> dict:
    """A synthetic results row with its cell (variant, size, seed) read from its run name where the test
    leaves them out, as every row the runner writes has them."""
    variant, size, seed = row["run"].split("-")[:3]
    return {"variant": variant, "size": size, "seed": int(seed.removeprefix("seed")), **row}


def _typed(experiments, row: dict):
    """A synthetic row as the grid reads it (`Row`); run name and cell made up where the test sets none."""
    fields = {"run": f"{row.get('variant', 'vanilla')}-10k-seed{row.get('seed', 1)}", "grid": "g", **row}
    return experiments["rows"].Row.from_json(_cell_of(fields))


def _run(tmp_path: Path, name: str, **overrides):
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


def test_a_run_stops_on_a_plateau_and_translates_with_its_best_checkpoint(tmp_path):
    results = _run(tmp_path, "plateau")
    train = results["train"]
    # the first evaluation is the best; three more without improvement end it, far below the cap
    assert train["stop_reason"] == "validation plateau" == STOP_REASONS[0]
    assert (train["best_step"], train["global_step"]) == (1, 4)
    assert train["train_minutes"] > 0 and train["precision"] == "fp32"
    assert [step for step, _ in train["validation_bleu"]] == [1, 2, 3, 4]
    software = results["software"]  # what a rerun must match, as the grid rows record it
    assert software["packages"]["torch"] == torch.__version__ and software["packages"]["transformers"]
    assert software["commit"] is None or len(software["commit"]) == 40
    # the saved model (which translated the test split) is the best checkpoint's, not the last step's
    best = load_file(tmp_path / "plateau" / "checkpoint-1" / "model.safetensors")
    final = load_file(tmp_path / "plateau" / "model.safetensors")
    assert all(torch.equal(best[key], final[key]) for key in best)
    last = load_file(tmp_path / "plateau" / "checkpoint-4" / "model.safetensors")
    assert not all(torch.equal(best[key], last[key]) for key in best)


def test_a_resumed_run_stops_at_the_step_of_an_uninterrupted_one(tmp_path, experiments):
    straight = _run(tmp_path, "straight")["train"]
    # interrupted after step 2, one evaluation into its patience: the counter must come back with it
    _run(tmp_path, "resumed", max_steps=2)

    # the runner says where it stands before it resumes it
    def run_in(folder: str):
        return experiments["grid"].Run("vanilla", "small", 1, tmp_path / "resumed.yaml", {}, tmp_path / folder)

    state = experiments["run_grid"].resume_state(run_in("resumed"))
    best = json.loads((tmp_path / "resumed" / "checkpoint-2" / "trainer_state.json").read_text())["best_metric"]
    assert state == f"resumes from step 2, best validation loss {best} at step 1, 1 of 3 evaluations without a new best"
    # its learning curve so far, as the uninterrupted run's first two evaluations (the runner's view of it)
    progress = run_in("resumed").progress()
    assert [list(point) for point in progress.validation_bleu] == [list(p) for p in straight["validation_bleu"][:2]]
    (tmp_path / "empty").mkdir()
    assert experiments["run_grid"].resume_state(run_in("empty")).startswith("starts over")
    resumed = _run(tmp_path, "resumed")["train"]
    assert resumed["resumed_from_checkpoint"].endswith("checkpoint-2")
    assert_same_stop_and_model(tmp_path, "straight", straight, "resumed", resumed)


def test_the_page_shows_finished_runs_only_and_prices_every_run_left_in_full(tmp_path, experiments):
    """A run with a checkpoint but no row is not on the page: the progress paragraph counts finished runs
    only and the cost of the runs left prices it in full (where it stands is the runner's log). The
    longest run's price is named only while the tuning has not chosen (it prices nothing after)."""
    import shutil

    sections = experiments["sections"]
    grid = _tuning_grid(tmp_path / "grid", experiments, values=[0.1, 0.2])
    for value, bleu in ((0.1, 22.0), (0.2, 21.0)):
        row = {
            "grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "variant": "vanilla", "size": "small",
            "seed": 1, "valid": {"bleu": bleu}, "test": {"bleu": bleu + 3}, "steps": 5000, "best_step": 3000,
            "stop_reason": "validation plateau", "train_minutes": 80.0, "tuning": {"field": "dropout", "value": value},
            "output_dir": str(tmp_path / "absent"),
        }  # fmt: skip
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(_cell_of(row)) + "\n")
        if value == 0.1:  # before the tuning has chosen, the runs waiting for it cost the longest run
            assert "longest finished run (80 minutes)" in " ".join(
                sections.stopping_section(grid, grid.finished_rows())
            )
    rows = grid.finished_rows()
    assert "longest finished run" not in " ".join(sections.stopping_section(grid, rows))  # none left that it prices
    before = (sections.progress_section(grid, rows), sections.stopping_section(grid, rows))
    _run(tmp_path, "cut", max_steps=2)
    shutil.copytree(tmp_path / "cut", grid.output_root / "al_both-small-seed1")  # a run under way here
    assert (sections.progress_section(grid, rows), sections.stopping_section(grid, rows)) == before
    (paragraph, _) = sections.progress_section(grid, rows)
    assert paragraph.startswith("**Partial:** 2 of the grid's") and "finished runs only" in paragraph
    still = next(line for line in sections.stopping_section(grid, rows) if line.startswith("Still to run"))
    assert "seed 1: 1 run, about" in still and "seed 2: 2 runs, about" in still and "under way" not in still
    assert "hours of training (on a 2-core machine, one run at a time;" in still  # no CPU recorded: none named
    # the price names the hosts that measured the finished runs' minutes, never the machine the page is
    # written on (a committed page reads the same wherever it is regenerated); a grid can move between
    # hosts part-way, and then the price names both, with a caution
    there = {"model": "AMD EPYC", "kernels": "AVX512", "float_fingerprint": "9165e1b8bbc6a2dd"}
    other = {"model": "Intel Xeon", "kernels": "AVX512", "float_fingerprint": "f2666768cd6a4ba4"}
    moved = [dataclasses.replace(row, provenance={"cpu": there}) for row in rows]
    older = {"model": "AMD EPYC", "kernels": "AVX512"}  # a record from before the fingerprint: the same host
    for same in (moved, [dataclasses.replace(moved[0], provenance={"cpu": older}), *moved[1:]]):
        still = next(line for line in sections.stopping_section(grid, same) if line.startswith("Still to run"))
        assert ("hours of training (on a 2-core machine like the one the finished runs' minutes were measured on, "
                "AMD EPYC AVX512 (float fingerprint 9165e1b8bbc6a2dd), one run at a time;") in still  # fmt: skip
        assert "this machine" not in " ".join(sections.stopping_section(grid, same))  # never the writer's host
    mixed = [dataclasses.replace(row, provenance={"cpu": other}) for row in moved[:1]] + moved[1:]
    still = next(line for line in sections.stopping_section(grid, mixed) if line.startswith("Still to run"))
    assert ("(on a 2-core machine; minutes measured on Intel Xeon AVX512 (float fingerprint f2666768cd6a4ba4) and "
            "AMD EPYC AVX512 (float fingerprint 9165e1b8bbc6a2dd) price them, and the hosts' minutes differ, "
            "one run at a time;") in still  # fmt: skip
    assert "this machine" not in " ".join(sections.stopping_section(grid, mixed))


def test_the_page_names_how_each_run_trained_when_the_runs_compared_did_not_train_alike(experiments):
    """The ny-en grid moved hosts between its tuning runs: bf16 with eager attention on an AVX-512 host,
    then fp32 with sdpa on an AVX2 one. The stopping section names each group of runs; runs alike (a row
    without a host record agrees with any, an older row's kernel is sdpa) get no paragraph."""
    avx512 = {"model": "AMD EPYC", "kernels": "AVX512", "float_fingerprint": "9165e1b8bbc6a2dd"}
    avx2 = {"model": "AMD EPYC", "kernels": "AVX2", "float_fingerprint": "6594d707a4ccb641"}

    def row(run: str, precision: str | None, kernel: str | None, cpu: dict | None):
        fields = {"run": run, "precision": precision, "attn_implementation": kernel}
        return _typed(experiments, {**fields, "provenance": {"cpu": cpu} if cpu else None})

    differ = experiments["sections"]._conditions_differ
    tuned = [
        row("vanilla-10k-seed1-dropout0.3", "bf16", "eager", avx512),
        row("vanilla-10k-seed1-dropout0.4", None, "sdpa", avx2),
    ]
    (_, paragraph) = differ(tuned)
    assert paragraph.startswith(
        "The runs did not all train alike: bf16 with eager attention on AMD EPYC AVX512 (float fingerprint "
        "9165e1b8bbc6a2dd): vanilla-10k-seed1-dropout0.3; fp32 with sdpa attention on AMD EPYC AVX2 (float "
        "fingerprint 6594d707a4ccb641): vanilla-10k-seed1-dropout0.4."
    )
    assert "as a change of seed does" in paragraph
    older = row("al_both-10k-seed1", "bf16", None, None)  # no host record, kernel unrecorded (sdpa then)
    assert (
        differ(
            [
                row("vanilla-10k-seed1", "bf16", "sdpa", avx512),
                older,
                row("al_both-10k-seed2", "bf16", "sdpa", {"model": "AMD EPYC"}),
            ]
        )
        == []
    )
    (_, host_only) = differ(
        [row("vanilla-10k-seed1", "bf16", "sdpa", avx512), row("vanilla-10k-seed2", "bf16", "sdpa", avx2), older]
    )
    assert "bf16 with sdpa attention on host unrecorded: al_both-10k-seed1" in host_only
    unprinted = row("al_both-10k-seed2", "bf16", "sdpa", {"model": "AMD EPYC", "kernels": "AVX2"})  # no fingerprint
    (_, merged) = differ(
        [row("vanilla-10k-seed1", "bf16", "sdpa", avx512), row("vanilla-10k-seed2", "bf16", "sdpa", avx2), unprinted]
    )
    assert "AMD EPYC AVX2 (float fingerprint 6594d707a4ccb641): vanilla-10k-seed2, al_both-10k-seed2" in merged
    assert (
        differ([row("vanilla-10k-seed1", "bf16", "sdpa", avx512), row("vanilla-10k-seed2", "bf16", "eager", avx512)])
        != []
    )


def test_the_minutes_panel_names_the_runs_from_another_host_than_vanillas(experiments):
    """A grid that moved between hosts part-way: a variant's run from another machine than vanilla's
    run of its seed is named in the minutes panel, counted when only some of its runs are."""
    there = {"model": "AMD EPYC", "kernels": "AVX512", "float_fingerprint": "9165e1b8bbc6a2dd"}
    here = {"model": "Intel Xeon", "kernels": "AVX512", "float_fingerprint": "f2666768cd6a4ba4"}

    def row(seed: int, cpu: dict):
        return _typed(experiments, {"seed": seed, "device": "cpu", "provenance": {"cpu": cpu}})

    rows_by = {
        ("vanilla", "10k"): [row(1, there), row(2, here)],
        ("al_both", "10k"): [row(1, there), row(2, here)],
        ("graph_half_gate", "10k"): [row(1, here), row(2, here)],
        ("graph_self_gate", "10k"): [row(1, here)],
        ("graph_self_gate", "full"): [row(1, here)],
    }
    assert experiments["figures"].minutes_elsewhere(rows_by, "10k") == {
        "graph_half_gate": "graph_half_gate: another host than vanilla's (1 of 2 runs), minutes not comparable",
        "graph_self_gate": "graph_self_gate: another host than vanilla's, minutes not comparable",
    }
    assert experiments["figures"].minutes_elsewhere(rows_by, "full") == {}  # no vanilla there to compare with
    assert experiments["figures"].minutes_elsewhere({("vanilla", "10k"): [row(1, there)]}, "10k") == {}


def test_the_step_cap_is_named_when_it_ends_a_run(tmp_path):
    train = _run(tmp_path, "capped", early_stopping_patience=50, max_steps=3)["train"]
    assert train["stop_reason"] == "step cap" and train["global_step"] == 3


def test_the_stopping_step_does_not_depend_on_the_clock(tmp_path, monkeypatch):
    """A machine busy with other work makes every step slower: early stopping and the checkpoint kept
    must come out the same (no budget, so the training clock only counts)."""
    import time

    straight = _run(tmp_path, "straight")["train"]
    real = time.monotonic
    slow = {"offset": 0.0}

    def slower() -> float:
        slow["offset"] += 7.0
        return real() + slow["offset"]

    monkeypatch.setattr(time, "monotonic", slower)
    busy = _run(tmp_path, "busy")["train"]
    assert_same_stop_and_model(tmp_path, "straight", straight, "busy", busy)


def test_bf16_training_gives_finite_losses_and_the_fp32_checkpoint_format(tmp_path):
    last = {"early_stopping_patience": None, "load_best_model_at_end": False, "max_steps": 3}
    _run(tmp_path, "fp32", precision="fp32", **last)
    bf16 = _run(tmp_path, "bf16", precision="bf16", **last)
    assert bf16["train"]["precision"] == "bf16" and bf16["training"]["precision"] == "bf16"
    assert torch.isfinite(torch.tensor(bf16["train"]["train_loss"]))
    assert torch.isfinite(torch.tensor(bf16["eval"]["eval_loss"]))
    a = load_file(tmp_path / "fp32" / "model.safetensors")
    b = load_file(tmp_path / "bf16" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(b[key].dtype == a[key].dtype == torch.float32 and b[key].shape == a[key].shape for key in a)
    assert not all(torch.equal(a[key], b[key]) for key in a)  # bf16 autocast did run


@pytest.mark.slow
def test_torch_compile_training_gives_finite_losses_and_the_same_checkpoint_format(tmp_path):
    last = {"early_stopping_patience": None, "load_best_model_at_end": False, "max_steps": 2}
    _run(tmp_path, "plain", **last)
    compiled = _run(tmp_path, "compiled", torch_compile=True, **last)
    assert torch.isfinite(torch.tensor(compiled["train"]["train_loss"]))
    a = load_file(tmp_path / "plain" / "model.safetensors")
    b = load_file(tmp_path / "compiled" / "model.safetensors")
    assert a.keys() == b.keys()


def _cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / f"cpuinfo-{len(list(tmp_path.glob('cpuinfo-*')))}"  # one file per CPU, all kept
    path.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse2 {flags}\n", encoding="utf-8")
    return path


def test_auto_precision_takes_bf16_only_on_a_cpu_with_bf16_instructions(tmp_path):
    with_bf16 = _cpuinfo(tmp_path, "avx2 avx512f avx512_bf16")
    assert cpu_has_bf16(with_bf16) and resolve_precision("auto", use_cpu=True, cpuinfo=with_bf16) == "bf16"
    avx2 = _cpuinfo(tmp_path, "avx2 fma")
    assert not cpu_has_bf16(avx2) and resolve_precision("auto", use_cpu=True, cpuinfo=avx2) == "fp32"
    with pytest.warns(EmulatedPrecisionWarning, match="0.05x the speed of fp32"):
        assert resolve_precision("bf16", use_cpu=True, cpuinfo=avx2) == "bf16"  # asked for: kept, and warned
    assert not cpu_has_bf16(tmp_path / "absent")  # not Linux: no flags, fp32
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing said where bf16 is native, on a GPU, or where flags are unknown
        assert resolve_precision("bf16", use_cpu=True, cpuinfo=with_bf16) == "bf16"
        assert resolve_precision("bf16", use_cpu=False, cpuinfo=avx2) == "bf16"
        assert resolve_precision("bf16", use_cpu=True, cpuinfo=tmp_path / "absent") == "bf16"
        assert resolve_precision("fp32", use_cpu=True, cpuinfo=avx2) == "fp32"
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp8", use_cpu=True)


def test_auto_attention_takes_the_measured_kernel_for_bf16_on_each_cpu_kind(tmp_path):
    """bf16 on a CPU with AMX or with avx512_bf16 alone trains with eager attention (SDPA's CPU flash backward
    was the slow part on both); sdpa for fp32, on a GPU, and where asked."""
    amx = _cpuinfo(tmp_path, "avx512f avx512_bf16 amx_bf16 amx_tile")
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=amx) == "eager" == BF16_CPU_ATTENTION["amx_bf16"]
    avx512 = _cpuinfo(tmp_path, "avx512f avx512_bf16")
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512) == "eager"
    assert BF16_CPU_ATTENTION["avx512_bf16"] == "eager"
    assert resolve_attention("auto", "fp32", on_cpu=True, cpuinfo=amx) == "sdpa"
    assert resolve_attention("auto", "bf16", on_cpu=False, cpuinfo=amx) == "sdpa"
    assert resolve_attention("sdpa", "bf16", on_cpu=True, cpuinfo=amx) == "sdpa"  # asked for: kept
    with pytest.raises(ValueError, match="attn_implementation must be one of"):
        resolve_attention("flash", "bf16", on_cpu=True)
    corpus = write_tiny_corpus(tmp_path / "corpus")
    model_args, _, _ = parse_recipe_args([str(write_recipe(tmp_path / "r.yaml", tiny_recipe(corpus, tmp_path / "o")))])
    assert model_args.attn_implementation == "sdpa"  # fp32: resolved when the recipe is read, recorded by the run


def test_auto_attention_keeps_sdpa_for_a_linked_model(tmp_path, monkeypatch):
    """A linked model's sdpa path on a CPU sums materialised scores and does not reach the flash backward
    eager avoids: eager measured no faster for it (1.63x fp32 against sdpa's 1.61x), so ``auto`` keeps sdpa,
    the kernel the link's earlier converged runs trained with; the recipe reader passes the option on."""
    avx512 = _cpuinfo(tmp_path, "avx512f avx512_bf16")
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="both") == "sdpa"
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="decoder") == "sdpa"
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="none") == "eager"
    assert resolve_attention("eager", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="both") == "eager"
    from hf_graphtf.training import precision

    monkeypatch.setattr(precision, "cpu_kind", lambda cpuinfo=None: "avx512_bf16")
    corpus = write_tiny_corpus(tmp_path / "corpus")
    for link, kernel in (("both", "sdpa"), ("none", "eager")):
        recipe = tiny_recipe(corpus, tmp_path / link, precision="bf16", use_cpu=True, attention_link=link)
        model_args, _, _ = parse_recipe_args([str(write_recipe(tmp_path / f"{link}.yaml", recipe))])
        assert (model_args.attn_implementation, model_args.attn_implementation_from_auto) == (kernel, True), link


def test_precision_and_the_trainers_own_flags_agree(tmp_path):
    corpus = write_tiny_corpus(tmp_path / "corpus")
    base = tiny_recipe(corpus, tmp_path / "out")
    _, _, args = parse_recipe_args([str(write_recipe(tmp_path / "a.yaml", {**base, "bf16": True}))])
    assert args.precision == "bf16"  # a Transformers recipe's bf16: true is recorded as such
    _, _, args = parse_recipe_args([str(write_recipe(tmp_path / "b.yaml", base))])
    assert args.precision == "fp32" and not args.bf16
    with pytest.raises(ValueError, match="precision 'fp32' and bf16: true"):
        parse_recipe_args([str(write_recipe(tmp_path / "c.yaml", {**base, "bf16": True, "precision": "fp32"}))])


def _tuning_grid(tmp_path: Path, experiments, seeds: tuple[int, ...] = (1, 2), trains: bool = False, **tuning):
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


def test_a_grid_tunes_its_baseline_first_and_reuses_the_chosen_run(tmp_path, experiments):
    """Tuning runs come first; the others wait; the best validation BLEU picks the value every run then
    uses, and the baseline's seed-1 run is the tuning run at that value (trained once)."""
    grid = _tuning_grid(tmp_path, experiments, trains=True, values=[0.0, 0.3])
    path = grid.path
    grid_module, run_grid = experiments["grid"], experiments["run_grid"]
    before = grid.runs()
    assert [run.name for run in before[:2]] == ["vanilla-small-seed1-dropout0.0", "vanilla-small-seed1-dropout0.3"]
    # vanilla's seed-1 run is one of the tuning runs; every other run waits for the tuned value
    assert all(run.waits_for_tuning for run in before[2:]) and len(before) == 5
    assert run_grid.main([str(path), "--seeds", "1"]) == 0  # tunes, then runs al_both seed 1 at the chosen value
    rows = {row.run: row for row in grid_module.read_results(grid.results)}
    tuned = max((0.0, 0.3), key=lambda v: (rows[f"vanilla-small-seed1-dropout{v}"].valid["bleu"], -v))
    assert grid.tuned_value("small") == tuned
    assert rows["vanilla-small-seed1-dropout0.3"].tuning == {"field": "dropout", "value": 0.3}
    assert rows["al_both-small-seed1"].overrides["dropout"] == tuned
    assert sorted(rows) == sorted(
        ["vanilla-small-seed1-dropout0.0", "vanilla-small-seed1-dropout0.3", "al_both-small-seed1"]
    )
    for row in rows.values():
        assert row.stop_reason == "step cap" and row.precision == "fp32" and row.train_minutes > 0
    cells = [run.name for run in grid.cell_runs()]
    assert f"vanilla-small-seed1-dropout{tuned}" in cells and "vanilla-small-seed2" in cells
    assert len([name for name in cells if "dropout" in name]) == 1
    # a value fixed elsewhere as well as tuned is refused when the grid is read
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec["common"]["dropout"] = 0.1
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(ValueError, match="dropout is tuned, but common also set it"):
        grid_module.Grid.load(path)


def test_the_converged_grid_keeps_the_early_budget_grids_training_and_its_protocol(experiments):
    grid_module = experiments["grid"]
    converged = grid_module.Grid.load(EXPERIMENTS / "grid_bible_cpu_converged.yaml")
    v2 = grid_module.Grid.load(EXPERIMENTS / "grid_bible_cpu_v2.yaml")
    same = ("encoder_layers", "decoder_layers", "vocab_size", "max_tokens_per_batch", "warmup_steps")
    assert {key: converged.common[key] for key in same} == {key: v2.common[key] for key in same}
    assert converged.sizes == {"10k": {"train_split": "train_10k"}}
    common = converged.common
    assert (common["eval_steps"], common["save_steps"], common["early_stopping_patience"]) == (250, 250, 8)
    assert common["max_steps"] >= 40 * 250 and common["test_num_beams"] == 5 and common["precision"] == "auto"
    assert converged.tuning.field == "dropout" and converged.tuning.values == [0.1, 0.2, 0.3]
    assert (converged.tuning.step, converged.tuning.bounds) == (0.1, (0.0, 0.5))
    assert "dropout" not in common and converged.seeds == [1, 2, 3, 4, 5]
    # five seeds for the verdict (vanilla against the paper's link), three for the rest
    assert converged.variant_seeds("vanilla") == converged.variant_seeds("al_both") == [1, 2, 3, 4, 5]
    assert converged.variant_seeds("graph_half_gate") == [1, 2, 3]
    assert common["attn_implementation"] == "sdpa"  # one kernel for the pair's runs
    assert set(converged.variants) == {"vanilla", "al_both", "al_both_cumulative", "graph_half_gate", "graph_self_gate"}
    from hf_graphtf.training.arguments import ARGUMENT_CLASSES

    known = {field for cls in ARGUMENT_CLASSES for field in cls.__dataclass_fields__}
    for run in converged.runs() + converged.tuning_runs("10k"):
        assert set(run.overrides) <= known, set(run.overrides) - known


def test_the_page_prices_a_bf16_run_in_fp32_from_the_measured_ratios(tmp_path, experiments):
    """The stopping section turns the bf16 runs' training and validation minutes into fp32 minutes with
    the speed_flags ratios of the attention kernel each ran with, says which host measured them, and says
    nothing when no run used bf16 or nothing was measured."""
    import json

    speeds = experiments["speeds"]
    measured = tmp_path / "speed_flags.json"
    modes = {
        "fp32": {"speed_vs_fp32": 1.0, "speed_vs_fp32_half_iqr": 0.0, "evaluation_seconds": 30.0},
        "bf16": {"speed_vs_fp32": 1.25, "speed_vs_fp32_half_iqr": 0.1, "evaluation_seconds": 40.0},
        "bf16-eager": {"speed_vs_fp32": 1.6, "speed_vs_fp32_half_iqr": 0.1, "evaluation_seconds": 30.0},
    }
    record = {"command": "python recipes/benchmarks/speed_flags.py --json x", "date": "2026-11-24 08:14 UTC"}
    measured.write_text(json.dumps({**record, "float_fingerprint": "abc", "modes": modes}))
    kernels = {(kernel, kind): (measured, mode) for kernel, mode in (("sdpa", "bf16"), ("eager", "bf16-eager"))
               for kind in ("vanilla", "link")}  # fmt: skip
    host = {"provenance": {"cpu": {"float_fingerprint": "abc"}}}
    rows = [
        _typed(experiments, {"seed": seed, "precision": "bf16", "train_minutes": minutes, **host})
        for seed, minutes in ((1, 80.0), (2, 100.0))
    ]
    validating = {80.0: 8.0, 100.0: None, 50.0: None}  # the second run has no log: all its minutes train
    lines = speeds.without_speed_flags(rows, lambda row: validating[row.train_minutes], kernels)
    (line,) = [line for line in lines if line]
    # (72 x 1.25 + 8 x 0.75 + 100 x 1.25) / 2 = 110.5
    assert "2 bf16 runs took 90 minutes" in line and "would take about 110." in line
    assert "the runs' host" in line and "1.25x ±0.10" in line and "1.33x the time" in line
    # a run with eager attention is priced with eager's ratio, and each kernel's runs are named
    eager = _typed(experiments, {"seed": 3, "precision": "bf16", "train_minutes": 50.0, **host})
    eager = dataclasses.replace(eager, attn_implementation="eager")
    sdpa_line, eager_line = [
        line
        for line in speeds.without_speed_flags([*rows, eager], lambda row: validating[row.train_minutes], kernels)
        if line
    ]
    assert "2 bf16 runs with sdpa attention took 90 minutes" in sdpa_line and "about 110." in sdpa_line
    assert "1 bf16 run with eager attention took 50 minutes" in eager_line and "it would take about 80." in eager_line
    # a linked run is priced with the linked model's measurement, and the page says which runs are which
    link_record = tmp_path / "speed_flags_link.json"
    link_modes = {**modes, "bf16": {**modes["bf16"], "speed_vs_fp32": 1.6}}
    link_record.write_text(json.dumps({**record, "float_fingerprint": "abc", "modes": link_modes}))
    linked_run = dataclasses.replace(rows[1], options={"attention_link": "both"})
    plain_line, link_line = [
        line
        for line in speeds.without_speed_flags(
            [rows[0], linked_run],
            lambda row: validating[row.train_minutes],
            {**kernels, ("sdpa", "link"): (link_record, "bf16")},
        )
        if line
    ]
    assert "1 bf16 run without the link took 80 minutes" in plain_line and "about 96." in plain_line
    assert "1 bf16 run with the attention link took 100 minutes" in link_line and "about 160." in link_line
    assert "with sdpa attention" not in plain_line + link_line  # one kernel: not named
    # a graph variant whose own model was measured is priced with that; one that was not, as vanilla
    graph_record = tmp_path / "speed_flags_graph_half_gate.json"
    graph_modes = {**modes, "bf16": {**modes["bf16"], "speed_vs_fp32": 1.1}}
    graph_record.write_text(json.dumps({**record, "float_fingerprint": "abc", "modes": graph_modes}))
    graph_run = dataclasses.replace(rows[1], variant="graph_half_gate", options={"graph_attention": True})
    unmeasured = dataclasses.replace(rows[1], variant="graph_sum", options={"graph_attention": True})
    graph_kernels = {**kernels, ("sdpa", "graph_half_gate"): (graph_record, "bf16")}
    vanilla_line, graph_line = [
        line
        for line in speeds.without_speed_flags(
            [rows[0], unmeasured, graph_run], lambda row: validating[row.train_minutes], graph_kernels
        )
        if line
    ]
    assert "2 bf16 runs of the other variants took 90 minutes" in vanilla_line and "about 110." in vanilla_line
    vanilla_only = [line for line in speeds.without_speed_flags([rows[0], graph_run], lambda row: None, graph_kernels)]
    assert "1 bf16 run of vanilla took 80 minutes" in vanilla_only[1]
    assert "1 bf16 run of graph_half_gate took 100 minutes" in graph_line and "about 110." in graph_line
    other = [dataclasses.replace(row, provenance={"cpu": {"float_fingerprint": "def"}}) for row in rows]
    assert "host abc" in speeds.without_speed_flags(other, lambda row: None, kernels)[1]
    fp32 = [dataclasses.replace(row, precision="fp32") for row in rows]
    assert speeds.without_speed_flags(fp32, lambda row: None, kernels) == []
    absent = {("sdpa", "vanilla"): (tmp_path / "absent.json", "bf16")}
    assert speeds.without_speed_flags(rows, lambda row: None, absent) == []


def _finish(grid, run: str, bleu: float = 0.0, minutes: float = 1.0) -> list[dict]:
    """Append a finished run's row, as the runner would; the grid's rows after it."""
    row = {"grid": grid.name, "run": run, "train_minutes": minutes, "valid": {"bleu": bleu}}
    with grid.results.open("a", encoding="utf-8") as results:
        results.write(json.dumps(_cell_of(row)) + "\n")
    return grid.finished_rows()


def test_the_page_prices_the_runs_left_at_the_finished_runs_most_like_them(tmp_path, experiments):
    """Before the tuning has chosen, every run left costs the longest finished run; afterwards a variant
    with no run yet costs vanilla's run at the chosen value, and one with runs costs their mean; each seed
    is priced apart, so the page can say what the next seeds cost."""
    speeds = experiments["speeds"]
    grid = _tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
    assert speeds.remaining_minutes(grid, []) is None
    # runs left: dropout 0.2, al_both seed 1, vanilla and al_both seed 2, all at the longest finished run
    rows = _finish(grid, "vanilla-small-seed1-dropout0.1", bleu=22.0, minutes=80.0)
    assert speeds.remaining_minutes(grid, rows) == ({1: (2, 160.0), 2: (2, 160.0)}, 80.0)
    rows = _finish(grid, "vanilla-small-seed1-dropout0.2", bleu=21.0, minutes=100.0)  # 0.1 chosen, 0.2 longer
    assert speeds.remaining_minutes(grid, rows) == ({1: (1, 80.0), 2: (2, 160.0)}, 100.0)
    rows = _finish(grid, "al_both-small-seed1", minutes=130.0)
    assert speeds.remaining_minutes(grid, rows) == ({2: (2, 80.0 + 130.0)}, 130.0)
    rows = _finish(grid, "vanilla-small-seed2", minutes=90.0)
    assert speeds.remaining_minutes(grid, rows) == ({2: (1, 130.0)}, 130.0)
    assert speeds.remaining_minutes(grid, _finish(grid, "al_both-small-seed2", minutes=120.0)) is None


def _early_and_converged(tmp_path, experiments):
    """A converged grid (tuning dropout 0.1, 0.2) that names an early-budget grid of the same variants,
    and a ``finish(grid, variant, seed, test, tag, valid)`` that appends a finished row to either."""
    converged = _tuning_grid(tmp_path / "converged", experiments, values=[0.1, 0.2])
    early_spec = yaml.safe_load(converged.path.read_text(encoding="utf-8"))
    del early_spec["tuning"]
    early_spec.update(name="early", sizes={"small": {"train_split": "train", "max_steps": 600}})
    early_path = tmp_path / "early.yaml"
    early_path.write_text(yaml.safe_dump(early_spec), encoding="utf-8")
    spec = yaml.safe_load(converged.path.read_text(encoding="utf-8"))
    spec.update(common={"early_stopping_patience": 8}, earlier_budgets=[str(early_path)])
    converged.path.write_text(yaml.safe_dump(spec), encoding="utf-8")

    def finish(grid, variant: str, seed: int, test: float, tag: str = "", valid: float = 0.0) -> None:
        run = f"{variant}-small-seed{seed}" + (f"-{tag}" if tag else "")
        row = {
            "grid": grid.name, "run": run, "variant": variant, "size": "small", "seed": seed,
            "valid": {"bleu": valid}, "test": {"bleu": test}, "parameters": 100 if variant == "vanilla" else 110,
            "device": "cpu", "target_tokens_per_second": 1000.0, "output_dir": str(tmp_path / "absent" / run),
        }  # fmt: skip
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(_cell_of(row)) + "\n")

    grid_class = experiments["grid"].Grid
    return grid_class.load(early_path), grid_class.load(converged.path), finish


def test_the_glance_table_sets_the_converged_cell_beside_the_early_budgets(tmp_path, experiments):
    """The README's table: a column per budget, the converged one last, each Δ over the seeds both
    vanilla and the variant have (a variant's seed whose vanilla has not finished stays out), vanilla's
    converged cell the tuning run at the chosen value, not the run that tuned worse."""
    comparisons = experiments["comparisons"]
    early, converged, finish = _early_and_converged(tmp_path, experiments)
    for seed, (base, link) in {1: (20.0, 21.0), 2: (21.0, 23.0)}.items():
        finish(early, "vanilla", seed, base)
        finish(early, "al_both", seed, link)
    finish(converged, "vanilla", 1, 40.0, tag="dropout0.1", valid=22.0)  # tuned worse: not the cell
    finish(converged, "vanilla", 1, 25.0, tag="dropout0.2", valid=24.0)
    finish(converged, "al_both", 1, 28.0)
    finish(converged, "al_both", 2, 35.0)  # vanilla's seed 2 has not finished: no pair for it
    header, _, al_both = comparisons.budgets_table([early, converged], ("vanilla", "al_both"))
    assert header.split(" | ")[1:3] == ["Δ BLEU, full train set, 600 steps", "Δ BLEU, full train set, to a plateau"]
    # Δ +1 and +2: mean 1.5, sd 0.707, t(0.975, 1 df) 12.706: 1.5 -+ 12.706 * 0.707 / sqrt(2) = 6.353
    assert al_both.split(" | ")[1:4] == ["+1.50 (n=2, 95% CI -4.85 to +7.85)", "+3.00 (n=1)", "+10%"]


def test_another_language_pair_gets_its_columns_once_its_vanilla_cell_has_finished(tmp_path, experiments):
    """A grid named in ``other_pairs`` (the same protocol on ny-en) adds its columns after the grid's own
    pair's, every column then led by its pair; before its vanilla cell finishes it adds nothing, so the
    table and the README's text read as they did."""
    comparisons, report = experiments["comparisons"], experiments["report"]
    early, converged, finish = _early_and_converged(tmp_path, experiments)
    other_spec = yaml.safe_load(converged.path.read_text(encoding="utf-8"))
    del other_spec["tuning"], other_spec["earlier_budgets"]
    other_spec.update(name="other_pair", results=str(tmp_path / "other.jsonl"))
    other_spec["common"].update(src_lang="ny", tgt_lang="en")
    other_path = tmp_path / "other.yaml"
    other_path.write_text(yaml.safe_dump(other_spec), encoding="utf-8")
    spec = yaml.safe_load(converged.path.read_text(encoding="utf-8"))
    converged.path.write_text(yaml.safe_dump({**spec, "other_pairs": [str(other_path)]}), encoding="utf-8")
    grid_class = experiments["grid"].Grid
    converged, other = grid_class.load(converged.path), grid_class.load(other_path)
    assert (converged.pair, other.pair, converged.other_pairs) == ("es-en", "ny-en", [str(other_path)])
    finish(converged, "vanilla", 1, 25.0, tag="dropout0.2", valid=24.0)
    finish(converged, "vanilla", 1, 20.0, tag="dropout0.1", valid=20.0)
    finish(converged, "al_both", 1, 26.0)
    finish(other, "al_both", 1, 12.0)  # no vanilla cell on ny-en yet: no column, no pair in the labels
    header, _, row = comparisons.budgets_table([converged, other], ("vanilla", "al_both"))
    assert header.split(" | ")[1] == "Δ BLEU, full train set, to a plateau" and row.split(" | ")[1] == "+1.00 (n=1)"
    finish(other, "vanilla", 1, 10.0)
    header, _, row = comparisons.budgets_table([converged, other], ("vanilla", "al_both"))
    labels = ["Δ BLEU, es-en full train set, to a plateau", "Δ BLEU, ny-en full train set, to a plateau"]
    assert header.split(" | ")[1:3] == labels and row.split(" | ")[1:3] == ["+1.00 (n=1)", "+2.00 (n=1)"]
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.GLANCE_START}\n{report.GLANCE_END}\nrest\n", encoding="utf-8")
    comparisons._BUDGETS.clear()  # the report's once-per-run cache of the table
    report.update_readme_glance(readme, converged)
    text = readme.read_text(encoding="utf-8")
    assert "Bible es-en and ny-en test splits (the same chapters in each)" in text and labels[1] in text


def test_a_one_seed_delta_is_set_beside_the_seed_to_seed_spread_of_the_earlier_budgets(tmp_path, experiments):
    """Under a table with a one-seed Δ, the note gives each variant's largest standard deviation of the
    per-seed Δ where several seeds ran (here Δ +1 and +2: 0.71, at 600 steps); once every cell has
    several seeds only the sentence on the intervals stays."""
    comparisons = experiments["comparisons"]
    early, converged, finish = _early_and_converged(tmp_path, experiments)
    for seed, (base, link) in {1: (20.0, 21.0), 2: (21.0, 23.0)}.items():
        finish(early, "vanilla", seed, base)
        finish(early, "al_both", seed, link)
    finish(converged, "vanilla", 1, 24.0, tag="dropout0.1", valid=22.0)
    finish(converged, "vanilla", 1, 25.0, tag="dropout0.2", valid=24.0)
    finish(converged, "al_both", 1, 28.0)
    (note,) = comparisons.seed_spread_note([early, converged], ("vanilla", "al_both"))
    assert "one seed (n=1)" in note
    assert f"al_both {statistics.stdev([1.0, 2.0]):.2f} (full train set, 600 steps)" in note
    finish(converged, "vanilla", 2, 26.0)
    finish(converged, "al_both", 2, 27.0)
    converged = experiments["grid"].Grid.load(converged.path)
    (note,) = comparisons.seed_spread_note([early, converged], ("vanilla", "al_both"))
    assert "with three seeds it is wide" in note and "one seed (n=1)" not in note


def test_the_seed_interval_is_the_t_interval_of_the_per_seed_differences(experiments):
    """By hand: Δ 0.5, 1.0, 1.5 have mean 1.0 and sd 0.5; t(0.975, 2 df) = 4.3027 (tables); the half-width
    is 4.3027 * 0.5 / sqrt(3) = 1.2421."""
    comparisons = experiments["comparisons"]
    assert [round(comparisons.t_quantile(0.975, df), 3) for df in (1, 2, 4, 30)] == [12.706, 4.303, 2.776, 2.042]
    mean, low, high = comparisons.seed_interval([0.5, 1.0, 1.5])
    assert (round(mean, 4), round(low, 4), round(high, 4)) == (1.0, -0.2421, 2.2421)
    assert comparisons.seed_interval([0.7]) is None


def test_a_tuning_range_grows_while_its_best_value_lies_at_an_edge(tmp_path, experiments):
    """The best at the top edge adds the next value up, the best at the bottom edge the next one down,
    within the bounds; the tuned value is known only once the best lies inside the range or at a bound."""
    grid = _tuning_grid(tmp_path, experiments, values=[0.2, 0.3], extend={"step": 0.1, "bounds": [0.0, 0.5]})
    assert grid.tuning_values("small") == [0.2, 0.3]
    _finish(grid, "vanilla-small-seed1-dropout0.2", 20.0)
    assert grid.tuning_values("small") == [0.2, 0.3]  # not every value has finished
    _finish(grid, "vanilla-small-seed1-dropout0.3", 21.0)
    assert grid.tuning_values("small") == [0.2, 0.3, 0.4] and grid.tuned_value("small") is None
    assert [run.name for run in grid.runs()][:3] == [f"vanilla-small-seed1-dropout{v}" for v in (0.2, 0.3, 0.4)]
    assert all(run.waits_for_tuning for run in grid.runs()[3:])
    _finish(grid, "vanilla-small-seed1-dropout0.4", 22.0)
    _finish(grid, "vanilla-small-seed1-dropout0.5", 23.0)  # at the upper bound: chosen though at the edge
    assert grid.tuning_values("small") == [0.2, 0.3, 0.4, 0.5] and grid.tuned_value("small") == 0.5
    assert grid.tuned_edge_note("small") == (
        "dropout 0.5 is the highest value tried, the highest the grid allows (0-0.5): the best within the "
        "range, not shown to be the best there is"
    )

    low = _tuning_grid(tmp_path / "low", experiments, values=[0.2, 0.3], extend={"step": 0.1, "bounds": [0.1, 0.5]})
    _finish(low, "vanilla-small-seed1-dropout0.2", 21.0)
    _finish(low, "vanilla-small-seed1-dropout0.3", 21.0)  # a tie goes to the first listed: the bottom edge
    assert low.tuning_values("small") == [0.2, 0.3, 0.1] and low.tuned_value("small") is None
    _finish(low, "vanilla-small-seed1-dropout0.1", 20.0)
    assert low.tuned_value("small") == 0.2 and low.tuned_edge_note("small") is None  # inside the range
    assert [run.overrides["dropout"] for run in low.runs() if run.variant == "al_both"] == [0.2, 0.2]

    fixed = _tuning_grid(tmp_path / "fixed", experiments, values=[0.2, 0.3])  # without extend: as listed
    _finish(fixed, "vanilla-small-seed1-dropout0.2", 20.0)
    _finish(fixed, "vanilla-small-seed1-dropout0.3", 21.0)
    assert fixed.tuning_values("small") == [0.2, 0.3] and fixed.tuned_value("small") == 0.3
    assert fixed.tuned_edge_note("small").startswith("dropout 0.3 is the highest value tried, the highest listed:")


def test_the_tuning_table_says_when_the_chosen_value_lies_at_the_ranges_bound(tmp_path, experiments):
    """A value chosen at a bound is the best the grid tried, not a tuned optimum; the page says so under
    the tuning table (and says nothing while the best lies inside the range)."""

    def tuning_table(values: dict[float, float]) -> str:
        path = tmp_path / str(len(values))
        grid = _tuning_grid(path, experiments, values=list(values), extend={"step": 0.1, "bounds": [0.0, 0.5]})
        for value, bleu in values.items():
            row = {
                "grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "valid": {"bleu": bleu},
                "test": {"bleu": bleu + 3}, "steps": 100, "tuning": {"field": "dropout", "value": value},
                "size": "small", "output_dir": str(path / "absent"),
            }  # fmt: skip
            with grid.results.open("a", encoding="utf-8") as results:
                results.write(json.dumps(_cell_of(row)) + "\n")
        return "\n".join(
            experiments["sections"].tuning_section(
                grid, grid.finished_rows(), grid.results.parent / "figures" / grid.name
            )
        )

    at_bound = tuning_table({0.4: 27.0, 0.5: 27.5})
    assert "| small | 0.5 | 27.5 | 30.5 | 100 | – | – | – | yes |" in at_bound and at_bound.rstrip().endswith(
        "small: dropout 0.5 is the highest value tried, the highest the grid allows (0-0.5): the best within "
        "the range, not shown to be the best there is."
    )
    inside = tuning_table({0.3: 26.0, 0.4: 27.5, 0.5: 27.0})
    assert "| small | 0.4 | 27.5 | 30.5 | 100 | – | – | – | yes |" in inside and "not shown" not in inside


def test_the_tuning_section_says_why_the_range_is_what_it_is(tmp_path, experiments):
    """A grid that leaves out values a reader would expect says why under its tuning heading (the ny-en
    grid tunes only 0.3 and 0.4, for what es-en showed); a misspelt key or an empty reason is refused
    when the grid is read, not dropped."""
    reason = "Only 0.3 and 0.4: on es-en 0.5 ran into the step cap"
    grid = _tuning_grid(tmp_path, experiments, values=[0.3, 0.4], range_reason=reason)
    assert grid.tuning.range_reason == reason
    section = experiments["sections"].tuning_section(grid, [], tmp_path / "figures")
    intro = section[2]
    assert intro.endswith(f" {reason}.") and intro.count(reason) == 1
    plain = _tuning_grid(tmp_path / "plain", experiments, values=[0.3, 0.4])
    assert "step cap" not in experiments["sections"].tuning_section(plain, [], tmp_path / "figures")[2]
    with pytest.raises(ValueError, match=r"unknown keys \['range_reasons'\]"):
        _tuning_grid(tmp_path / "typo", experiments, values=[0.3, 0.4], range_reasons=reason)
    with pytest.raises(ValueError, match="range_reason must be a sentence"):
        _tuning_grid(tmp_path / "empty", experiments, values=[0.3, 0.4], range_reason=" ")


def test_a_tuning_run_cut_off_before_its_plateau_is_named_under_the_tuning_table(tmp_path, experiments):
    """A tuning run that reached the step cap still improving has a best that is a floor: the value
    chosen over it is not shown to beat it, and the page and the runner's Tuning line say so; a chosen
    value whose run was cut off means the baseline had not converged. Plateau stops say nothing."""
    grid = _tuning_grid(tmp_path, experiments, values=[0.3, 0.4], extend={"step": 0.1, "bounds": [0.0, 0.5]})
    stops = {0.3: ("validation plateau", 26.0), 0.4: ("validation plateau", 27.4), 0.5: ("step cap", 20.5)}
    for value, (reason, bleu) in stops.items():
        row = {
            "grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "valid": {"bleu": bleu},
            "test": {"bleu": bleu + 3}, "steps": 40000, "stop_reason": reason, "size": "small",
            "tuning": {"field": "dropout", "value": value}, "output_dir": str(tmp_path / "absent"),
        }  # fmt: skip
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(_cell_of(row)) + "\n")
    note = (
        "dropout 0.5 stopped at the step cap (step 40,000), not on a validation plateau: its validation BLEU "
        "20.5 is where it had got to, not where it would level off, so dropout 0.4 is chosen over it without "
        "0.5 shown to stay below it"
    )
    assert grid.tuned_value("small") == 0.4 and grid.tuned_unconverged_note("small") == note
    assert f"small: {note}." in experiments["sections"].tuning_section(
        grid, grid.finished_rows(), grid.results.parent / "figures" / grid.name
    )
    assert note in experiments["run_grid"]._tuning_state(grid)

    plateau = _tuning_grid(tmp_path / "plateau", experiments, values=[0.3, 0.4])
    capped = _tuning_grid(tmp_path / "capped", experiments, values=[0.3, 0.4])
    for grid, reason in ((plateau, "validation plateau"), (capped, "step cap")):
        for value, bleu in ((0.3, 26.0), (0.4, 27.4)):
            row = {"grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "valid": {"bleu": bleu},
                   "steps": 40000, "stop_reason": reason if value == 0.4 else "validation plateau"}  # fmt: skip
            with grid.results.open("a", encoding="utf-8") as results:
                results.write(json.dumps(_cell_of(row)) + "\n")
    assert plateau.tuned_unconverged_note("small") is None
    assert capped.tuned_unconverged_note("small") == (
        "dropout 0.4 stopped at the step cap (step 40,000), not on a validation plateau: the chosen value's "
        "run, the comparison's baseline, had not converged"
    )


@pytest.mark.parametrize(
    ("extend", "message"),
    [
        ({"step": 0.1}, "takes step and bounds"),
        ({"step": 0, "bounds": [0.0, 0.5]}, "step must be a positive number"),
        ({"step": 0.1, "bounds": [0.5, 0.0]}, r"bounds must be \[lowest, highest\]"),
        ({"step": 0.1, "bounds": [0.3, 0.5]}, r"values \[0.2\] lie outside"),
    ],
)
def test_a_tuning_extension_that_cannot_work_is_refused_when_the_grid_is_read(tmp_path, experiments, extend, message):
    with pytest.raises(ValueError, match=message):
        _tuning_grid(tmp_path, experiments, values=[0.2, 0.3], extend=extend)


def test_the_runner_grows_the_tuning_range_then_runs_the_variants_at_the_tuned_value(tmp_path, experiments, capsys):
    """Dropout 0.0 already in, below any trained run: the runner trains 0.1, finds the best at the top
    edge, trains the next value up, and once the best lies inside the range (or at the bound), the
    variants at that value, in one command."""
    extend = {"step": 0.1, "bounds": [0.0, 0.5]}
    grid = _tuning_grid(tmp_path, experiments, seeds=(1,), trains=True, values=[0.0, 0.1], extend=extend)
    path = grid.path
    _finish(grid, "vanilla-small-seed1-dropout0.0", -1.0)  # below any BLEU a trained run can reach
    assert experiments["run_grid"].main([str(path)]) == 0
    rows = {row.run: row for row in experiments["grid"].read_results(grid.results)}
    values = grid.tuning_values("small")
    bleu = {value: rows[f"vanilla-small-seed1-dropout{value}"].valid["bleu"] for value in values}
    tuned = grid.tuned_value("small")
    # the range grew until the best (the first listed on a tie) lay inside it or at the upper bound
    assert values[:3] == [0.0, 0.1, 0.2] and values == sorted(values)
    assert tuned == max(values, key=lambda value: (bleu[value], -value)) and (tuned < values[-1] or tuned == 0.5)
    assert rows["al_both-small-seed1"].overrides["dropout"] == tuned
    out = capsys.readouterr().out
    assert "the best dropout lay at the edge of the range, which grows to 0.0, 0.1, 0.2" in out
    assert f"Tuning: dropout {tuned} at small" in out


def test_the_plateau_swing_is_the_evaluations_noise_from_the_best_step_on(tmp_path, experiments):
    """Mean and largest change of validation BLEU between consecutive evaluations, from the best one to
    the stop (the climb before it left out, evaluations in step order), from the archived log; the page's
    stopping table shows it. A run without its log or a best step, or stopped other than on a plateau,
    has none."""
    comparisons = experiments["comparisons"]
    grid = _tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
    row = {
        "grid": grid.name, "run": "vanilla-small-seed1-dropout0.1", "size": "small", "seed": 1,
        "variant": "vanilla", "valid": {"bleu": 21.0}, "test": {"bleu": 24.0}, "steps": 500, "best_step": 200,
        "stop_reason": "validation plateau", "output_dir": str(tmp_path / "absent"),
    }  # fmt: skip
    row = _typed(experiments, row)
    assert comparisons.plateau_swing(grid, row) is None  # no log yet
    climb_and_plateau = {100: 10.0, 200: 21.0, 500: 20.5, 300: 20.0, 400: 20.5}  # logged out of order
    log = [{"step": step, "eval_bleu": bleu} for step, bleu in climb_and_plateau.items()]
    log.insert(1, {"step": 150, "loss": 3.0})  # training entries carry no BLEU
    folder = grid.archive_folder(row.run)
    folder.mkdir(parents=True)
    (folder / "log_history.json").write_text(json.dumps(log), encoding="utf-8")
    # from 200 on: 21.0 -> 20.0 -> 20.5 -> 20.5, changes 1.0, 0.5, 0.0
    assert comparisons.plateau_swing(grid, row) == pytest.approx((0.5, 1.0))
    assert comparisons.plateau_swing(grid, dataclasses.replace(row, best_step=None)) is None
    assert (
        comparisons.plateau_swing(grid, dataclasses.replace(row, stop_reason="step cap")) is None
    )  # no plateau to swing on
    with grid.results.open("a", encoding="utf-8") as results:
        results.write(json.dumps(row.to_json()) + "\n")
    section = "\n".join(experiments["sections"].stopping_section(grid, grid.finished_rows()))
    # no vanilla-by-the-stop for vanilla itself, then the swing
    assert "| vanilla-small-seed1-dropout0.1 | 500 | validation plateau | 200 | 21.0 | – | 0.50 (1.00) | 24.0 |" in (
        section
    )


def test_the_stopping_table_says_where_vanilla_stood_when_a_variant_stopped(tmp_path, experiments):
    """Beside a variant's best validation BLEU, vanilla's best by the step the variant stopped at (vanilla
    of the same size and seed, from its log): what tells a run that levelled off below vanilla from one
    that stopped sooner while ahead. Vanilla's own rows, and a variant whose vanilla has no log, show a
    dash."""
    grid = _tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
    common = {"grid": grid.name, "size": "small", "seed": 1, "stop_reason": "validation plateau",
              "output_dir": str(tmp_path / "absent")}  # fmt: skip
    vanilla = {**common, "run": "vanilla-small-seed1-dropout0.1", "variant": "vanilla", "valid": {"bleu": 27.0},
               "test": {"bleu": 30.0}, "steps": 900, "best_step": 700,
               "tuning": {"field": "dropout", "value": 0.1}}  # fmt: skip
    other = {**vanilla, "run": "vanilla-small-seed1-dropout0.2", "valid": {"bleu": 20.0},
             "tuning": {"field": "dropout", "value": 0.2}}  # fmt: skip
    variant = {**common, "run": "al_both-small-seed1", "variant": "al_both", "valid": {"bleu": 26.5},
               "test": {"bleu": 29.0}, "steps": 500, "best_step": 300}  # fmt: skip
    with grid.results.open("a", encoding="utf-8") as results:
        results.writelines(json.dumps(_cell_of(row)) + "\n" for row in (vanilla, other, variant))

    def cell(run: str) -> str:
        section = experiments["sections"].stopping_section(grid, grid.finished_rows())
        return next(line for line in section if line.startswith(f"| {run} |")).split(" | ")[5]

    assert cell("al_both-small-seed1") == "–"  # vanilla's log not there
    log = [{"step": 250, "eval_bleu": 24.0}, {"step": 500, "eval_bleu": 26.0}, {"step": 500, "loss": 3.0},
           {"step": 750, "eval_bleu": 27.0}, {"step": 400, "eval_bleu": 26.2}]  # fmt: skip
    folder = grid.archive_folder(vanilla["run"])
    folder.mkdir(parents=True)
    (folder / "log_history.json").write_text(json.dumps(log), encoding="utf-8")
    assert cell("al_both-small-seed1") == "26.2"  # the best by step 500, not the last nor vanilla's final 27.0
    assert cell(vanilla["run"]) == "–" and cell(other["run"]) == "–"


def test_a_falling_validation_loss_keeps_a_stalled_run_training(tmp_path):
    """The tiny run above, whose metric only gets worse, stops at step 4; with early_stopping_watch_loss
    each new lowest validation loss resets the patience too, and its loss falls at every evaluation, so
    it trains on to the step cap."""
    train = _run(tmp_path, "watching", early_stopping_watch_loss=True, max_steps=8)["train"]
    state = json.loads((tmp_path / "watching" / "trainer_state.json").read_text(encoding="utf-8"))
    losses = [entry["eval_loss"] for entry in state["log_history"] if "eval_loss" in entry]
    assert len(losses) == 8 and all(later < earlier for earlier, later in zip(losses, losses[1:]))
    assert (train["stop_reason"], train["global_step"], train["best_step"]) == ("step cap", 8, 1)
    saved = state["stateful_callbacks"]["PlateauStopping"]
    assert saved["args"]["watch_loss"] is True and saved["attributes"]["best_eval_loss"] == losses[-1]


@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_the_patience_counts_as_transformers_early_stopping_does(threshold):
    """Without the loss clause the count is Transformers' EarlyStoppingCallback's, evaluation by
    evaluation (its best metric kept as the Trainer keeps it: any improvement, threshold or not)."""
    from transformers import EarlyStoppingCallback

    from hf_graphtf.training.plateau import PatienceCount, PlateauRule

    generator = torch.Generator().manual_seed(0)
    bleu = (torch.rand(200, generator=generator) * 3).cumsum(0) % 7  # climbs, falls back, ties
    bleu = [round(value, 1) for value in bleu.tolist()]
    reference = EarlyStoppingCallback(early_stopping_patience=1000, early_stopping_threshold=threshold)
    args, state = SimpleNamespace(greater_is_better=True), SimpleNamespace(best_metric=None)
    rule, count = PlateauRule(patience=1000, metric_key="eval_bleu", threshold=threshold), PatienceCount()
    for value in bleu:
        reference.check_metric_value(args, state, None, value)
        state.best_metric = value if state.best_metric is None or value > state.best_metric else state.best_metric
        count = rule.count(count, value, 3.0)
        assert count.waited == reference.early_stopping_patience_counter and count.best_metric == state.best_metric


def test_the_loss_clause_resets_the_patience_only_on_a_new_lowest_loss():
    """A BLEU stall with a falling loss never stops; a loss that only returns to its best (a tie) or
    rises does not reset; the stop step replays from a log as the callback counts."""
    from hf_graphtf.training.plateau import PlateauRule

    by_bleu, watching = PlateauRule(3, "eval_bleu"), PlateauRule(3, "eval_bleu", watch_loss=True)

    stall = [
        {"step": 100 * i, "eval_bleu": 1.5 if i == 1 else 1.0, "eval_loss": round(5.0 - 0.1 * i, 2)}
        for i in range(1, 12)
    ]
    assert by_bleu.stop_step(stall) == 400  # BLEU alone: 3 evaluations after the best at 100
    assert watching.stop_step(stall) is None  # the loss fell every time
    # the lowest loss is 4.7 at step 300; 4.7 again at 400 (a tie), then higher: stopped at the third
    flat = [
        *stall[:3],
        *({"step": 400 + 100 * i, "eval_bleu": 1.0, "eval_loss": loss} for i, loss in enumerate([4.7, 4.75, 4.8])),
    ]
    assert watching.stop_step(flat) == 600
    unordered = [flat[i] for i in (5, 0, 3, 1, 4, 2)]  # a log read back out of order replays the same
    assert watching.stop_step(unordered) == 600


def test_the_loss_clause_needs_a_patience(tmp_path):
    recipe = tiny_recipe(tmp_path / "corpus", tmp_path / "out", early_stopping_watch_loss=True)
    with pytest.raises(ValueError, match="early_stopping_watch_loss needs early_stopping_patience"):
        parse_recipe_args([str(write_recipe(tmp_path / "recipe.yaml", recipe))])


def test_the_page_replays_each_stop_under_the_rule_the_grid_writes_now(tmp_path, experiments):
    """A rule changed while a grid runs holds for the rows before it only where their logs stop at the
    steps they stopped at: the page says so, or names the runs whose logs stop elsewhere."""
    grid = _tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
    spec = yaml.safe_load(grid.path.read_text(encoding="utf-8"))
    spec["common"] = {"early_stopping_patience": 3, "early_stopping_watch_loss": True}
    grid.path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    grid = experiments["grid"].Grid.load(grid.path)
    # best BLEU at 100, lowest loss at 200: BLEU alone stops at 400, with the loss clause at 500
    scores = [(2.0, 5.0), (1.0, 4.0), (1.0, 4.5), (1.0, 4.5), (1.0, 4.5)]
    log = [{"step": 100 * i, "eval_bleu": bleu, "eval_loss": loss} for i, (bleu, loss) in enumerate(scores, 1)]

    def finish(value: float, steps: int) -> list[dict]:
        run = f"vanilla-small-seed1-dropout{value}"
        row = {
            "grid": grid.name, "run": run, "size": "small", "seed": 1, "variant": "vanilla",
            "recipe": "recipes/configs/bible_es_en_10k_vanilla.yaml", "valid": {"bleu": 2.0},
            "test": {"bleu": 3.0}, "steps": steps, "best_step": 100, "stop_reason": "validation plateau",
            "tuning": {"field": "dropout", "value": value}, "output_dir": str(tmp_path / "absent"),
        }  # fmt: skip
        folder = grid.archive_folder(run)
        folder.mkdir(parents=True)
        (folder / "log_history.json").write_text(json.dumps(log), encoding="utf-8")
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(_cell_of(row)) + "\n")
        return grid.finished_rows()

    rule = "3 evaluations without a new best validation BLEU or a new lowest validation loss"
    section = "\n".join(experiments["sections"].stopping_section(grid, finish(0.1, 500)))
    assert f"now ({rule}), every plateau stop above happens at the step the run stopped at." in section
    section = "\n".join(experiments["sections"].stopping_section(grid, finish(0.2, 400)))  # stopped by BLEU alone
    assert (
        f"now ({rule}), a run stops elsewhere than it did: vanilla-small-seed1-dropout0.2 (its log stops at 500)."
        in section
    )


def test_the_page_says_how_near_each_run_came_to_stopping_sooner(tmp_path, experiments):
    """The longest stall before a run's last reset of its patience, counted as the grid's rule counts
    (a lower validation loss resets it too), with the step it reached; the final stall that stopped the
    run is not a near miss. The stopping section names each run's."""
    comparisons = experiments["comparisons"]
    grid = _tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
    spec = yaml.safe_load(grid.path.read_text(encoding="utf-8"))
    spec["common"] = {"early_stopping_patience": 4, "early_stopping_watch_loss": True}
    grid.path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    grid = experiments["grid"].Grid.load(grid.path)
    # (BLEU, loss) at steps 100..: a stall of 2 (200, 300), a lower loss at 400 resets it, a stall of 3
    # (500-700), a new best BLEU at 800, then the 4 that stop the run (900-1200)
    scores = [(5.0, 4.0), (4.0, 4.1), (4.5, 4.2), (4.9, 3.9), (4.0, 4.0), (4.1, 4.0), (4.2, 3.95), (6.0, 4.5),
              (5.0, 4.5), (5.5, 4.5), (5.9, 4.5), (5.0, 4.5)]  # fmt: skip
    log = [{"step": 100 * i, "eval_bleu": bleu, "eval_loss": loss} for i, (bleu, loss) in enumerate(scores, 1)]
    row = {
        "grid": grid.name, "run": "vanilla-small-seed1-dropout0.1", "size": "small", "seed": 1, "variant": "vanilla",
        "recipe": "recipes/configs/bible_es_en_10k_vanilla.yaml", "valid": {"bleu": 6.0}, "test": {"bleu": 7.0},
        "steps": 1200, "best_step": 800,
        "stop_reason": "validation plateau", "tuning": {"field": "dropout", "value": 0.1},
        "output_dir": str(tmp_path / "absent"),
    }  # fmt: skip
    row = _typed(experiments, row)
    assert comparisons.longest_stall(grid, row) is None  # no log yet
    folder = grid.archive_folder(row.run)
    folder.mkdir(parents=True)
    (folder / "log_history.json").write_text(json.dumps(log[::-1]), encoding="utf-8")  # any order
    assert comparisons.replayed_stop(grid, row) == 1200
    assert comparisons.longest_stall(grid, row) == (3, 700)
    climbing = [{"step": 100 * i, "eval_bleu": float(i), "eval_loss": 5.0 - i / 10} for i in range(1, 6)]
    (folder / "log_history.json").write_text(json.dumps(climbing), encoding="utf-8")
    assert comparisons.longest_stall(grid, row) == (0, 0)
    (folder / "log_history.json").write_text(json.dumps(log), encoding="utf-8")
    with grid.results.open("a", encoding="utf-8") as results:
        results.write(json.dumps(row.to_json()) + "\n")
    section = " ".join(experiments["sections"].stopping_section(grid, grid.finished_rows()))
    assert (
        "the most evaluations in a row each run went without a new best validation BLEU or a new lowest "
        "validation loss (4 stop a run): vanilla-small-seed1-dropout0.1 3 (to step 700)." in section
    )


def test_a_checkpoint_saved_with_other_stateful_callbacks_resumes(tmp_path):
    """A run resumed from a checkpoint saved before its early stopping watched the loss (the state names
    Transformers' EarlyStoppingCallback, not PlateauStopping) saves its next checkpoints and finishes,
    counting its patience from the log as the rule now says."""
    _run(tmp_path, "older", max_steps=2)
    state_file = tmp_path / "older" / "checkpoint-2" / "trainer_state.json"
    state = json.loads(state_file.read_text(encoding="utf-8"))
    state["stateful_callbacks"]["EarlyStoppingCallback"] = state["stateful_callbacks"].pop("PlateauStopping")
    state_file.write_text(json.dumps(state), encoding="utf-8")
    train = _run(tmp_path, "older", max_steps=6, early_stopping_watch_loss=True)["train"]
    assert train["resumed_from_checkpoint"].endswith("checkpoint-2")
    assert (train["global_step"], train["stop_reason"]) == (6, "step cap")  # the loss fell: no plateau


def test_runs_named_in_an_order_run_in_that_order_and_dry_run_lists_them_so(tmp_path, experiments, monkeypatch, capsys):
    """``--runs`` queues named runs in the order given (the converged grid's: the link's seed 2, vanilla's
    seed 3, the link's seed 3), not the grid's seed-major order; an unknown name is refused."""
    run_grid = experiments["run_grid"]
    recipes = {name: f"recipes/configs/bible_es_en_10k_{name}.yaml" for name in ("vanilla", "al_both")}
    spec = {
        "name": "ordered",
        "results": str(tmp_path / "results.jsonl"),
        "output_root": str(tmp_path / "outputs"),
        "seeds": [1, 2, 3],
        "common": {},
        "sizes": {"10k": {"train_split": "train_10k"}},
        "variants": {name: {"recipe": recipe} for name, recipe in recipes.items()},
    }
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    order = ["al_both-10k-seed2", "vanilla-10k-seed3", "al_both-10k-seed3"]
    assert run_grid.main([str(path), "--runs", ",".join(order), "--dry-run"]) == 0
    listed = [line.split(": ")[0].split("] ")[1] for line in capsys.readouterr().out.splitlines()]
    assert listed == order

    started = []

    class Failed:  # each run "fails" at once: the runner starts no new one after, so jobs=3 starts all three
        def __init__(self, run):
            self.run = run

        def poll(self):
            return 1

        def wait(self):
            return 1

    monkeypatch.setattr(run_grid, "missing_corpora", lambda grid, runs: [])
    monkeypatch.setattr(
        run_grid._Running, "start", classmethod(lambda cls, run, processes: started.append(run.name) or Failed(run))
    )
    assert run_grid.main([str(path), "--runs", ",".join(order), "--jobs", "3"]) == 1
    assert started == order
    with pytest.raises(SystemExit):
        run_grid.main([str(path), "--runs", "al_both-10k-seed9"])
    assert "unknown runs ['al_both-10k-seed9']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_grid.main([str(path), "--runs", order[0], "--seeds", "2"])
