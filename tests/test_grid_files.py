"""The grid files: what a grid file may say, the errors that name what is wrong, and the committed grids' protocol."""

from __future__ import annotations

import json

import pytest
import yaml
from experiment_fixtures import write_grid
from recipe_fixtures import REPO_ROOT

EXPERIMENTS = REPO_ROOT / "recipes" / "experiments"


def test_grid_errors_name_the_problem(tmp_path, experiments):
    path = write_grid(tmp_path)
    grid_module = experiments["grid"]
    spec = yaml.safe_load(path.read_text())
    spec["variants"]["broken"] = {"recipe": str(tmp_path / "missing.yaml")}
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match="variant 'broken' names recipe .*missing.yaml"):
        grid_module.Grid.load(path)
    del spec["variants"]["broken"]
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match=r"unknown variants \['nope'\]"):
        grid_module.Grid.load(path).runs(variants="nope")
    results = tmp_path / "results.jsonl"
    complete = '{"run": "a", "grid": "g", "variant": "vanilla", "size": "10k", "seed": 1}'
    results.write_text(f"{complete}\n{{broken\n", encoding="utf-8")
    with pytest.raises(ValueError, match="results.jsonl, line 2: not a JSON object"):
        grid_module.read_results(results)
    results.write_text(f'{complete}\n{{"run": "b"}}\n', encoding="utf-8")  # a row without its cell
    with pytest.raises(ValueError, match="results.jsonl, line 2: .*missing .*'grid', 'variant', 'size', and 'seed'"):
        grid_module.read_results(results)
    results.write_text(complete[:-1] + ', "speed": 1}\n', encoding="utf-8")  # a field no runner writes
    with pytest.raises(ValueError, match=r"results.jsonl, line 1: run 'a': unknown fields \['speed'\]"):
        grid_module.read_results(results)
    for flag in ("--jobs", "--processes"):  # refused before the grid is read or anything runs
        with pytest.raises(SystemExit):
            experiments["run_grid"].main([str(tmp_path / "no-such-grid.yaml"), flag, "0"])


def test_a_variant_can_train_fewer_seeds_than_the_grid(tmp_path, experiments):
    """A variant's own ``seeds`` narrow the grid's: more seeds go to the variants a verdict turns on."""
    path = write_grid(tmp_path, seeds=(1, 2, 3))
    spec = yaml.safe_load(path.read_text())
    spec["variants"]["graph_gate"]["seeds"] = [1]
    path.write_text(yaml.safe_dump(spec))
    grid = experiments["grid"].Grid.load(path)
    names = [run.name for run in grid.runs()]
    assert "graph_gate-small-seed1" in names and "graph_gate-small-seed2" not in names
    assert "vanilla-small-seed3" in names and grid.variant_seeds("vanilla") == [1, 2, 3]
    spec["variants"]["graph_gate"]["seeds"] = [1, 4]
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match=r"variant 'graph_gate' lists seeds \[4\] that the grid's seeds lack"):
        experiments["grid"].Grid.load(path)
    spec["variants"]["graph_gate"]["seeds"] = "1"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match="seeds must be a list of integers"):
        experiments["grid"].Grid.load(path)


def test_a_size_can_train_fewer_variants_and_seeds(tmp_path, experiments):
    """A size's own ``variants`` and ``seeds`` narrow what it trains (a smaller condition asks one question of
    fewer runs); the other keys of the size are still its overrides, and a name outside the grid is refused."""
    path = write_grid(tmp_path, seeds=(1, 2, 3))
    spec = yaml.safe_load(path.read_text())
    spec["sizes"]["tiny"] = {"max_steps": 3, "variants": ["vanilla"], "seeds": [1, 2]}
    path.write_text(yaml.safe_dump(spec))
    grid = experiments["grid"].Grid.load(path)
    tiny = [run for run in grid.runs() if run.size == "tiny"]
    assert [run.name for run in tiny] == ["vanilla-tiny-seed1", "vanilla-tiny-seed2"]
    assert grid.sizes["tiny"] == {"max_steps": 3} and tiny[0].overrides["max_steps"] == 3
    assert "graph_gate-small-seed3" in [run.name for run in grid.runs()]  # the other size trains all
    for key, value, said in [
        ("variants", ["vanilla", "nope"], "size 'tiny' variants names"),
        ("seeds", [1, 4], "size 'tiny' seeds must be a list of the grid's seeds"),
    ]:
        spec["sizes"]["tiny"] = {key: value}
        path.write_text(yaml.safe_dump(spec))
        with pytest.raises(ValueError, match=said):
            experiments["grid"].Grid.load(path)


@pytest.mark.parametrize("name", ["grid_bible_cpu.yaml", "grid_bible_cpu_v2.yaml", "grid_bible_gpu.yaml"])
def test_the_committed_grids_read_and_name_committed_recipes(experiments, name):
    grid = experiments["grid"].Grid.load(EXPERIMENTS / name)
    runs = grid.runs("core", "10k")
    assert len(runs) == 4 * len(grid.seeds) == 12
    assert {run.variant for run in runs} == {"vanilla", "al_both", "graph_gate", "graph_half_gate"}
    assert len(grid.runs()) == 11 * 2 * 3  # the issue's variants, both sizes, three seeds
    command = experiments["run_grid"].train_command(runs[0], processes=2)
    assert "--multi_gpu" in command and "--max_steps" in command and "--seed" in command
    assert json.dumps(grid.common)  # plain values only
    # every override is an argument of the training script (a typo would fail the run, not the grid)
    from hf_graphtf.training.arguments import ARGUMENT_CLASSES

    known = {field for cls in ARGUMENT_CLASSES for field in cls.__dataclass_fields__}
    for run in grid.runs():
        assert set(run.overrides) <= known, set(run.overrides) - known


def test_the_gpu_grid_runs_the_cpu_grids_variants(experiments):
    """The GPU grid repeats the CPU grid's variant list (a grid file has no includes): they must not drift."""
    cpu, gpu = (experiments["grid"].Grid.load(EXPERIMENTS / f"grid_bible_{kind}.yaml") for kind in ("cpu", "gpu"))
    assert gpu.variants == cpu.variants and gpu.core == cpu.core and gpu.seeds == cpu.seeds


def test_the_cpu_grids_rerun_keeps_the_protocol(experiments):
    """grid_bible_cpu_v2 reruns grid_bible_cpu to keep every run's outputs: only where they go may differ."""
    first, rerun = (
        experiments["grid"].Grid.load(EXPERIMENTS / name) for name in ("grid_bible_cpu.yaml", "grid_bible_cpu_v2.yaml")
    )
    for key in ("seeds", "common", "sizes", "variants", "core"):
        assert getattr(rerun, key) == getattr(first, key), key
    for key in ("name", "results", "output_root", "archive"):
        assert getattr(rerun, key) != getattr(first, key), key
    assert [(run.variant, run.size, run.seed) for run in rerun.runs()] == [
        (run.variant, run.size, run.seed) for run in first.runs()
    ]


def test_the_steps_grid_crosses_the_second_grids_sizes_and_budgets(experiments):
    """grid_bible_cpu_steps swaps v2's budgets between its sizes (10K for 1,200 steps, the full set for
    600) and keeps everything else, so its cells and v2's read as one 2 x 2 of data against steps."""
    v2, steps = (
        experiments["grid"].Grid.load(EXPERIMENTS / name)
        for name in ("grid_bible_cpu_v2.yaml", "grid_bible_cpu_steps.yaml")
    )
    assert steps.common == v2.common and steps.seeds == v2.seeds
    assert steps.variants == {name: v2.variants[name] for name in ("vanilla", "al_both")}
    assert steps.sizes == {
        "10k_1200": {**v2.sizes["10k"], "max_steps": v2.sizes["full"]["max_steps"]},
        "full_600": {**v2.sizes["full"], "max_steps": v2.sizes["10k"]["max_steps"]},
    }
    for key in ("name", "results", "output_root", "archive"):
        assert getattr(steps, key) != getattr(v2, key), key


def test_a_grid_file_lays_out_its_tables_and_names_only_its_own_variants(experiments, tmp_path):
    """The page's tables come from the grid file (a table changes without code); a misspelt variant there is
    refused instead of dropping out of its table unseen."""
    grid_module = experiments["grid"]
    converged = grid_module.Grid.load(EXPERIMENTS / "grid_bible_cpu_converged.yaml")
    assert [table.variants for table in converged.tables] == [
        ("vanilla", "al_both", "al_both_cumulative"),
        ("vanilla", "graph_self_gate", "graph_half_gate"),
    ]
    assert converged.figures.gates == ("graph_half_gate", "graph_self_gate")
    spec = yaml.safe_load((EXPERIMENTS / "grid_bible_cpu_converged.yaml").read_text(encoding="utf-8"))
    spec["tables"][0]["variants"].append("al_bothh")
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(ValueError, match=r"table \"Attention link .*\" names .*al_bothh.*one of the grid's variants"):
        grid_module.Grid.load(path)
    del spec["tables"], spec["figures"]
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    default = grid_module.Grid.load(path)
    assert [(table.title, table.variants) for table in default.tables] == [("Every variant", tuple(spec["variants"]))]
