"""A grid tunes its baseline first (growing the range while the best value lies at an edge), then runs the
variants at the tuned value, in the order named."""

from __future__ import annotations

import pytest
import yaml
from experiment_fixtures import (
    EXPERIMENTS,
    finish_run,
    record_failed_starts,
    tuning_grid,
)
from recipe_fixtures import (
    one_thread,  # noqa: F401  (autouse fixture)
)


def test_a_grid_tunes_its_baseline_first_and_reuses_the_chosen_run(tmp_path, experiments):
    """Tuning runs come first; the others wait; the best validation BLEU picks the value every run then
    uses, and the baseline's seed-1 run is the tuning run at that value (trained once)."""
    grid = tuning_grid(tmp_path, experiments, trains=True, values=[0.0, 0.3])
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
    assert converged.sizes == {"10k": {"train_split": "train_10k"}, "5k": {"train_split": "train_5k"}}
    # 5K: vanilla (tuned at 5K by the same rule) and the paper's link only, seeds 1-3
    five = [run for run in converged.runs() if run.size == "5k"]
    assert {run.variant for run in five} == {"vanilla", "al_both"} and {run.seed for run in five} == {1, 2, 3}
    assert converged.tuning_values("5k")[:3] == [0.1, 0.2, 0.3]
    assert all(run.overrides["train_split"] == "train_5k" for run in five)
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


def test_a_tuning_range_grows_while_its_best_value_lies_at_an_edge(tmp_path, experiments):
    """The best at the top edge adds the next value up, the best at the bottom edge the next one down,
    within the bounds; the tuned value is known only once the best lies inside the range or at a bound."""
    grid = tuning_grid(tmp_path, experiments, values=[0.2, 0.3], extend={"step": 0.1, "bounds": [0.0, 0.5]})
    assert grid.tuning_values("small") == [0.2, 0.3]
    finish_run(grid, "vanilla-small-seed1-dropout0.2", 20.0)
    assert grid.tuning_values("small") == [0.2, 0.3]  # not every value has finished
    finish_run(grid, "vanilla-small-seed1-dropout0.3", 21.0)
    assert grid.tuning_values("small") == [0.2, 0.3, 0.4] and grid.tuned_value("small") is None
    assert [run.name for run in grid.runs()][:3] == [f"vanilla-small-seed1-dropout{v}" for v in (0.2, 0.3, 0.4)]
    assert all(run.waits_for_tuning for run in grid.runs()[3:])
    finish_run(grid, "vanilla-small-seed1-dropout0.4", 22.0)
    finish_run(grid, "vanilla-small-seed1-dropout0.5", 23.0)  # at the upper bound: chosen though at the edge
    assert grid.tuning_values("small") == [0.2, 0.3, 0.4, 0.5] and grid.tuned_value("small") == 0.5
    assert grid.tuned_edge_note("small") == (
        "dropout 0.5 is the highest value tried, the highest the grid allows (0-0.5): the best within the "
        "range, not shown to be the best there is"
    )

    low = tuning_grid(tmp_path / "low", experiments, values=[0.2, 0.3], extend={"step": 0.1, "bounds": [0.1, 0.5]})
    finish_run(low, "vanilla-small-seed1-dropout0.2", 21.0)
    finish_run(low, "vanilla-small-seed1-dropout0.3", 21.0)  # a tie goes to the first listed: the bottom edge
    assert low.tuning_values("small") == [0.2, 0.3, 0.1] and low.tuned_value("small") is None
    finish_run(low, "vanilla-small-seed1-dropout0.1", 20.0)
    assert low.tuned_value("small") == 0.2 and low.tuned_edge_note("small") is None  # inside the range
    assert [run.overrides["dropout"] for run in low.runs() if run.variant == "al_both"] == [0.2, 0.2]

    fixed = tuning_grid(tmp_path / "fixed", experiments, values=[0.2, 0.3])  # without extend: as listed
    finish_run(fixed, "vanilla-small-seed1-dropout0.2", 20.0)
    finish_run(fixed, "vanilla-small-seed1-dropout0.3", 21.0)
    assert fixed.tuning_values("small") == [0.2, 0.3] and fixed.tuned_value("small") == 0.3
    assert fixed.tuned_edge_note("small").startswith("dropout 0.3 is the highest value tried, the highest listed:")


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
        tuning_grid(tmp_path, experiments, values=[0.2, 0.3], extend=extend)


def test_the_runner_grows_the_tuning_range_then_runs_the_variants_at_the_tuned_value(tmp_path, experiments, capsys):
    """Dropout 0.0 already in, below any trained run: the runner trains 0.1, finds the best at the top
    edge, trains the next value up, and once the best lies inside the range (or at the bound), the
    variants at that value, in one command."""
    extend = {"step": 0.1, "bounds": [0.0, 0.5]}
    grid = tuning_grid(tmp_path, experiments, seeds=(1,), trains=True, values=[0.0, 0.1], extend=extend)
    path = grid.path
    finish_run(grid, "vanilla-small-seed1-dropout0.0", -1.0)  # below any BLEU a trained run can reach
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

    # each run "fails" at once: the runner starts no new one after, so jobs=3 starts all three
    started = record_failed_starts(run_grid, monkeypatch)
    monkeypatch.setattr(run_grid, "missing_corpora", lambda grid, runs: [])
    assert run_grid.main([str(path), "--runs", ",".join(order), "--jobs", "3"]) == 1
    assert started == order
    with pytest.raises(SystemExit):
        run_grid.main([str(path), "--runs", "al_both-10k-seed9"])
    assert "unknown runs ['al_both-10k-seed9']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_grid.main([str(path), "--runs", order[0], "--seeds", "2"])
