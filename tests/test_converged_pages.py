"""The converged grid's page: finished runs only, what the runs left cost, how each run trained, the
stopping and tuning tables, the glance table's columns per budget and language pair, the seed intervals."""

from __future__ import annotations

import dataclasses
import json
import statistics

import pytest
import yaml
from experiment_fixtures import (
    cell_of,
    early_and_converged,
    finish_run,
    plateau_run,
    tuning_grid,
    typed_row,
)
from recipe_fixtures import (
    one_thread,  # noqa: F401  (autouse fixture)
)


def test_the_page_shows_finished_runs_only_and_prices_every_run_left_in_full(tmp_path, experiments):
    """A run with a checkpoint but no row is not on the page: the progress paragraph counts finished runs
    only and the cost of the runs left prices it in full (where it stands is the runner's log). The
    longest run's price is named only while the tuning has not chosen (it prices nothing after)."""
    import shutil

    sections = experiments["sections"]
    grid = tuning_grid(tmp_path / "grid", experiments, values=[0.1, 0.2])
    for value, bleu in ((0.1, 22.0), (0.2, 21.0)):
        row = {
            "grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "variant": "vanilla", "size": "small",
            "seed": 1, "valid": {"bleu": bleu}, "test": {"bleu": bleu + 3}, "steps": 5000, "best_step": 3000,
            "stop_reason": "validation plateau", "train_minutes": 80.0, "tuning": {"field": "dropout", "value": value},
            "output_dir": str(tmp_path / "absent"),
        }  # fmt: skip
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(cell_of(row)) + "\n")
        if value == 0.1:  # before the tuning has chosen, the runs waiting for it cost the longest run
            assert "longest finished run (80 minutes)" in " ".join(
                sections.stopping_section(grid, grid.finished_rows())
            )
    rows = grid.finished_rows()
    assert "longest finished run" not in " ".join(sections.stopping_section(grid, rows))  # none left that it prices
    before = (sections.progress_section(grid, rows), sections.stopping_section(grid, rows))
    plateau_run(tmp_path, "cut", max_steps=2)
    shutil.copytree(tmp_path / "cut", grid.output_root / "al_both-small-seed1")  # a run under way here
    assert (sections.progress_section(grid, rows), sections.stopping_section(grid, rows)) == before
    (paragraph, _) = sections.progress_section(grid, rows)
    assert paragraph.startswith("**Partial:** 2 of the grid's") and "finished runs only" in paragraph
    planned = grid.runs()  # once every run has a row, the page says the grid is complete, with its count
    (paragraph, _) = sections.progress_section(grid, [dataclasses.replace(rows[0], run=run.name) for run in planned])
    assert paragraph.startswith(f"**Complete:** {len(planned)} of the grid's {len(planned)} runs have finished.")
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
        return typed_row(experiments, {**fields, "provenance": {"cpu": cpu} if cpu else None})

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
        return typed_row(experiments, {"seed": seed, "device": "cpu", "provenance": {"cpu": cpu}})

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
        typed_row(experiments, {"seed": seed, "precision": "bf16", "train_minutes": minutes, **host})
        for seed, minutes in ((1, 80.0), (2, 100.0))
    ]
    validating = {80.0: 8.0, 100.0: None, 50.0: None}  # the second run has no log: all its minutes train
    lines = speeds.without_speed_flags(rows, lambda row: validating[row.train_minutes], kernels)
    (line,) = [line for line in lines if line]
    # (72 x 1.25 + 8 x 0.75 + 100 x 1.25) / 2 = 110.5
    assert "2 bf16 runs took 90 minutes" in line and "would take about 110." in line
    assert "the runs' host" in line and "1.25x ±0.10" in line and "1.33x the time" in line
    # a run with eager attention is priced with eager's ratio, and each kernel's runs are named
    eager = typed_row(experiments, {"seed": 3, "precision": "bf16", "train_minutes": 50.0, **host})
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


def test_the_page_prices_the_runs_left_at_the_finished_runs_most_like_them(tmp_path, experiments):
    """Before the tuning has chosen, every run left costs the longest finished run; afterwards a variant
    with no run yet costs vanilla's run at the chosen value, and one with runs costs their mean; each seed
    is priced apart, so the page can say what the next seeds cost."""
    speeds = experiments["speeds"]
    grid = tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
    assert speeds.remaining_minutes(grid, []) is None
    # runs left: dropout 0.2, al_both seed 1, vanilla and al_both seed 2, all at the longest finished run
    rows = finish_run(grid, "vanilla-small-seed1-dropout0.1", bleu=22.0, minutes=80.0)
    assert speeds.remaining_minutes(grid, rows) == ({1: (2, 160.0), 2: (2, 160.0)}, 80.0)
    rows = finish_run(grid, "vanilla-small-seed1-dropout0.2", bleu=21.0, minutes=100.0)  # 0.1 chosen, 0.2 longer
    assert speeds.remaining_minutes(grid, rows) == ({1: (1, 80.0), 2: (2, 160.0)}, 100.0)
    rows = finish_run(grid, "al_both-small-seed1", minutes=130.0)
    assert speeds.remaining_minutes(grid, rows) == ({2: (2, 80.0 + 130.0)}, 130.0)
    rows = finish_run(grid, "vanilla-small-seed2", minutes=90.0)
    assert speeds.remaining_minutes(grid, rows) == ({2: (1, 130.0)}, 130.0)
    assert speeds.remaining_minutes(grid, finish_run(grid, "al_both-small-seed2", minutes=120.0)) is None


def test_the_glance_table_sets_the_converged_cell_beside_the_early_budgets(tmp_path, experiments):
    """The README's table: a column per budget, the converged one last, each Δ over the seeds both
    vanilla and the variant have (a variant's seed whose vanilla has not finished stays out), vanilla's
    converged cell the tuning run at the chosen value, not the run that tuned worse."""
    comparisons = experiments["comparisons"]
    early, converged, finish = early_and_converged(tmp_path, experiments)
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


def test_a_run_cut_off_before_its_plateau_is_marked_in_every_cell_it_enters(tmp_path, experiments):
    """A compared run that stopped at the step cap, short of a validation plateau, enters the means and the
    Δ as where it had got to: its BLEU cell and the glance table's Δ say "not converged" with the seed and
    why, and the page names it under the table with its steps and best step. Runs that stopped on a plateau
    and runs of a fixed budget (at its step cap by design) add nothing."""
    comparisons = experiments["comparisons"]
    table = experiments["grid"].Table("Attention link", ("vanilla", "al_both"), False)
    early, converged, finish = early_and_converged(tmp_path, experiments)
    plateau = {"stop_reason": "validation plateau", "steps": 20000, "best_step": 18000}
    for seed, (base, link) in {1: (20.0, 21.0), 2: (21.0, 23.0)}.items():
        finish(early, "vanilla", seed, base)
        finish(early, "al_both", seed, link)
    finish(converged, "vanilla", 1, 25.0, tag="dropout0.2", valid=24.0, **plateau)
    finish(converged, "vanilla", 1, 20.0, tag="dropout0.1", valid=20.0, stop_reason="step cap", steps=40000)
    finish(converged, "vanilla", 2, 26.0, **plateau)
    finish(converged, "al_both", 1, 27.0, **plateau)

    def cells() -> tuple[list[str], list[str]]:
        rows_by = converged.rows_by_cell()
        lines = comparisons.comparison_table(converged, rows_by, table, ["small"], {})
        _, _, glance = comparisons.budgets_table([early, converged], ("vanilla", "al_both"))
        return lines, glance.split(" | ")[1:3]

    lines, glance = cells()  # the tuning run cut off at the cap is no cell's: nothing to mark
    assert len(lines) == 4 and "not converged" not in " ".join(lines + glance)
    assert glance == ["+1.50 (n=2, 95% CI -4.85 to +7.85)", "+2.00 (n=1)"]
    finish(converged, "al_both", 2, 26.5, stop_reason="step cap", steps=40000, best_step=39750)
    lines, glance = cells()
    assert glance[0] == "+1.50 (n=2, 95% CI -4.85 to +7.85)"  # the early budget's runs record no stop reason
    # Δ +2 and +0.5: mean 1.25, sd 1.061; 12.706 * 1.061 / sqrt(2) = 9.53
    assert glance[1] == "+1.25 (n=2, 95% CI -8.28 to +10.78; not converged: al_both seed 2 (step cap))"
    link_row = next(line for line in lines if line.startswith("| al_both |"))
    assert "26.75 ± 0.35 (n=2; not converged: al_both seed 2 (step cap))" in link_row
    assert "not converged" not in next(line for line in lines if line.startswith("| vanilla |"))
    assert lines[-2:] == [
        "",
        "Not converged: al_both-small-seed2 stopped at the step cap (step 40,000, its best checkpoint at 39,750), "
        'before a validation plateau. Its test BLEU, and each mean and Δ it enters (the cells that say "not '
        'converged"), are where the run had got to when it stopped, not where it would have settled.',
    ]
    both = [
        typed_row(experiments, {"run": f"{name}-small-seed3", "stop_reason": "time budget"})
        for name in ("vanilla", "al_both")
    ]
    (note,) = comparisons.cut_off_note(converged, both)  # two runs, without their steps: in run order, "their"
    assert note.startswith(
        "Not converged: al_both-small-seed3 stopped at the time budget; vanilla-small-seed3 stopped at the time "
        "budget, before a validation plateau. Their test BLEU, and each mean and Δ they enter ("
    )
    assert comparisons.cut_off(early, both) == []  # a fixed budget stops at its cap by design


def test_another_language_pair_gets_its_columns_once_its_vanilla_cell_has_finished(tmp_path, experiments):
    """A grid named in ``other_pairs`` (the same protocol on ny-en) adds its columns after the grid's own
    pair's, every column then led by its pair; before its vanilla cell finishes it adds nothing, so the
    table and the README's text read as they did."""
    comparisons, report = experiments["comparisons"], experiments["report"]
    early, converged, finish = early_and_converged(tmp_path, experiments)
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
    early, converged, finish = early_and_converged(tmp_path, experiments)
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
    assert "with few seeds it is wide" in note and "one seed (n=1)" not in note


def test_the_seed_interval_is_the_t_interval_of_the_per_seed_differences(experiments):
    """By hand: Δ 0.5, 1.0, 1.5 have mean 1.0 and sd 0.5; t(0.975, 2 df) = 4.3027 (tables); the half-width
    is 4.3027 * 0.5 / sqrt(3) = 1.2421."""
    comparisons = experiments["comparisons"]
    assert [round(comparisons.t_quantile(0.975, df), 3) for df in (1, 2, 4, 30)] == [12.706, 4.303, 2.776, 2.042]
    mean, low, high = comparisons.seed_interval([0.5, 1.0, 1.5])
    assert (round(mean, 4), round(low, 4), round(high, 4)) == (1.0, -0.2421, 2.2421)
    assert comparisons.seed_interval([0.7]) is None


def test_a_delta_whose_interval_spans_zero_says_how_many_seeds_would_settle_it(tmp_path, experiments):
    """By hand, the converged es-en Δ of three seeds (+0.72, +0.91, +1.69: mean 1.107, sd 0.514): at four
    seeds t(0.975, 3) = 3.182 gives a half-width of 3.182 * 0.514 / 2 = 0.82 < 1.107, at three it is
    1.28 > 1.107. An interval already clear of 0 needs no more; a mean near 0 needs more than the cap."""
    comparisons = experiments["comparisons"]
    assert comparisons.seeds_to_exclude_zero([0.72, 0.91, 1.69]) == 4
    assert comparisons.seeds_to_exclude_zero([1.0, 1.1, 1.2]) is None  # clear of 0 already
    assert comparisons.seeds_to_exclude_zero([0.8]) is None  # one seed: no spread to project
    assert comparisons.seeds_to_exclude_zero([0.1, -0.3, 0.2]) == comparisons.MOST_SEEDS + 1
    early, converged, finish = early_and_converged(tmp_path, experiments)
    for seed, (base, link) in {1: (20.0, 20.72), 2: (21.0, 21.91), 3: (20.5, 22.19)}.items():
        finish(early, "vanilla", seed, base)
        finish(early, "al_both", seed, link)
    (note,) = comparisons.seed_spread_note([early], ("vanilla", "al_both"))
    assert "an interval clear of 0 would take this many seeds: al_both 4 (full train set, 600 steps; 3 ran)." in note


def test_a_cells_verdict_is_helps_or_hurts_only_where_its_seed_interval_is_clear_of_zero(experiments):
    """By hand: Δ 1.0, 1.1, 1.2 have mean 1.1 and sd 0.1; the half-width 4.3027 * 0.1 / sqrt(3) = 0.248 keeps
    the interval above 0 (and its mirror below); +0.72, +0.91, +1.69 span 0 at three seeds and settle at four
    (the test above); one seed gives no verdict, however large its Δ."""
    verdict = experiments["comparisons"].seed_verdict
    assert verdict([1.0, 1.1, 1.2]) == "helps (+1.10, n=3, 95% CI +0.85 to +1.35)"
    assert verdict([-1.0, -1.1, -1.2]) == "hurts (-1.10, n=3, 95% CI -1.35 to -0.85)"
    assert verdict([0.72, 0.91, 1.69]) == (
        "undecided (+1.11, n=3, 95% CI -0.17 to +2.38; 4 seeds would settle it at this spread)"
    )
    assert verdict([0.1, -0.3, 0.2]).endswith("; more than 50 seeds would settle it at this spread)")
    assert verdict([5.0]) == "one seed (+5.00), no verdict"


def test_the_glance_states_each_variants_verdict_at_the_plateau_from_the_rows(tmp_path, experiments):
    """The README's glance says, under its table, what each variant's seeds support where runs trained to a
    plateau, written from the rows: a fixed budget's cells are left to the table, a seed vanilla lacks is
    not counted, and the sentence moves as rows land."""
    comparisons, report = experiments["comparisons"], experiments["report"]
    early, converged, finish = early_and_converged(tmp_path, experiments)
    for seed, (base, link) in {1: (20.0, 21.0), 2: (21.0, 23.0)}.items():
        finish(early, "vanilla", seed, base)
        finish(early, "al_both", seed, link)
    assert comparisons.plateau_verdicts([early, converged], ("vanilla", "al_both")) == []
    finish(converged, "vanilla", 1, 25.0, tag="dropout0.2", valid=24.0)
    finish(converged, "vanilla", 1, 20.0, tag="dropout0.1", valid=20.0)
    finish(converged, "al_both", 1, 26.0)
    finish(converged, "al_both", 2, 30.0)  # vanilla's seed 2 has not finished: not counted
    (sentence,) = comparisons.plateau_verdicts([early, converged], ("vanilla", "al_both"))
    assert sentence.endswith("full train set, to a plateau: al_both one seed (+1.00), no verdict.")
    assert "600 steps" not in sentence
    finish(converged, "vanilla", 2, 26.0)
    converged = experiments["grid"].Grid.load(converged.path)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.GLANCE_START}\n{report.GLANCE_END}\nrest\n", encoding="utf-8")
    comparisons._BUDGETS.clear()  # the report's once-per-run cache of the table
    report.update_readme_glance(readme, converged)
    # Δ +1 and +4: mean 2.5, sd 2.121; 12.706 * 2.121 / sqrt(2) = 19.06
    expected = "full train set, to a plateau: al_both undecided (+2.50, n=2, 95% CI -16.56 to +21.56; "
    assert expected in readme.read_text(encoding="utf-8")


def test_the_tuning_table_says_when_the_chosen_value_lies_at_the_ranges_bound(tmp_path, experiments):
    """A value chosen at a bound is the best the grid tried, not a tuned optimum; the page says so under
    the tuning table (and says nothing while the best lies inside the range)."""

    def tuning_table(values: dict[float, float]) -> str:
        path = tmp_path / str(len(values))
        grid = tuning_grid(path, experiments, values=list(values), extend={"step": 0.1, "bounds": [0.0, 0.5]})
        for value, bleu in values.items():
            row = {
                "grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "valid": {"bleu": bleu},
                "test": {"bleu": bleu + 3}, "steps": 100, "tuning": {"field": "dropout", "value": value},
                "size": "small", "output_dir": str(path / "absent"),
            }  # fmt: skip
            with grid.results.open("a", encoding="utf-8") as results:
                results.write(json.dumps(cell_of(row)) + "\n")
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
    grid = tuning_grid(tmp_path, experiments, values=[0.3, 0.4], range_reason=reason)
    assert grid.tuning.range_reason == reason
    section = experiments["sections"].tuning_section(grid, [], tmp_path / "figures")
    intro = section[2]
    assert intro.endswith(f" {reason}.") and intro.count(reason) == 1
    plain = tuning_grid(tmp_path / "plain", experiments, values=[0.3, 0.4])
    assert "step cap" not in experiments["sections"].tuning_section(plain, [], tmp_path / "figures")[2]
    with pytest.raises(ValueError, match=r"unknown keys \['range_reasons'\]"):
        tuning_grid(tmp_path / "typo", experiments, values=[0.3, 0.4], range_reasons=reason)
    with pytest.raises(ValueError, match="range_reason must be a sentence"):
        tuning_grid(tmp_path / "empty", experiments, values=[0.3, 0.4], range_reason=" ")


def test_a_tuning_run_cut_off_before_its_plateau_is_named_under_the_tuning_table(tmp_path, experiments):
    """A tuning run that reached the step cap still improving has a best that is a floor: the value
    chosen over it is not shown to beat it, and the page and the runner's Tuning line say so; a chosen
    value whose run was cut off means the baseline had not converged. Plateau stops say nothing."""
    grid = tuning_grid(tmp_path, experiments, values=[0.3, 0.4], extend={"step": 0.1, "bounds": [0.0, 0.5]})
    stops = {0.3: ("validation plateau", 26.0), 0.4: ("validation plateau", 27.4), 0.5: ("step cap", 20.5)}
    for value, (reason, bleu) in stops.items():
        row = {
            "grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "valid": {"bleu": bleu},
            "test": {"bleu": bleu + 3}, "steps": 40000, "stop_reason": reason, "size": "small",
            "tuning": {"field": "dropout", "value": value}, "output_dir": str(tmp_path / "absent"),
        }  # fmt: skip
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(cell_of(row)) + "\n")
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

    plateau = tuning_grid(tmp_path / "plateau", experiments, values=[0.3, 0.4])
    capped = tuning_grid(tmp_path / "capped", experiments, values=[0.3, 0.4])
    for grid, reason in ((plateau, "validation plateau"), (capped, "step cap")):
        for value, bleu in ((0.3, 26.0), (0.4, 27.4)):
            row = {"grid": grid.name, "run": f"vanilla-small-seed1-dropout{value}", "valid": {"bleu": bleu},
                   "steps": 40000, "stop_reason": reason if value == 0.4 else "validation plateau"}  # fmt: skip
            with grid.results.open("a", encoding="utf-8") as results:
                results.write(json.dumps(cell_of(row)) + "\n")
    assert plateau.tuned_unconverged_note("small") is None
    assert capped.tuned_unconverged_note("small") == (
        "dropout 0.4 stopped at the step cap (step 40,000), not on a validation plateau: the chosen value's "
        "run, the comparison's baseline, had not converged"
    )


def test_the_plateau_swing_is_the_evaluations_noise_from_the_best_step_on(tmp_path, experiments):
    """Mean and largest change of validation BLEU between consecutive evaluations, from the best one to
    the stop (the climb before it left out, evaluations in step order), from the archived log; the page's
    stopping table shows it. A run without its log or a best step, or stopped other than on a plateau,
    has none."""
    comparisons = experiments["comparisons"]
    grid = tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
    row = {
        "grid": grid.name, "run": "vanilla-small-seed1-dropout0.1", "size": "small", "seed": 1,
        "variant": "vanilla", "valid": {"bleu": 21.0}, "test": {"bleu": 24.0}, "steps": 500, "best_step": 200,
        "stop_reason": "validation plateau", "output_dir": str(tmp_path / "absent"),
    }  # fmt: skip
    row = typed_row(experiments, row)
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
    grid = tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
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
        results.writelines(json.dumps(cell_of(row)) + "\n" for row in (vanilla, other, variant))

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


def test_the_page_replays_each_stop_under_the_rule_the_grid_writes_now(tmp_path, experiments):
    """A rule changed while a grid runs holds for the rows before it only where their logs stop at the
    steps they stopped at: the page says so, or names the runs whose logs stop elsewhere."""
    grid = tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
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
            results.write(json.dumps(cell_of(row)) + "\n")
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
    grid = tuning_grid(tmp_path, experiments, values=[0.1, 0.2])
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
    row = typed_row(experiments, row)
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
