"""The experiment grid runner and its report on a tiny grid (tiny models, two steps, a tiny corpus).

The figures and numbers themselves come from real runs (recipes/experiments/RESULTS_<grid>.md), never from here.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from experiment_fixtures import cell_of, record_failed_starts, write_grid
from recipe_fixtures import REPO_ROOT, TRAIN_SCRIPT, run_python, write_recipe

from hf_graphtf.machine import float_fingerprint

EXPERIMENTS = REPO_ROOT / "recipes" / "experiments"


@pytest.fixture(scope="module")
def finished_grid(tmp_path_factory, experiments):
    """The tiny grid run once; the al_both seed-1 run first interrupted after one step (resumed by the grid)."""
    base = tmp_path_factory.mktemp("grid")
    path = write_grid(base)
    grid = experiments["grid"].Grid.load(path)
    interrupted = next(run for run in grid.runs() if run.name == "al_both-small-seed1")
    overrides = {**interrupted.overrides, "max_steps": 1}
    recipe = write_recipe(base / "interrupted.yaml", {**yaml.safe_load(interrupted.recipe.read_text()), **overrides})
    assert run_python(str(TRAIN_SCRIPT), str(recipe), "--do_predict", "false").returncode == 0
    assert (interrupted.output_dir / "checkpoint-1").is_dir()
    assert experiments["run_grid"].main([str(path)]) == 0
    return grid, path


def test_every_run_appends_one_complete_row(finished_grid, experiments):
    grid, _ = finished_grid
    rows = experiments["grid"].read_results(grid.results)
    assert sorted(row.run for row in rows) == sorted(
        f"{variant}-small-seed{seed}" for variant in ("vanilla", "al_both", "graph_gate") for seed in (1, 2)
    )
    assert [row.seed for row in rows[:3]] == [1, 1, 1]  # seed-major order
    for row in rows:
        assert row.steps == 2 and row.device.startswith("cpu") and row.parameters > 0
        assert row.target_tokens_per_second > 0 and row.wall_seconds > 0
        # the training process's CPU time comes back with its exit status (it is busy for most of its run)
        assert 0.2 * row.wall_seconds < row.cpu_seconds and row.cores_used <= os.cpu_count() + 0.1
        test = row.test
        for key in ("bleu", "chrf", "chrf_pp", "bleu_tokenized"):
            assert isinstance(test[key], float), key
        assert "nrefs:1" in test["bleu_signature"] and "nw:2" in test["chrf_pp_signature"]
        # the translations and training log the report needs are kept beside the results file
        archived = grid.archive_folder(row.run)
        assert Path(row.hypotheses) == archived / "test_predictions.txt.gz"
        output = grid.output_root / row.run
        translations = (output / "test_predictions.txt").read_bytes()
        assert gzip.decompress((archived / "test_predictions.txt.gz").read_bytes()) == translations
        log = json.loads((output / "trainer_state.json").read_text(encoding="utf-8"))["log_history"]
        assert json.loads((archived / "log_history.json").read_text(encoding="utf-8")) == log
        # what a rerun has to match: code, libraries, corpus content
        provenance = row.provenance
        assert provenance["commit"] is None or len(provenance["commit"]) == 40
        assert provenance["packages"]["torch"].startswith("2.")
        assert set(provenance["corpus_sha256"]) == {"train.jsonl", "valid.jsonl", "test.jsonl"}
        assert provenance["cpu"]["model"] and provenance["cpu"]["kernels"]
        assert provenance["cpu"]["float_fingerprint"] == float_fingerprint()
    assert grid.archive == grid.results.parent / "archive" / "tiny"
    assert {row.options["attention_link"] for row in rows if row.variant == "al_both"} == {"both"}
    assert all(row.options["graph_attention"] for row in rows if row.variant == "graph_gate")


def test_an_interrupted_run_resumes_from_its_checkpoint(finished_grid):
    grid, _ = finished_grid
    log = (grid.output_root / "al_both-small-seed1" / "train.log").read_text(encoding="utf-8")
    assert "Resuming training from" in log and "checkpoint-1" in log


def test_finished_runs_are_skipped(finished_grid, experiments, capsys):
    grid, path = finished_grid
    before = grid.results.read_text(encoding="utf-8")
    assert experiments["run_grid"].main([str(path), "--variants", "core"]) == 0
    assert grid.results.read_text(encoding="utf-8") == before
    assert capsys.readouterr().out.count(": done") == 4


def test_the_report_lists_every_run_with_tables_tests_and_figures(finished_grid, experiments):
    grid, _ = finished_grid
    page = experiments["report"].write_report(grid).read_text(encoding="utf-8")
    rows = experiments["grid"].read_results(grid.results)
    for row in rows:
        assert f"| {row.run} |" in page
        assert f"| {row.wall_seconds} | {row.cores_used} |" in page
    link_table = page.split("## Attention link")[1].split("##")[0]
    al_row = next(line for line in link_table.splitlines() if line.startswith("| al_both |"))
    cells = [cell.strip() for cell in al_row.strip("|").split("|")]
    assert "(n=2)" in cells[1] and float(cells[3]) <= 1.0  # mean ± sd over seeds, bootstrap p-value
    graph_table = page.split("## Graph-group attention")[1].split("##")[0]
    assert "| graph_gate |" in graph_table and " M |" in graph_table  # parameter count column
    figures = grid.results.parent / "figures" / "tiny"
    for name in ("bleu_by_length_small", "learning_curves_small", "gates_small", "entropy_small"):
        assert (figures / f"{name}.png").stat().st_size > 0, name
        assert f"figures/tiny/{name}.png" in page


def test_the_gate_figure_comes_from_a_gated_variant_the_grid_has(experiments):
    """The converged grid has graph_half_gate and graph_self_gate but no plain graph_gate: its page draws
    the gates of the first gated variant it has, and a grid without one draws none."""
    gate_variant = experiments["figures"].gate_variant
    grid = experiments["grid"].Grid.load(EXPERIMENTS / "grid_bible_cpu_v2.yaml")  # gates: graph_gate first
    row = [{"seed": 1}]
    assert gate_variant(grid, {("graph_self_gate", "10k"): row, ("graph_half_gate", "10k"): row}, "10k") == (
        "graph_half_gate"
    )
    assert gate_variant(grid, {("graph_half_gate", "10k"): row, ("graph_gate", "10k"): row}, "10k") == "graph_gate"
    assert gate_variant(grid, {("graph_half_gate", "full"): row, ("vanilla", "10k"): row}, "10k") is None


@pytest.mark.parametrize("name", ["grid_bible_cpu_v2.yaml", "grid_bible_gpu.yaml"])
def test_every_variant_of_a_grid_gets_its_own_line_style(experiments, name):
    """Vanilla, the line every figure is read against, is black; no two variants share a style, also
    past the ten colours of the cycle (the committed grids have eleven variants)."""
    grid = experiments["grid"].Grid.load(EXPERIMENTS / name)
    variants = list(grid.variants) + [f"extra_{index}" for index in range(12)]
    styles = experiments["figures"].variant_styles(variants)
    assert set(styles) == set(variants)
    assert styles["vanilla"]["color"] == "black"
    looks = {(style["color"], style["linestyle"]) for style in styles.values()}
    assert len(looks) == len(variants)


def test_the_mean_learning_curve_averages_the_steps_every_seed_reached(experiments):
    curves = [
        [(100, 1.0, 2.0), (200, 2.0, 6.0), (300, 3.0, 9.0)],
        [(100, 3.0, 4.0), (200, 6.0, 8.0)],  # stopped early: step 300 is not averaged
    ]
    assert experiments["figures"].mean_learning_curve(curves) == [(100, 2.0, 3.0), (200, 4.0, 7.0)]


def test_each_grid_writes_its_own_page(finished_grid, experiments, tmp_path):
    """Two grids beside one results file (a CPU grid and its rerun, or the GPU grid) keep both pages."""
    grid, path = finished_grid
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    other_path = tmp_path / "other.yaml"
    other_path.write_text(yaml.safe_dump({**spec, "name": "tiny_rerun"}), encoding="utf-8")
    other = experiments["grid"].Grid.load(other_path)
    page = experiments["report"].write_report(grid, analysis=False)
    assert page == grid.results.parent / "RESULTS_tiny.md"
    before = page.read_text(encoding="utf-8")
    other_page = experiments["report"].write_report(other, analysis=False)  # no rows of its own yet
    empty = other_page.read_text(encoding="utf-8")
    assert other_page == grid.results.parent / "RESULTS_tiny_rerun.md" and "(0 runs;" in empty
    # no cell yet: the comparisons say so in words, not as a table of headers without rows
    assert empty.count("No run of these variants has finished yet.") == 2 and "| variant |\n|---|\n" not in empty
    assert "## Figures\n\nNone yet." in empty
    assert page.read_text(encoding="utf-8") == before and "No run of these variants" not in before


def test_a_page_drawn_part_way_says_how_much_of_the_grid_has_run(finished_grid, experiments, tmp_path):
    """A grid takes many sittings; its page drawn in between must not read as the whole comparison."""
    grid, path = finished_grid
    report = experiments["report"]
    assert "**Partial:**" not in report.write_report(grid, analysis=False).read_text(encoding="utf-8")
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec["results"] = str(tmp_path / "results.jsonl")
    spec["seeds"] = [1, 2, 3]  # a third seed nobody has run yet
    shutil.copy(grid.results, tmp_path / "results.jsonl")
    shutil.copytree(grid.archive, tmp_path / "archive" / "tiny")
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(yaml.safe_dump(spec), encoding="utf-8")
    page = report.write_report(experiments["grid"].Grid.load(bigger), analysis=False).read_text(encoding="utf-8")
    assert "**Partial:** 6 of the grid's 9 runs have finished (small: 6 of 9)." in page


def test_a_run_under_way_stays_off_the_page(finished_grid, experiments, tmp_path):
    """A converged run trains over several sittings: a page drawn in between shows the finished runs only,
    the same page as without the run's checkpoint (where the run stands is the runner's log)."""
    grid, path = finished_grid
    report = experiments["report"]
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec.update(results=str(tmp_path / "results.jsonl"), output_root=str(tmp_path / "outputs"), seeds=[1, 2, 3])
    shutil.copy(grid.results, tmp_path / "results.jsonl")
    shutil.copytree(grid.archive, tmp_path / "archive" / "tiny")
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(yaml.safe_dump(spec), encoding="utf-8")
    without = report.write_report(experiments["grid"].Grid.load(bigger), analysis=False).read_text(encoding="utf-8")
    training = tmp_path / "outputs" / "al_both-small-seed3"
    shutil.copytree(grid.output_root / "al_both-small-seed2" / "checkpoint-2", training / "checkpoint-2")
    page = report.write_report(experiments["grid"].Grid.load(bigger), analysis=False).read_text(encoding="utf-8")
    assert page == without and "al_both-small-seed3" not in page and "Under way" not in page
    assert "![learning_curves_small](figures/tiny/learning_curves_small.png)" in page


def as_rows(experiments, rows_by: dict) -> dict:
    """Synthetic rows by (variant, size), each a dict of the fields a test sets, typed as the grid reads them."""
    row = experiments["rows"].Row.from_json
    return {
        (variant, size): [
            row(
                {
                    "run": f"{variant}-{size}-seed{fields['seed']}",
                    "grid": "g",
                    "variant": variant,
                    "size": size,
                    **fields,
                }
            )
            for fields in rows
        ]
        for (variant, size), rows in rows_by.items()
    }


def test_the_speed_ratio_pairs_runs_by_seed_and_takes_the_median(experiments):
    """A seed that shared the cores, or a vanilla run made in a faster sitting, must not decide the
    ratio: each run is compared with vanilla's run of its seed, and the median over pairs is shown with
    their range. Fastest over fastest would give 1600 / 2400 = 0.67 here."""
    rows_by = as_rows(
        experiments,
        {
            ("vanilla", "10k"): [
                {"seed": 1, "target_tokens_per_second": 2000.0},
                {"seed": 2, "target_tokens_per_second": 1300.0},  # shared the cores
                {"seed": 3, "target_tokens_per_second": 2400.0},  # a faster sitting than its variant runs
            ],
            ("graph_gate", "10k"): [
                {"seed": 1, "target_tokens_per_second": 1600.0},
                {"seed": 2, "target_tokens_per_second": 1200.0},
                {"seed": 3, "target_tokens_per_second": 1200.0},
            ],
            ("graph_gate", "full"): [{"seed": 1, "target_tokens_per_second": 900.0}],  # no vanilla at full
            ("graph_half_gate", "10k"): [{"seed": 2, "target_tokens_per_second": 1040.0}],
            ("graph_self_gate", "10k"): [{"seed": 4, "target_tokens_per_second": 1000.0}],  # no vanilla seed 4
        },
    )
    speed_ratio = experiments["speeds"].speed_ratio
    assert speed_ratio(rows_by, "graph_gate", ["10k", "full"]) == "0.80 (0.50-0.92)"
    assert speed_ratio(rows_by, "graph_half_gate", ["10k"]) == "0.80"  # one pair: no range
    assert speed_ratio(rows_by, "vanilla", ["10k"]) == "1.00"
    assert speed_ratio(rows_by, "graph_self_gate", ["10k"]) == "–"
    assert speed_ratio(rows_by, "graph_sum", ["10k"]) == "–"


def test_the_speed_ratio_pairs_only_runs_made_on_the_same_machine(experiments):
    """A grid can span hosts and settings: a pair whose CPU records disagree, or whose device, --jobs setting,
    precision or attention kernel differ, is left out, while rows without a CPU record (older rows) still
    pair; the learning curves' minutes panel says which runs such a pair leaves out."""
    avx2 = {"cpu": {"model": "AMD EPYC", "kernels": "AVX2", "float_fingerprint": "a"}}
    avx512 = {"cpu": {"model": "AMD EPYC", "kernels": "AVX512", "float_fingerprint": "b"}}
    old_row = {"cpu": {"model": "AMD EPYC", "kernels": "AVX2"}}  # before the fingerprint was recorded
    cpu = "cpu (2 cores, 2 processes; x86_64)"
    rows_by = as_rows(
        experiments,
        {
            ("vanilla", "full"): [
                {"seed": 1, "device": cpu, "provenance": avx2, "target_tokens_per_second": 2000.0},
                {"seed": 2, "device": cpu, "provenance": avx2, "target_tokens_per_second": 1600.0},
                {"seed": 3, "device": cpu, "provenance": old_row, "target_tokens_per_second": 2000.0},
                {"seed": 4, "device": cpu, "target_tokens_per_second": 2000.0},
                {"seed": 5, "device": cpu, "concurrent_runs": 1, "target_tokens_per_second": 2000.0},
                {"seed": 6, "device": cpu, "precision": "bf16", "target_tokens_per_second": 2000.0},
            ],
            ("graph_gate", "full"): [
                {"seed": 1, "device": cpu, "provenance": avx2, "target_tokens_per_second": 1800.0},
                {"seed": 2, "device": cpu, "provenance": avx512, "target_tokens_per_second": 2600.0},  # another host
                {"seed": 3, "device": cpu, "provenance": avx2, "target_tokens_per_second": 1700.0},
                {"seed": 4, "device": "cuda (NVIDIA H200)", "target_tokens_per_second": 90000.0},
                {"seed": 5, "device": cpu, "concurrent_runs": 2, "target_tokens_per_second": 1000.0},
                # the same host and precision, another attention kernel (eager: faster under bf16)
                {
                    "seed": 6,
                    "device": cpu,
                    "precision": "bf16",
                    "attn_implementation": "eager",
                    "target_tokens_per_second": 2600.0,
                },
            ],
        },
    )
    assert experiments["speeds"].speed_ratio(rows_by, "graph_gate", ["full"]) == "0.88 (0.85-0.90)"
    (label,) = experiments["figures"].minutes_elsewhere(rows_by, "full").values()
    assert label == (
        "graph_gate: another host than vanilla's (3 of 6 runs); another precision or attention kernel (1 of 6 "
        "runs), minutes not comparable"
    )
    cells = [experiments["speeds"].device_cell(row) for row in rows_by[("graph_gate", "full")][1:3]]
    assert cells == [f"{cpu}, AMD EPYC AVX512", f"{cpu}, AMD EPYC AVX2"]
    assert experiments["speeds"].device_cell(rows_by[("vanilla", "full")][3]) == cpu


def test_the_speed_ratio_leaves_validation_out_only_where_every_run_can(experiments):
    """Training-step speed (validation passes left out) where every run of both sides has it; else the
    recorded speed for both sides: a ratio never compares one measure with the other."""
    vanilla = [{"seed": 1, "target_tokens_per_second": 2000.0}, {"seed": 2, "target_tokens_per_second": 2000.0}]
    gate = [{"seed": 1, "target_tokens_per_second": 1500.0}, {"seed": 2, "target_tokens_per_second": 1100.0}]
    rows_by = as_rows(experiments, {("vanilla", "10k"): vanilla, ("graph_gate", "10k"): gate})
    alone = {("vanilla", 1): 2500.0, ("graph_gate", 1): 1500.0}  # training-step speeds where the logs give them
    speed_ratio = experiments["speeds"].speed_ratio
    assert speed_ratio(rows_by, "graph_gate", ["10k"], lambda row: alone.get((row.variant, row.seed))) == (
        "0.65 (0.55-0.75)"  # recorded
    )
    alone[("vanilla", 2)], alone[("graph_gate", 2)] = 2000.0, 1000.0
    assert speed_ratio(rows_by, "graph_gate", ["10k"], lambda row: alone.get((row.variant, row.seed))) == (
        "0.55 (0.50-0.60)"  # alone
    )


def test_training_speed_leaves_the_validation_passes_out(finished_grid, experiments):
    """The Trainer's train_runtime includes each validation; the report's training figures subtract the
    logged eval_runtime, and the page shows both speeds. A resumed run's runtime is its last sitting's
    alone while its log keeps the earlier sitting's validations: only its own are subtracted, and its
    speed counts only the steps it trained."""
    grid, _ = finished_grid
    report, run_grid = experiments["report"], experiments["run_grid"]
    page = report.write_report(grid, analysis=False).read_text(encoding="utf-8")
    for row in experiments["grid"].read_results(grid.results):
        resumed = row.resumed_from_step
        assert resumed == (1 if row.run == "al_both-small-seed1" else None)
        log = json.loads((grid.archive_folder(row.run) / "log_history.json").read_text(encoding="utf-8"))
        sitting = [entry for entry in log if entry["step"] > (resumed or 0)]
        validating = sum(entry["eval_runtime"] for entry in sitting if "eval_runtime" in entry)
        runtime = next(entry["train_runtime"] for entry in log if "train_runtime" in entry)
        assert validating > 0 and runtime == pytest.approx(row.train_seconds, abs=0.05)
        assert experiments["speeds"].training_seconds(grid, row) == pytest.approx(runtime - validating)
        output = grid.output_root / row.run
        tokens = run_grid.target_tokens_per_epoch(
            output, str(grid.results.parent.parent / "corpus"), "train", "en", "es"
        )
        trained_epochs = row.epochs * (row.steps - (resumed or 0)) / row.steps
        assert row.target_tokens_per_second == pytest.approx(tokens * trained_epochs / runtime, rel=5e-3)
        speed = experiments["speeds"].training_speed(grid, row)
        assert speed > row.target_tokens_per_second
        assert f"| {row.target_tokens_per_second} | {speed} | {row.wall_seconds} |" in page
        steps, minutes, _ = experiments["figures"].learning_curve(grid, row)[-1]
        trained_steps = row.steps - (resumed or 0)
        assert minutes == pytest.approx(steps * experiments["speeds"].training_seconds(grid, row) / trained_steps / 60)
    assert "| al_both-small-seed1 | cpu" in page and "| 2 (resumed at 1) |" in page


def test_jobs_run_side_by_side_and_a_failed_run_starts_no_more(tmp_path, experiments, capsys):
    """``--jobs 2``: the runs overlap, the parent alone writes rows, and after a failed run the running
    one finishes with its row while the queued one never starts; the command exits 1."""
    path = write_grid(tmp_path, seeds=(1,))
    spec = yaml.safe_load(path.read_text())
    broken = write_recipe(tmp_path / "broken.yaml", {**yaml.safe_load((tmp_path / "vanilla.yaml").read_text())})
    spec["variants"] = {
        "vanilla": spec["variants"]["vanilla"],
        "broken": {"recipe": str(broken), "options": {"dropout": 2.0}},  # refused by the training script
        "al_both": spec["variants"]["al_both"],
    }
    del spec["tables"], spec["figures"]  # the page's default layout: one table of every variant
    path.write_text(yaml.safe_dump(spec, sort_keys=False))  # the runs start in this order
    grid = experiments["grid"].Grid.load(path)
    assert experiments["run_grid"].main([str(path), "--jobs", "2"]) == 1  # a failed run fails the command
    out = capsys.readouterr().out
    assert "vanilla-small-seed1: started" in out and "broken-small-seed1: started" in out
    assert "broken-small-seed1 failed (exit 2)" in out
    rows = experiments["grid"].read_results(grid.results)
    assert [(row.run, row.concurrent_runs) for row in rows] == [("vanilla-small-seed1", 2)]
    assert not (grid.output_root / "al_both-small-seed1").exists()


def test_a_missing_corpus_is_refused_before_any_run_starts(tmp_path, experiments, capsys):
    """A fresh clone without the Bible corpus: the runner names the folder and the command that builds
    it, once, and starts nothing (no training process, no output folder); a dry run still lists."""
    path = write_grid(tmp_path, seeds=(1,))
    shutil.rmtree(tmp_path / "corpus")
    assert experiments["run_grid"].main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and "no such corpus folder" in err
    assert f"hf-graphtf build-corpus --output-dir {tmp_path / 'corpus'}" in err
    assert not (tmp_path / "outputs").exists()
    assert experiments["run_grid"].main([str(path), "--dry-run"]) == 0


def test_a_run_that_would_train_in_another_precision_is_refused_before_it_starts(
    tmp_path, experiments, capsys, monkeypatch
):
    """`precision: auto` follows the host: a grid moved part-way to a host without bf16 instructions would
    train its next seed in fp32 beside bf16 seeds. The runner names the run, what it would take and what
    the finished runs took, and starts nothing, unless told --allow-other-precision; a precision some
    finished run of the size shares, and rows that record none (older ones), pass."""
    run_grid = experiments["run_grid"]
    path = write_grid(tmp_path, seeds=(1, 2))
    grid = experiments["grid"].Grid.load(path)
    grid.results.parent.mkdir(parents=True, exist_ok=True)
    row = {"grid": grid.name, "run": "vanilla-small-seed1", "valid": {"bleu": 1.0}, "precision": "bf16"}
    grid.results.write_text(json.dumps(cell_of(row)) + "\n", encoding="utf-8")
    started = record_failed_starts(run_grid, monkeypatch)  # nothing trains, nothing is written
    monkeypatch.setattr(run_grid, "host_precision", lambda recipe: "fp32")
    assert run_grid.main([str(path), "--runs", "al_both-small-seed1"]) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 1 and started == []
    assert "al_both-small-seed1 would train in fp32 here (as its recipe and the grid set it), but the grid's " in err
    assert "small runs trained in bf16" in err and "--allow-other-precision" in err
    assert run_grid.main([str(path), "--runs", "al_both-small-seed1", "--dry-run"]) == 0  # a dry run still lists
    assert run_grid.main([str(path), "--runs", "al_both-small-seed1", "--allow-other-precision"]) == 1
    assert started == ["al_both-small-seed1"]
    monkeypatch.setattr(run_grid, "host_precision", lambda recipe: "bf16")
    assert run_grid.precision_conflicts(grid, grid.runs()) == []
    del row["precision"]  # a row that records no precision constrains nothing
    grid.results.write_text(json.dumps(cell_of(row)) + "\n", encoding="utf-8")
    monkeypatch.setattr(run_grid, "host_precision", lambda recipe: "fp32")
    assert run_grid.precision_conflicts(grid, grid.runs()) == []


def test_the_host_precision_is_the_one_the_training_script_resolves(experiments, monkeypatch):
    """Unset, the bf16/fp16 flags say; an explicit precision is kept; ``auto`` follows this host, as the
    training script's `resolve_precision` has it."""
    run_grid = experiments["run_grid"]
    from hf_graphtf.training import tooling

    assert [run_grid.host_precision(recipe) for recipe in ({}, {"bf16": True}, {"precision": "fp32"})] == [
        "fp32",
        "bf16",
        "fp32",
    ]
    asked = []
    monkeypatch.setattr(tooling, "resolve_precision", lambda requested, use_cpu: asked.append(use_cpu) or "bf16")
    assert run_grid.host_precision({"precision": "auto", "use_cpu": True}) == "bf16" and asked == [True]


def test_the_readme_gets_the_generated_tables(finished_grid, experiments, tmp_path):
    grid, _ = finished_grid
    report = experiments["report"]
    page = report.write_report(grid, analysis=False)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.README_START}\nold\n{report.README_END}\noutro\n", encoding="utf-8")
    report.update_readme(readme, page, grid)
    text = readme.read_text(encoding="utf-8")
    assert "old" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert "#### Attention link" in text and "| al_both |" in text and "#### Graph-group attention" in text
    readme.write_text("no markers", encoding="utf-8")
    with pytest.raises(ValueError, match="markers"):
        report.update_readme(readme, page, grid)


def test_the_report_refuses_runs_whose_outputs_are_not_here(finished_grid, experiments, tmp_path, capsys):
    """A fresh checkout has the results file but not the runs' folders: the report says so instead of
    overwriting its page with one that has lost the bootstrap tests and learning curves."""
    _, path = finished_grid
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = experiments["grid"].read_results(Path(spec["results"]))
    rows[0] = dataclasses.replace(rows[0], output_dir=str(tmp_path / "gone"), hypotheses=str(tmp_path / "gone" / "t"))
    results = tmp_path / "results" / "results.jsonl"
    results.parent.mkdir()
    results.write_text("".join(json.dumps(row.to_json()) + "\n" for row in rows), encoding="utf-8")
    moved = tmp_path / "grid.yaml"
    moved.write_text(yaml.safe_dump({**spec, "results": str(results)}), encoding="utf-8")

    report = experiments["report"]
    assert report.main([str(moved), "--no-analysis"]) == 2
    error = capsys.readouterr().err
    assert rows[0].run in error and "--allow-missing-outputs" in error and "--restore" in error
    assert not (results.parent / "RESULTS_tiny.md").exists()
    assert report.main([str(moved), "--no-analysis", "--allow-missing-outputs"]) == 0
    assert (results.parent / "RESULTS_tiny.md").is_file()


def test_the_report_refuses_a_compared_grid_whose_test_corpus_is_not_here(finished_grid, experiments, tmp_path, capsys):
    """The paired bootstrap tests score the runs' translations against the test split: a checkout that has
    not built a compared grid's corpus is told which and how to build it, instead of a page whose p-values
    dropped out silently."""
    _, path = finished_grid
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    gone = tmp_path / "gone-corpus"
    moved = tmp_path / "grid.yaml"
    moved.write_text(yaml.safe_dump({**spec, "common": {**spec["common"], "corpus": str(gone)}}), encoding="utf-8")
    report = experiments["report"]
    page = Path(spec["results"]).parent / "RESULTS_tiny.md"
    before = page.read_bytes() if page.exists() else None
    assert report.main([str(moved), "--no-analysis"]) == 2
    error = capsys.readouterr().err
    assert "grid.yaml has finished runs but its test corpus is not here" in error
    assert str(gone) in error and "--allow-missing-outputs" in error
    assert (page.read_bytes() if page.exists() else None) == before  # nothing written


def copy_of_grid(grid_path: Path, base: Path, rows: list[dict] | None = None) -> Path:
    """The finished tiny grid with its own output folders and results file (same rows unless given) and no
    archive, as a checkout elsewhere sees it."""
    spec = yaml.safe_load(grid_path.read_text(encoding="utf-8"))
    rows = rows if rows is not None else [json.loads(line) for line in Path(spec["results"]).read_text().splitlines()]
    shutil.copytree(spec["output_root"], base / "outputs")
    results = base / "results" / "results.jsonl"
    results.parent.mkdir(parents=True)
    rows = [{**row, "output_dir": str(base / "outputs" / row["run"])} for row in rows]
    results.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    path = base / "grid.yaml"
    path.write_text(yaml.safe_dump({**spec, "results": str(results), "output_root": str(base / "outputs")}))
    return path


def test_restore_archives_output_folders_and_reruns_what_is_gone(finished_grid, experiments, tmp_path, capsys):
    """Runs made before the archive existed, one of them with its output folder gone: ``--restore`` copies
    the folders it finds and reruns the missing run (the same seed gives the same model), after which the
    report needs no output folder at all."""
    _, path = finished_grid
    moved = copy_of_grid(path, tmp_path)
    grid = experiments["grid"].Grid.load(moved)
    gone = grid.output_root / "vanilla-small-seed2"
    translations = (gone / "test_predictions.txt").read_text(encoding="utf-8").splitlines()
    shutil.rmtree(gone)
    rows_before = grid.results.read_text(encoding="utf-8")
    report = experiments["report"]
    assert report.main([str(moved), "--no-analysis"]) == 2  # the run is nowhere

    assert experiments["run_grid"].main([str(moved), "--restore"]) == 0
    out = capsys.readouterr().out
    assert "vanilla-small-seed2: done (not archived, no output folder: --restore reruns it)" in out
    assert "vanilla-small-seed2: rerunning it" in out and out.count("archived in") == 6
    assert grid.results.read_text(encoding="utf-8") == rows_before  # rows are never rewritten
    archived = grid.archive_folder("vanilla-small-seed2")
    assert gzip.decompress((archived / "test_predictions.txt.gz").read_bytes()).decode().splitlines() == translations

    shutil.rmtree(grid.output_root)  # a checkout elsewhere: the archive alone makes the page
    assert report.main([str(moved), "--no-analysis"]) == 0
    page = grid.page.read_text(encoding="utf-8")
    al_row = next(line for line in page.splitlines() if line.startswith("| al_both |"))
    assert float(al_row.split("|")[4]) <= 1.0  # the bootstrap test ran on archived translations
    assert (grid.results.parent / "figures" / "tiny" / "learning_curves_small.png").is_file()
    assert report.main([str(moved)]) == 2  # the gate and entropy figures need the models
    assert "--no-analysis" in capsys.readouterr().err


def test_restore_archives_nothing_that_does_not_match_its_row(finished_grid, experiments, tmp_path, capsys):
    """A folder whose scores differ from its row (here the row is altered; in life, a rerun that did not
    reproduce) is moved aside, not archived; a run that could not be rerun as its row records it (another
    number of processes) is not started. Both make ``--restore`` fail."""
    _, path = finished_grid
    rows = {row.run: row for row in experiments["grid"].read_results(Path(yaml.safe_load(path.read_text())["results"]))}
    altered = rows["vanilla-small-seed1"]
    altered = dataclasses.replace(altered, test={**altered.test, "bleu": altered.test["bleu"] + 1.0})
    moved = copy_of_grid(path, tmp_path, [altered.to_json(), rows["vanilla-small-seed2"].to_json()])
    grid = experiments["grid"].Grid.load(moved)
    shutil.rmtree(grid.output_root / "vanilla-small-seed2")

    assert experiments["run_grid"].main([str(moved), "--restore", "--processes", "2"]) == 1
    out = capsys.readouterr().out
    assert f"vanilla-small-seed1: does not reproduce its row (test BLEU {altered.test['bleu']} in the row" in out
    assert "same commit, packages and corpus" in out  # the first guess at a cause
    assert not grid.archive_folder("vanilla-small-seed1").exists()
    assert (grid.output_root / "not_reproduced" / "vanilla-small-seed1" / "results.json").is_file()
    assert not (grid.output_root / "vanilla-small-seed1").exists()  # nothing pairs the row with this model
    assert "vanilla-small-seed2: cannot rerun it" in out and "2 processes" in out
    assert not (grid.output_root / "vanilla-small-seed2").exists() and not grid.archive.exists()
    row, run = rows["vanilla-small-seed2"], grid.runs("vanilla", seeds="2")[0]
    assert experiments["run_grid"].rerun_problem(row, run, processes=1) is None
    other_corpus = {**row.provenance, "corpus_sha256": {"test.jsonl": "0" * 64}}
    assert "corpus" in experiments["run_grid"].rerun_problem(
        dataclasses.replace(row, provenance=other_corpus), run, processes=1
    )
    # a split added to the folder since the run (train_5k beside train_10k) is not a change to what it read
    fewer = {name: digest for name, digest in row.provenance["corpus_sha256"].items() if name != "valid.jsonl"}
    assert (
        experiments["run_grid"].rerun_problem(
            dataclasses.replace(row, provenance={**row.provenance, "corpus_sha256": fewer}), run, processes=1
        )
        is None
    )
    other_cpu = {**row.provenance, "cpu": {"model": "another CPU", "kernels": "AVX512"}}
    assert "float sums" in experiments["run_grid"].rerun_problem(
        dataclasses.replace(row, provenance=other_cpu), run, processes=1
    )
    # a host that names the same CPU but sums differently; a row from before fingerprints is judged without one
    cpu = row.provenance["cpu"]
    other_host = {**row.provenance, "cpu": {**cpu, "float_fingerprint": "0" * 16}}
    assert "float sums" in experiments["run_grid"].rerun_problem(
        dataclasses.replace(row, provenance=other_host), run, processes=1
    )
    older = {**row.provenance, "cpu": {"model": cpu["model"], "kernels": cpu["kernels"]}}
    assert experiments["run_grid"].rerun_problem(dataclasses.replace(row, provenance=older), run, processes=1) is None
    # a machine without the corpus: said as the training script would say it, before any rerun starts
    corpus = Path(run.recipe_fields()["corpus"])
    corpus.rename(corpus.with_name("set-aside"))
    try:
        problem = experiments["run_grid"].rerun_problem(row, run, processes=1)
    finally:
        corpus.with_name("set-aside").rename(corpus)
    assert "no such corpus folder" in problem and "build-corpus" in problem


def test_a_rows_provenance_is_compared_on_what_both_records_name(finished_grid, experiments):
    """A row made when provenance named fewer packages is not "changed" for lacking the others; a package
    at another version is named as the change."""
    grid, _ = finished_grid
    what_changed = experiments["run_grid"]._what_changed
    row = grid.finished_rows()[0]
    now = row.provenance
    assert {"hf_graphtf", "torch", "transformers", "sacrebleu"} <= set(now["packages"])  # software_record's
    older = {name: now["packages"][name] for name in ("torch", "transformers", "tokenizers", "accelerate")}
    assert (
        what_changed(dataclasses.replace(row, provenance={**now, "packages": older}), now)
        == "same commit, packages and corpus"
    )
    other_torch = {**older, "torch": "2.0.0"}
    assert (
        what_changed(dataclasses.replace(row, provenance={**now, "packages": other_torch}), now)
        == "changed since the run: packages"
    )


@pytest.mark.parametrize("script", ["run_grid.py", "report.py"])
def test_the_experiment_scripts_run_as_scripts(script):
    """Each script does its work when run as the README runs it (``python recipes/experiments/...``), not
    only when a test calls its ``main``."""
    result = run_python(str(EXPERIMENTS / script), "--help")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:") and "grid" in result.stdout


#: the committed pages a regeneration must reproduce byte for byte. grid_bible_cpu is left out: 56 of its runs
#: predate the archive and their folders are gone, so its bootstrap tests and curves cannot be redrawn here.
REPRODUCED_PAGES = ("grid_bible_cpu_v2", "grid_bible_cpu_steps", "grid_bible_cpu_converged")


@pytest.mark.slow  # about 1-2 minutes on 2 cores (the budgets table's bootstrap tests); CI runs it
def test_the_committed_pages_are_what_the_report_writes_from_their_rows(experiments, tmp_path, monkeypatch):
    """Each committed page, and the README's generated table, is what the report writes from the committed
    rows and archives today, dated as the page is (into a scratch folder: nothing committed is touched)."""
    import datetime
    import re

    from hf_graphtf.data.bible import build_bible_corpus
    from hf_graphtf.data.bible_ny import build_bible_ny_corpus

    grid_module, report = experiments["grid"], experiments["report"]
    builders = {"data/bible-es-en": build_bible_corpus, "data/bible-ny-en": build_bible_ny_corpus}

    def corpus_with_references(corpus: str) -> str:
        """A fresh checkout has no corpus: the test split's references of each pair that has rows, built here."""
        if (REPO_ROOT / corpus / "test.jsonl").is_file() or corpus not in builders:
            return str(REPO_ROOT / corpus)
        scratch = tmp_path / Path(corpus).name
        if not (scratch / "test.jsonl").is_file():
            try:
                builders[corpus](scratch, progress=False)
            except Exception as error:  # the SWORD modules or the Chichewa package are not installed
                pytest.skip(f"no {corpus} for the references: {error}")
        return str(scratch)

    monkeypatch.setattr(grid_module, "resolve_corpus", corpus_with_references)

    def dated(text: str, pattern: str) -> datetime.date:
        return datetime.date.fromisoformat(re.search(pattern + r"(\d{4}-\d\d-\d\d)", text).group(1))

    for name in REPRODUCED_PAGES:
        grid = grid_module.Grid.load(EXPERIMENTS / f"{name}.yaml")
        committed = grid.page.read_text(encoding="utf-8")
        out = tmp_path / name
        shutil.copytree(grid.results.parent / "figures" / grid.name, out / "figures" / grid.name)  # drawn before
        page = report.write_report(grid, analysis=False, out=out, date=dated(committed, r"\.yaml` on "))
        assert page.read_text(encoding="utf-8") == committed, name
    readme = tmp_path / "README.md"
    shutil.copy(REPO_ROOT / "README.md", readme)
    date = dated(readme.read_text(encoding="utf-8"), r"--readme README\.md` on ")
    converged = grid_module.Grid.load(EXPERIMENTS / "grid_bible_cpu_converged.yaml")  # the grid the README reads
    report.update_readme_glance(readme, converged, date)
    assert readme.read_text(encoding="utf-8") == (REPO_ROOT / "README.md").read_text(encoding="utf-8")
