"""Turn a grid's results file into its page, ``RESULTS_<grid name>.md``, and PNG figures.

    python recipes/experiments/report.py recipes/experiments/grid_bible_cpu.yaml
    python recipes/experiments/report.py GRID --no-analysis   # no model loading: gate/entropy figures kept

Tables laid out like the Attention Link paper's Tables III/IV/VIII (vanilla / encoder / decoder /
both links, per training size) and the Graph-Transformer paper's Table 2 (fusion variants with
parameter count and speed ratio): every cell is the mean +- sd over seeds of test BLEU, with the
difference from vanilla and sacreBLEU's paired bootstrap p-value on the seeds' pooled translations.
Figures: BLEU by source length per variant, learning curves (validation BLEU against steps and
minutes), the graph gate per layer against sentence length, and attention entropy per layer for
vanilla and linked models (both from `hf_graphtf.analysis`, on the first seed's model). Every run in
the results file is listed; nothing is dropped.

Translations and training logs come from the grid's archive in the repository (archive.py), else from
the runs' output folders; the report refuses to write a page that would lose a run's bootstrap test or
learning curve because neither is here (``run_grid.py GRID --restore`` brings them back).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import archive
from grid import REPO_ROOT, Grid, cpus_differ, resolve_corpus

from hf_graphtf.graph_fusions import FUSIONS

LINK_ROWS = ("vanilla", "al_encoder", "al_decoder", "al_both", "al_both_cumulative")
#: the Graph-Transformer table: vanilla, one variant per registered fusion (named graph_<fusion>), then the
#: option forms of the gate the grids run
GRAPH_ROWS = (
    "vanilla",
    *(f"graph_{name}" for name in FUSIONS),
    "graph_half_gate",
    "graph_shared_gate",
    "graph_gate_al_decoder",
)
GATE_VARIANT = "graph_gate"
ENTROPY_VARIANTS = ("vanilla", "al_encoder", "al_decoder", "al_both")
BOOTSTRAP_SAMPLES = 1000
ANALYSIS_SENTENCES = 300  # test sentences, spread over the split, for the gate and entropy figures


def mean_sd(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f} (n=1)"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} (n={len(values)})"


def _hypotheses(grid: Grid, row: dict[str, Any]) -> list[str] | None:
    return archive.read_hypotheses(grid.archive_folder(row["run"]), REPO_ROOT / row["output_dir"])


def _log_history(grid: Grid, row: dict[str, Any]) -> list[dict[str, Any]] | None:
    return archive.read_log_history(grid.archive_folder(row["run"]), REPO_ROOT / row["output_dir"])


def paired_bootstrap(grid: Grid, baseline: list[dict], system: list[dict], references: list[str]) -> float | None:
    """sacreBLEU's paired bootstrap p-value of ``system`` against ``baseline`` on the pooled translations
    of the seeds both have (seed by seed, against the same references); None without translations."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    seeds = sorted({row["seed"] for row in baseline} & {row["seed"] for row in system})
    pooled_base, pooled_system = [], []
    for seed in seeds:
        base = _hypotheses(grid, next(row for row in baseline if row["seed"] == seed))
        other = _hypotheses(grid, next(row for row in system if row["seed"] == seed))
        if base is None or other is None:
            return None
        pooled_base += base
        pooled_system += other
    if not seeds:
        return None
    test = PairedTest(
        [("baseline", pooled_base), ("system", pooled_system)],
        {"BLEU": BLEU()},
        references=[references * len(seeds)],
        test_type="bs",
        n_samples=BOOTSTRAP_SAMPLES,
    )
    _, results = test()
    return results["BLEU"][1].p_value


def comparison_table(
    grid: Grid,
    rows_by: dict[tuple[str, str], list[dict]],
    variants: tuple[str, ...],
    sizes: list[str],
    references: dict[str, list[str]],
    with_cost: bool,
) -> list[str]:
    """A Markdown table: one row per variant that has runs, per size BLEU mean ± sd, Δ and p."""
    header = ["variant"] + (["parameters", "speed vs vanilla"] if with_cost else [])
    for size in sizes:
        header += [f"BLEU {size}", "Δ", "p", f"tok. BLEU {size}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant in variants:
        if not any(rows_by.get((variant, size)) for size in sizes):
            continue
        cells = [variant]
        if with_cost:
            runs = [row for size in sizes for row in rows_by.get((variant, size), [])]
            cells.append(f"{runs[0]['parameters'] / 1e6:.2f} M")
            cells.append(_speed_ratio(rows_by, variant, sizes, lambda row: training_speed(grid, row)))
        for size in sizes:
            runs = rows_by.get((variant, size), [])
            base = rows_by.get(("vanilla", size), [])
            bleu = [row["test"]["bleu"] for row in runs]
            cells.append(mean_sd(bleu))
            if variant == "vanilla" or not runs or not base:
                cells += ["", ""]
            else:
                seeds = {row["seed"] for row in runs}
                paired = [row for row in base if row["seed"] in seeds] or base  # same seeds as the variant's
                delta = statistics.mean(bleu) - statistics.mean(row["test"]["bleu"] for row in paired)
                p_value = paired_bootstrap(grid, base, runs, references[size]) if size in references else None
                cells += [f"{delta:+.2f}", "–" if p_value is None else f"{p_value:.3f}"]
            cells.append(mean_sd([row["test"]["bleu_tokenized"] for row in runs]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def training_seconds(grid: Grid, row: dict[str, Any]) -> float | None:
    """Seconds the run spent on its training steps: the Trainer's ``train_runtime`` less the validation
    passes inside it, from the run's training log; None without the log.

    Each validation generates greedily for ``max_eval_samples`` sentences; how long that takes depends
    on the validation settings and on how long the model's outputs are at that moment (an early model
    runs to ``generation_max_length``), not on the cost of a training step. In the Bible grids it is
    8-9% of ``train_runtime``. A resumed run's runtime is its last sitting's, so only the validations
    that sitting ran (after ``resumed_from_step``) are subtracted.
    """
    times = _runtime_and_training_seconds(_log_history(grid, row), row)
    return times[1] if times else None


def training_speed(grid: Grid, row: dict[str, Any]) -> float | None:
    """Target tokens per second of training steps alone (``training_seconds``); None without the log.

    The recorded speed is the run's target tokens over the logged ``train_runtime``, so rescaling it by
    that runtime over the training seconds gives the same tokens over the shorter time."""
    times = _runtime_and_training_seconds(_log_history(grid, row), row)
    recorded = row.get("target_tokens_per_second")
    return round(recorded * times[0] / times[1], 1) if times and recorded else None


def _runtime_and_training_seconds(
    history: list[dict[str, Any]] | None, row: dict[str, Any]
) -> tuple[float, float] | None:
    """(``train_runtime``, that less the ``eval_runtime`` of each validation after the row's
    ``resumed_from_step``) from the run's training log. The log's runtime is unrounded: the row keeps
    it to 0.1 s, too coarse for short runs whose validation takes most of it. A resumed run's log keeps
    the earlier sittings' validations (up to the checkpoint it resumed from) but its runtime is the
    last sitting's alone."""
    runtimes = [entry["train_runtime"] for entry in history or [] if "train_runtime" in entry]
    if not runtimes:
        return None
    from_step = row.get("resumed_from_step") or 0
    validating = sum(entry.get("eval_runtime", 0.0) for entry in history if entry.get("step", 0) > from_step)
    return (runtimes[-1], runtimes[-1] - validating) if validating < runtimes[-1] else None


def _speed_ratio(
    rows_by: dict[tuple[str, str], list[dict]],
    variant: str,
    sizes: list[str],
    speed_of: Callable[[dict[str, Any]], float | None] = lambda row: None,
) -> str:
    """The variant's training speed over vanilla's: the median of the ratios of each of its runs to
    vanilla's run of the same size and seed, with their range where they differ, e.g. ``0.98 (0.90-1.16)``.

    A grid runs seed by seed, so a seed's vanilla run and the variant's run share a stretch of hours on
    one machine, while the machine's own speed drifts between stretches (the Bible v2 grid's runs were
    about 20% faster, CPU seconds included, from one morning on). Comparing fastest with fastest mixed
    stretches; pairing by seed does not, and the median over pairs discards one pair that straddled
    such a change or shared the cores with other work. The range shows how far the pairs disagree. A
    pair whose runs ran on different machines (``_same_machine``) is left out: a grid can span hosts,
    and another host's kernels run at another speed.

    ``speed_of`` gives a run's speed without its validation passes (``training_speed``); at a size
    where some run on either side lacks it, both sides fall back to the recorded figure, which
    includes them, so that a ratio never compares one measure with the other.
    """
    ratios = _speed_ratios(rows_by, variant, sizes, speed_of)
    if not ratios:
        return "–"
    if min(ratios) == max(ratios):  # one pair, or vanilla against itself
        return f"{ratios[0]:.2f}"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def _speed_ratios(
    rows_by: dict[tuple[str, str], list[dict]],
    variant: str,
    sizes: list[str],
    speed_of: Callable[[dict[str, Any]], float | None],
) -> list[float]:
    """The ratios `_speed_ratio` summarises: one per run of the variant that has a vanilla run of the same
    size and seed on the same machine."""
    ratios = []
    for size in sizes:
        runs, base = rows_by.get((variant, size), []), rows_by.get(("vanilla", size), [])
        speeds = {id(row): speed_of(row) for row in runs + base}
        if None in speeds.values():
            speeds = {id(row): row.get("target_tokens_per_second") for row in runs + base}
        base_by_seed = {row.get("seed"): row for row in base}
        pairs = [(row, base_by_seed.get(row.get("seed"))) for row in runs]
        ratios += [
            speeds[id(row)] / speeds[id(vanilla)]
            for row, vanilla in pairs
            if vanilla is not None and speeds[id(row)] and speeds[id(vanilla)] and _same_machine(row, vanilla)
        ]
    return ratios


def _same_machine(row: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two runs' speeds compare like with like: the same device and ``--jobs`` setting, and CPU
    records (model, vector kernels, float fingerprint) that do not disagree."""
    return (row.get("device"), row.get("concurrent_runs", 1)) == (
        other.get("device"),
        other.get("concurrent_runs", 1),
    ) and not cpus_differ(_cpu(row), _cpu(other))


def _cpu(row: dict[str, Any]) -> dict[str, Any] | None:
    """The CPU record of a row's provenance (None for rows made before provenance was recorded)."""
    return (row.get("provenance") or {}).get("cpu")


def _device_cell(row: dict[str, Any]) -> str:
    """The row's device, with its CPU's model and vector kernels where the row records them: runs of
    one grid may come from different hosts, whose float sums and speeds differ."""
    cpu = _cpu(row) or {}
    named = " ".join(str(cpu[key]) for key in ("model", "kernels") if cpu.get(key))
    return f"{row['device']}, {named}" if named else row["device"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def variant_styles(variants: list[str]) -> dict[str, dict[str, Any]]:
    """One line style per variant, told apart in every figure of a page: vanilla, the baseline every
    figure is read against, in thick black; the others take the ten tab10 colours in order, then the
    same colours dashed, dotted, dash-dotted (a grid of eleven variants otherwise drew vanilla in
    al_both's colour)."""
    styles: dict[str, dict[str, Any]] = {}
    others = [variant for variant in dict.fromkeys(variants) if variant != "vanilla"]
    if "vanilla" in variants:
        styles["vanilla"] = {"color": "black", "linestyle": "-", "linewidth": 2.2, "zorder": 3}
    for index, variant in enumerate(others):
        linestyle = ("-", "--", ":", "-.")[(index // 10) % 4]
        styles[variant] = {"color": f"C{index % 10}", "linestyle": linestyle, "linewidth": 1.5}
    return styles


def plot_bleu_by_length(rows_by: dict[tuple[str, str], list[dict]], size: str, path: Path) -> Path | None:
    plt = _plt()
    figure, axes = plt.subplots(figsize=(9, 4))
    styles = variant_styles(sorted({variant for variant, _ in rows_by}))  # one style per variant across sizes
    drawn = False
    for (variant, row_size), runs in sorted(rows_by.items()):
        if row_size != size or not runs[0]["test"].get("bleu_by_length"):
            continue
        labels = list(runs[0]["test"]["bleu_by_length"])
        # a bucket without sentences has no BLEU: a gap in the line, not a zero
        scores = [[run["test"]["bleu_by_length"][label]["bleu"] for run in runs] for label in labels]
        means = [statistics.mean(s) if None not in s else float("nan") for s in scores]
        axes.plot(labels, means, marker="o", label=variant, **styles[variant])
        drawn = True
    if not drawn:
        plt.close(figure)
        return None
    axes.set_xlabel("source length (words)")
    axes.set_ylabel("test BLEU (mean over seeds)")
    axes.set_title(f"BLEU by source length, {size}")
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside: lines cross everywhere
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def learning_curve(grid: Grid, row: dict[str, Any]) -> list[tuple[int, float, float]] | None:
    """(step, minutes, valid BLEU) of each evaluation, from the run's training log; minutes are the
    step times the run's mean seconds per training step, validation passes left out
    (``training_seconds``; for a resumed run, its last sitting's steps)."""
    history = _log_history(grid, row)
    if history is None:
        return None
    times = _runtime_and_training_seconds(history, row)
    seconds = times[1] if times else row["train_seconds"]
    steps = (row.get("steps") or 0) - (row.get("resumed_from_step") or 0)
    per_step = seconds / steps / 60 if steps > 0 else float("nan")  # nan: a point matplotlib leaves out
    points = {entry["step"]: entry["eval_bleu"] for entry in history if "eval_bleu" in entry}
    return [(step, step * per_step, bleu) for step, bleu in sorted(points.items())]


def mean_learning_curve(curves: list[list[tuple[int, float, float]]]) -> list[tuple[int, float, float]]:
    """The seeds' mean (step, minutes, valid BLEU) at each evaluation step that every seed reached: a
    seed that stopped early (early stopping, a failed sitting) would otherwise pull the mean's tail
    toward the seeds that ran on."""
    common = sorted(set.intersection(*({point[0] for point in curve} for curve in curves)))
    at_step = [{point[0]: point for point in curve} for curve in curves]
    return [
        (
            step,
            statistics.mean(points[step][1] for points in at_step),
            statistics.mean(points[step][2] for points in at_step),
        )
        for step in common
    ]


def plot_learning_curves(grid: Grid, rows_by: dict[tuple[str, str], list[dict]], size: str, path: Path) -> Path | None:
    """Validation BLEU against steps and against minutes: each seed a thin line, each variant's mean
    over its seeds a bold one (at the evaluations every seed reached), so a grid's thirty-odd runs
    still read as one line per variant."""
    plt = _plt()
    figure, (by_step, by_minute) = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    styles = variant_styles(sorted({variant for variant, _ in rows_by}))  # one style per variant across sizes
    drawn = False
    for (variant, row_size), runs in sorted(rows_by.items()):
        if row_size != size:
            continue
        curves = [curve for curve in (learning_curve(grid, run) for run in runs) if curve]
        if not curves:
            continue
        style = styles[variant]
        for curve in curves:
            for axes, x in ((by_step, 0), (by_minute, 1)):
                axes.plot(
                    [p[x] for p in curve],
                    [p[2] for p in curve],
                    color=style["color"],
                    linestyle=style["linestyle"],
                    linewidth=0.6,
                    alpha=0.35,
                )
        mean = mean_learning_curve(curves)
        by_step.plot([p[0] for p in mean], [p[2] for p in mean], label=f"{variant} (n={len(curves)})", **style)
        by_minute.plot([p[1] for p in mean], [p[2] for p in mean], **style)
        drawn = True
    if not drawn:
        plt.close(figure)
        return None
    by_step.set_xlabel("step")
    by_minute.set_xlabel("minutes of training")
    by_step.set_ylabel("validation BLEU (greedy)")
    by_step.legend(fontsize="small")
    figure.suptitle(f"Learning curves, {size} (bold: mean over seeds; thin: each seed)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def analysis_figures(rows_by: dict[tuple[str, str], list[dict]], size: str, figures: Path, grid: Grid) -> list[Path]:
    """Gate figure of the first graph_gate model and entropy figure of the first vanilla and linked models."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_graphtf  # noqa: F401  (registers the model types)
    from hf_graphtf.analysis import (
        attention_entropy_profile,
        graph_gate_profile,
        plot_attention_entropy,
        plot_gate_profile,
    )

    sources, targets = _test_pairs(grid, ANALYSIS_SENTENCES)

    def first_model(variant: str):
        run = _analysis_run(rows_by, variant, size)
        if run is None or not _has_model(run):
            return None
        folder = REPO_ROOT / run["output_dir"]
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
        return AutoTokenizer.from_pretrained(folder), model

    written = []
    loaded = first_model(GATE_VARIANT)
    if loaded:
        profile = graph_gate_profile(*loaded, sources, [10, 20, 30, 40, 50])
        seed = _analysis_run(rows_by, GATE_VARIANT, size)["seed"]
        title = f"{GATE_VARIANT}, {size}, seed {seed}"
        written.append(plot_gate_profile(profile, figures / f"gates_{size}.png", title=title))
    entropies = {}
    for variant in ENTROPY_VARIANTS:
        loaded = first_model(variant)
        if loaded:
            entropies[variant] = attention_entropy_profile(*loaded, sources, targets)
    if entropies:
        written.append(plot_attention_entropy(entropies, figures / f"entropy_{size}.png"))
    return written


def _analysis_run(rows_by: dict[tuple[str, str], list[dict]], variant: str, size: str) -> dict[str, Any] | None:
    """The run whose model the gate or entropy figure of ``variant`` at ``size`` is drawn from: its first seed."""
    runs = rows_by.get((variant, size), [])
    return runs[0] if runs else None


def _has_model(row: dict[str, Any]) -> bool:
    return (REPO_ROOT / row["output_dir"] / "config.json").is_file()


def _rows_by_cell(grid: Grid) -> dict[tuple[str, str], list[dict]]:
    """The grid's finished rows by (variant, size), each list in seed order. With tuning, the tuning runs
    at values that were not chosen stay out of the cells (the tuning table shows them)."""
    rows_by: dict[tuple[str, str], list[dict]] = defaultdict(list)
    cells = {run.name for run in grid.cell_runs()} if grid.tuning is not None else None
    for row in grid.finished_rows():
        if cells is not None and row["run"] not in cells:
            continue
        rows_by[(row["variant"], row["size"])].append(row)
    for runs in rows_by.values():
        runs.sort(key=lambda row: row["seed"])
    return rows_by


def write_report(grid: Grid, analysis: bool = True) -> Path:
    """Write the grid's page (``grid.page``) and its figures. Without ``analysis`` no model is loaded:
    the gate and entropy figures are not redrawn, and those already in the figures folder (drawn from
    the same first-seed models, which a finished run never changes) stay linked."""
    rows = grid.finished_rows()
    rows_by = _rows_by_cell(grid)
    sizes = [size for size in grid.sizes if any(size == key[1] for key in rows_by)]
    references = _references(grid, sizes)
    out = grid.results.parent
    figures = out / "figures" / grid.name
    figures.mkdir(parents=True, exist_ok=True)
    figure_paths: list[Path] = []
    for size in sizes:
        figure_paths += [
            path
            for path in (
                plot_bleu_by_length(rows_by, size, figures / f"bleu_by_length_{size}.png"),
                plot_learning_curves(grid, rows_by, size, figures / f"learning_curves_{size}.png"),
            )
            if path
        ]
        if analysis:
            figure_paths += analysis_figures(rows_by, size, figures, grid)
        else:
            drawn_before = (figures / f"gates_{size}.png", figures / f"entropy_{size}.png")
            figure_paths += [path for path in drawn_before if path.is_file()]
    devices = sorted({row["device"] for row in rows})
    budgets = grid.sizes.items()
    lines = [
        f"# Experiment results: grid `{grid.name}`",
        "",
        f"Generated by `python recipes/experiments/report.py {_relative(grid.path)}` on "
        f"{datetime.date.today().isoformat()} from `{_relative(grid.results)}` ({len(rows)} runs; "
        f"devices: {'; '.join(devices) or '–'}). Runs: `python recipes/experiments/run_grid.py "
        f"{_relative(grid.path)}`.",
        "",
        *_progress(grid, rows),
        "Protocol: the committed Bible recipes with these overrides for every run: "
        + ", ".join(f"`{key}: {_yaml(value)}`" for key, value in grid.common.items())
        + "; budgets per size: "
        + "; ".join(
            f"{size}: " + ", ".join(f"`{k}: {_yaml(v)}`" for k, v in values.items()) for size, values in budgets
        )
        + ". Test: full test split, beam 5, WEB reference, sacreBLEU "
        + (f"(`{rows[0]['test']['bleu_signature']}`)" if rows else "")
        + ". Cells: mean ± sd over seeds; Δ: difference of means from vanilla on the same seeds; "
        "p: sacreBLEU paired bootstrap "
        f"({BOOTSTRAP_SAMPLES} samples) on the seeds' pooled translations. tok. BLEU: Moses-tokenized, the papers' "
        "multi-bleu convention. Speed vs vanilla: target tokens/s of each run of the variant over "
        "vanilla's run of the same size and seed on the same machine (device and CPU, see the runs' "
        "table), median over those pairs, their range in brackets (a grid runs seed by seed, so each "
        "pair ran close in time; the machine's speed drifts between sittings); training steps only, the "
        "validation passes left out (`train tok/s` below), at sizes where every run of both sides has "
        "its training log. A rough guide: the controlled comparison "
        "(interleaved, one thread, CPU clock) is recipes/benchmarks/RESULTS.md.",
        "",
        *_tuning_section(grid, rows),
        *_stopping_section(grid, rows),
        *_budgets_section(grid),
        "## Attention link (as the paper's Tables III/IV/VIII)",
        "",
        *comparison_table(grid, rows_by, LINK_ROWS, sizes, references, with_cost=False),
        "",
        "## Graph-group attention (as the Graph-Transformer paper's Table 2)",
        "",
        *comparison_table(grid, rows_by, GRAPH_ROWS, sizes, references, with_cost=True),
        "",
        "## Figures",
        "",
        *[f"![{path.stem}](figures/{grid.name}/{path.name})" for path in figure_paths],
        "",
        "## Every run",
        "",
        "`cores used` is the CPU time of a run's processes per second of wall time (rows made since "
        "2026-11-22): compare it between runs of the same shape; one that shared the machine with other "
        "work got fewer cores and its speed reads low.",
        "",
        "`target tok/s` is over the Trainer's whole training run, validation passes included; `train tok/s` "
        "leaves them out (from the run's training log). A run interrupted and resumed from a checkpoint "
        "shows that checkpoint's step under `steps`; its speeds, wall seconds and cores are those of the "
        "sitting that finished it (rows made since 2026-11-23 record this; older rows do not say).",
        "",
        "| run | device | steps | epochs | valid BLEU | test BLEU | chrF | chrF++ | tok. BLEU | stuttering | "
        "target tok/s | train tok/s | wall s | cores used |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda row: (row["size"], row["variant"], row["seed"])):
        test = row["test"]
        stutter = test.get("repeated_token_outputs")
        lines.append(
            f"| {row['run']} | {_device_cell(row)} | {_steps_cell(row)} | {row['epochs']} | {row['valid']['bleu']} | "
            f"{test['bleu']} | {test['chrf']} | {test['chrf_pp']} | {test['bleu_tokenized']} | "
            f"{'–' if stutter is None else f'{stutter:.1%}'} | {row['target_tokens_per_second']} | "
            f"{training_speed(grid, row) or '–'} | {row['wall_seconds']} | {row.get('cores_used') or '–'} |"
        )
    path = grid.page
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _tuning_section(grid: Grid, rows: list[dict[str, Any]]) -> list[str]:
    """The tuning runs of a grid that tunes its baseline: each value's validation and test BLEU, where it
    stopped, and the value chosen (best validation BLEU; test BLEU plays no part)."""
    if grid.tuning is None:
        return []
    tuning = grid.tuning
    by_name = {row["run"]: row for row in rows}
    lines = [
        f"## Tuning: {tuning.field} of {tuning.variant}, seed {tuning.seed}",
        "",
        f"Every run of a size uses the {tuning.field} whose {tuning.variant} run reached the best validation "
        f"BLEU; {tuning.variant}'s seed-{tuning.seed} cell is that run.",
        "",
        f"| size | {tuning.field} | valid BLEU | test BLEU | stopped at | best step | why | minutes | chosen |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size in grid.sizes:
        curves = {
            (f"{tuning.variant}, {tuning.field} {row['tuning']['value']}", size): [row]
            for row in rows
            if row.get("tuning") and row["size"] == size
        }
        figure = grid.results.parent / "figures" / grid.name / f"tuning_{size}.png"
        figure.parent.mkdir(parents=True, exist_ok=True)
        if curves and plot_learning_curves(grid, curves, size, figure):
            lines[4:4] = [f"![tuning learning curves, {size}](figures/{grid.name}/{figure.name})", ""]
        chosen = grid.tuned_value(size)
        for value, run in zip(tuning.values, grid.tuning_runs(size)):
            row = by_name.get(run.name)
            if row is None:
                lines.append(f"| {size} | {value} | – | – | – | – | not finished | – | |")
                continue
            lines.append(
                f"| {size} | {value} | {row['valid']['bleu']} | {row['test']['bleu']} | {row['steps']} | "
                f"{row.get('best_step') or '–'} | {row.get('stop_reason') or '–'} | {_minutes(row)} | "
                f"{'yes' if chosen == value else ''} |"
            )
    return [*lines, ""]


def _minutes(row: dict[str, Any]) -> str:
    minutes = row.get("train_minutes")
    return "–" if minutes is None else f"{minutes:.0f}"


def _stopping_section(grid: Grid, rows: list[dict[str, Any]]) -> list[str]:
    """For runs that train until validation BLEU stops improving: where each stopped and why, its best
    step, its training minutes and precision, and what the seeds still to run will cost at those minutes."""
    stopped = [row for row in rows if row.get("stop_reason")]
    if not stopped or not any(row["stop_reason"] == "validation plateau" for row in stopped):
        return []
    lines = [
        "## When each run stopped",
        "",
        "A run stops after `early_stopping_patience` evaluations without a new best validation BLEU "
        "(`validation plateau`); `step cap` means it reached `max_steps`, the safety net, and did not "
        "converge. The test split is translated by the best checkpoint. Minutes: training time over every "
        "sitting, validation passes included, on the run's machine (see `cores used` in the runs' table: "
        "other work on the machine slows a run without changing its result).",
        "",
        "| run | stopped at | why | best step | valid BLEU (best) | test BLEU | minutes | precision |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(stopped, key=lambda row: (row["size"], row["seed"], row["variant"], row["run"])):
        lines.append(
            f"| {row['run']} | {row['steps']} | {row['stop_reason']} | {row.get('best_step') or '–'} | "
            f"{row['valid']['bleu']} | {row['test']['bleu']} | {_minutes(row)} | {row.get('precision') or 'fp32'} |"
        )
    finished = {row["run"] for row in rows}
    to_run = [run for run in grid.runs() if run.name not in finished]
    minutes_by_variant: dict[str, list[float]] = defaultdict(list)
    for row in stopped:
        if row.get("train_minutes"):
            minutes_by_variant[row["variant"]].append(row["train_minutes"])
    every = [minutes for values in minutes_by_variant.values() for minutes in values]
    if to_run and every:
        estimate = sum(statistics.mean(minutes_by_variant.get(run.variant) or every) for run in to_run)
        lines += [
            "",
            f"Still to run: {len(to_run)} runs, about {estimate / 60:.1f} hours of training at the minutes each "
            "variant's finished runs took (a variant with none yet at the mean of all finished runs, "
            f"{statistics.mean(every):.0f} minutes; on this 2-core machine, one run at a time).",
        ]
    return [*lines, *_without_speed_flags(stopped, lambda row: _validation_minutes(grid, row)), ""]


SPEED_FLAGS = REPO_ROOT / "recipes" / "benchmarks" / "speed_flags.json"


def _without_speed_flags(
    stopped: list[dict[str, Any]],
    validation_minutes: Callable[[dict[str, Any]], float | None],
    measured: Path = SPEED_FLAGS,
) -> list[str]:
    """What the bf16 runs would have cost in fp32, from ``recipes/benchmarks/speed_flags.py --json``,
    which trains both side by side: each run's training minutes times bf16's training speed-up, and its
    validation minutes (from its log) times the measured fp32/bf16 ratio of one validation pass (bf16
    generation is not faster on a CPU). No grid trains a run twice to measure this, so it is an
    estimate, and the page says so and on which host the ratios were measured."""
    bf16_rows = [row for row in stopped if row.get("precision") == "bf16" and row.get("train_minutes")]
    if not bf16_rows or not measured.is_file():
        return []
    record = json.loads(measured.read_text(encoding="utf-8"))
    fp32, bf16 = record["modes"].get("fp32"), record["modes"].get("bf16")
    if not fp32 or not bf16:
        return []
    validation_ratio = fp32["evaluation_seconds"] / bf16["evaluation_seconds"]
    minutes, estimates = [], []
    for row in bf16_rows:
        validating = min(validation_minutes(row) or 0.0, row["train_minutes"])
        minutes.append(row["train_minutes"])
        estimates.append((row["train_minutes"] - validating) * bf16["speed_vs_fp32"] + validating * validation_ratio)
    hosts = {(_cpu(row) or {}).get("float_fingerprint") for row in bf16_rows}
    host = "the runs' host" if hosts == {record["float_fingerprint"]} else f"host {record['float_fingerprint']}"
    return [
        "",
        f"Speed flags: the {len(minutes)} bf16 runs took {statistics.mean(minutes):.0f} minutes on average "
        f"({min(minutes):.0f}-{max(minutes):.0f}); in fp32 they would take about {statistics.mean(estimates):.0f}. "
        f"That is an estimate, not a run: bf16 autocast trained {bf16['speed_vs_fp32']:.2f}x "
        f"±{bf16['speed_vs_fp32_half_iqr']:.2f} as fast as fp32 at the same loss and validated at "
        f"{1 / validation_ratio:.2f}x the time (`{record['command']}`, {record['date']}, {host}; "
        "[table](../benchmarks/RESULTS.md)), applied to each run's training and validation minutes.",
    ]


def _validation_minutes(grid: Grid, row: dict[str, Any]) -> float | None:
    """Minutes of the validation passes in a run's training log (every sitting's, up to the checkpoint
    a resumed sitting started from); None without the log."""
    history = _log_history(grid, row)
    return None if history is None else sum(entry.get("eval_runtime", 0.0) for entry in history) / 60


def budget_label(grid: Grid, size: str) -> str:
    """How a size of a grid trains, for the budgets table: ``10K pairs, 600 steps`` or ``10K pairs, to a
    plateau``."""
    values = {**grid.common, **grid.sizes[size]}
    data = {"train_10k": "10K pairs", "train": "full train set"}.get(values.get("train_split", "train"))
    data = data or values.get("train_split", "train")
    if values.get("early_stopping_patience", 100) < 50:
        return f"{data}, to a plateau"
    return f"{data}, {int(values['max_steps']):,} steps" if values.get("max_steps") else data


def budgets_table(grids: list[Grid], variants: tuple[str, ...]) -> list[str]:
    """Each variant's difference from vanilla (test BLEU, mean over seeds) and its paired-bootstrap p at
    every budget of ``grids``, with the number of seeds, its parameters and its training speed: how the
    verdict moves as training goes on. Budgets are ordered as given."""
    columns: list[tuple[str, str, float]] = []
    deltas, params, speeds = defaultdict(dict), {}, defaultdict(list)
    for grid in grids:
        rows_by = _rows_by_cell(grid)
        sizes = [size for size in grid.sizes if (("vanilla", size) in rows_by)]
        references = _references(grid, sizes)
        for size in sizes:
            label = budget_label(grid, size)
            values = {**grid.common, **grid.sizes[size]}
            plateau = values.get("early_stopping_patience", 100) < 50
            columns.append((label, values.get("train_split", ""), float("inf") if plateau else values["max_steps"]))
            base = rows_by[("vanilla", size)]
            for variant in variants:
                runs = rows_by.get((variant, size), [])
                if variant == "vanilla" or not runs:
                    continue
                seeds = {row["seed"] for row in runs}
                paired = [row for row in base if row["seed"] in seeds]
                if not paired:
                    continue
                delta = statistics.mean(row["test"]["bleu"] for row in runs) - statistics.mean(
                    row["test"]["bleu"] for row in paired
                )
                p_value = paired_bootstrap(grid, paired, runs, references[size]) if size in references else None
                p_text = "" if p_value is None else f", p {p_value:.3f}"
                deltas[variant][label] = f"{delta:+.2f} (n={len(paired)}{p_text})"
                params.setdefault(variant, runs[0]["parameters"] / base[0]["parameters"] - 1)
                speeds[variant] += _speed_ratios(rows_by, variant, [size], lambda row, g=grid: training_speed(g, row))
    # by training split (10K before the full set), then by training length, a plateau last
    columns.sort(key=lambda column: (column[1] != "train_10k", column[1], column[2]))
    labels = [column[0] for column in columns]
    header = ["variant", *[f"Δ BLEU, {label}" for label in labels], "extra parameters", "training speed (pairs)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant in variants:
        if variant == "vanilla" or variant not in deltas:
            continue
        cells = [deltas[variant].get(label, "–") for label in labels]
        ratios = speeds.get(variant)
        speed = f"{statistics.median(ratios):.2f}x ({len(ratios)})" if ratios else "–"
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {params[variant]:+.0%} | {speed} |")
    return lines


BUDGETS_NOTE = (
    "Training speed: the variant's training tokens/s over vanilla's run of the same size, seed and machine, "
    "median over those pairs in every grid (their number in brackets); runs of a grid run hours apart on a "
    "shared machine, so this is a rough guide, and the controlled comparison (interleaved, one process) is "
    "recipes/benchmarks/RESULTS.md."
)


_BUDGETS: dict[Path, list[str]] = {}


def grid_budgets_table(grid: Grid) -> list[str]:
    """`budgets_table` of the grid's ``earlier_budgets`` and the grid itself, over the grid's own variants
    (computed once per run of the report: the bootstrap tests take a while)."""
    if grid.path not in _BUDGETS:
        grids = [Grid.load(REPO_ROOT / path) for path in grid.earlier_budgets] + [grid]
        _BUDGETS[grid.path] = budgets_table(grids, tuple(grid.variants))
    return _BUDGETS[grid.path]


def _budgets_section(grid: Grid) -> list[str]:
    """The grid's verdict beside the earlier grids' it names (``earlier_budgets``)."""
    if not grid.earlier_budgets:
        return []
    earlier = [Grid.load(REPO_ROOT / path) for path in grid.earlier_budgets]
    return [
        "## How the verdict moves with training",
        "",
        "Δ: the variant's mean test BLEU minus vanilla's on the same seeds (n), sacreBLEU paired bootstrap p on "
        "the pooled translations. The early budgets are "
        + ", ".join(f"[{g.name}]({g.page.name})" for g in earlier)
        + ". "
        + BUDGETS_NOTE,
        "",
        *grid_budgets_table(grid),
        "",
    ]


def _progress(grid: Grid, rows: list[dict[str, Any]]) -> list[str]:
    """A paragraph saying how much of the grid has run, when some of it has not (else nothing): a grid
    takes many sittings, and a page drawn part-way must not read as the whole comparison."""
    finished = {row["run"] for row in rows}
    planned = grid.runs()
    done = sum(run.name in finished for run in planned)
    if done == len(planned):
        return []
    per_size = []
    for size in grid.sizes:
        runs = [run for run in planned if run.size == size]
        per_size.append(f"{size}: {sum(run.name in finished for run in runs)} of {len(runs)}")
    return [
        f"**Partial:** {done} of the grid's {len(planned)} runs have finished ({'; '.join(per_size)}). "
        "Each cell says over how many seeds it is (n), and each Δ compares with vanilla's runs of the same "
        "seeds where vanilla has them.",
        "",
    ]


def _steps_cell(row: dict[str, Any]) -> str:
    resumed = row.get("resumed_from_step")
    return f"{row['steps']} (resumed at {resumed})" if resumed else str(row["steps"])


README_START, README_END = "<!-- experiment tables: start -->", "<!-- experiment tables: end -->"
GLANCE_START, GLANCE_END = "<!-- results at a glance: start -->", "<!-- results at a glance: end -->"


def update_readme_glance(readme: Path, grid: Grid) -> None:
    """Write the grid's budgets table (`grid_budgets_table`) between the README's at-a-glance markers."""
    text = readme.read_text(encoding="utf-8")
    if GLANCE_START not in text or GLANCE_END not in text:
        raise ValueError(f"{readme}: no {GLANCE_START} ... {GLANCE_END} markers to write the table between")
    runs = sum(len(Grid.load(REPO_ROOT / path).finished_rows()) for path in grid.earlier_budgets)
    runs += len(grid.finished_rows())
    body = "\n".join(
        [
            f"Generated by `python recipes/experiments/report.py {_relative(grid.path)} --readme README.md` on "
            f"{datetime.date.today().isoformat()} from {runs} runs; Bible es-en test split, beam 5, sacreBLEU.",
            "",
            *grid_budgets_table(grid),
        ]
    )
    before, rest = text.split(GLANCE_START, 1)
    after = rest.split(GLANCE_END, 1)[1]
    readme.write_text(f"{before}{GLANCE_START}\n{body}\n{GLANCE_END}{after}", encoding="utf-8")


def update_readme(readme: Path, page: Path) -> None:
    """Copy the two comparison tables of ``page`` between the README's markers (generated, never typed)."""
    text = readme.read_text(encoding="utf-8")
    if README_START not in text or README_END not in text:
        raise ValueError(f"{readme}: no {README_START} ... {README_END} markers to write the tables between")
    report = page.read_text(encoding="utf-8")
    tables = report.split("## Attention link", 1)[1].split("## Figures", 1)[0]
    header = report.split("\n\n", 2)[1]  # the "Generated by ..." paragraph
    body = f"{header}\n\n#### Attention link{tables.replace('## Graph-group', '#### Graph-group')}".rstrip()
    before, rest = text.split(README_START, 1)
    after = rest.split(README_END, 1)[1]
    readme.write_text(f"{before}{README_START}\n{body}\n{README_END}{after}", encoding="utf-8")


def _yaml(value: Any) -> str:
    """A value as the grid file spells it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _relative(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _corpus(grid: Grid) -> tuple[str, str, str]:
    """The grid's corpus (absolute path or Hub id) and language pair, from its first variant's recipe."""
    from hf_graphtf.training.arguments import load_recipe

    recipe = {**load_recipe(REPO_ROOT / next(iter(grid.variants.values()))["recipe"]), **grid.common}
    corpus = resolve_corpus(recipe["corpus"])
    return corpus, recipe.get("src_lang", "es"), recipe.get("tgt_lang", "en")


def _test_pairs(grid: Grid, limit: int | None = None) -> tuple[list[str], list[str]]:
    """Sources and references of the grid's test split (the same for every size), spread over the split."""
    from hf_graphtf.data import load_parallel_corpus

    corpus, src_lang, tgt_lang = _corpus(grid)
    data = load_parallel_corpus(corpus, src_lang=src_lang, tgt_lang=tgt_lang, split="test")
    count = min(limit or len(data), len(data))
    pairs = data.select([i * len(data) // count for i in range(count)])["translation"]
    return [pair[src_lang] for pair in pairs], [pair[tgt_lang] for pair in pairs]


def _references(grid: Grid, sizes: list[str]) -> dict[str, list[str]]:
    try:
        _, references = _test_pairs(grid)
    except (FileNotFoundError, ValueError):
        return {}
    return {size: references for size in sizes}


def runs_missing_outputs(grid: Grid) -> list[str]:
    """Runs with neither an archive nor an output folder holding their translations and training log.

    Without them the report has no bootstrap test and no learning curve for the run, and would
    overwrite a page that had them with one that shows "–". Runs archive themselves as they finish;
    ``run_grid.py GRID --restore`` archives older ones."""
    return [
        row["run"]
        for row in grid.finished_rows()
        if not (
            archive.is_archived(grid.archive_folder(row["run"])) or archive.can_archive(REPO_ROOT / row["output_dir"])
        )
    ]


def models_missing_for_analysis(grid: Grid) -> list[str]:
    """Runs whose model the gate and entropy figures are drawn from but which is not on this machine
    (models are not archived: at tens of MB each they stay in the output folders)."""
    rows_by = _rows_by_cell(grid)
    needed = [
        _analysis_run(rows_by, variant, size) for size in grid.sizes for variant in (GATE_VARIANT, *ENTROPY_VARIANTS)
    ]
    return [row["run"] for row in needed if row is not None and not _has_model(row)]


def _some(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", help="grid YAML file")
    parser.add_argument(
        "--no-analysis",
        action="store_true",
        help="do not redraw the gate and entropy figures (no model is loaded; those already drawn stay linked)",
    )
    parser.add_argument(
        "--readme",
        type=Path,
        help="also write into this README (between markers): the budgets table of a grid that names "
        "earlier_budgets, else the grid's two comparison tables",
    )
    parser.add_argument(
        "--allow-missing-outputs",
        action="store_true",
        help="write the report even where runs' output folders are missing (their p-values and curves drop out)",
    )
    args = parser.parse_args(argv)
    grid = Grid.load(args.grid)
    missing = runs_missing_outputs(grid)
    if missing and not args.allow_missing_outputs:
        print(
            f"error: {len(missing)} runs in {_relative(grid.results)} have no archive and no output folder "
            f"here ({_some(missing)}); the report would lose their bootstrap tests and learning curves. "
            f"Restore them with `python recipes/experiments/run_grid.py {_relative(grid.path)} --restore` "
            "(it reruns what it must and checks each rerun reproduces its row), or pass --allow-missing-outputs.",
            file=sys.stderr,
        )
        return 2
    models = [] if args.no_analysis else models_missing_for_analysis(grid)
    if models:
        print(
            f"error: the gate and entropy figures are drawn from the models of {_some(models)}, which are not "
            "on this machine; pass --no-analysis to keep the figures drawn from them before, or restore "
            "the runs (`run_grid.py GRID --restore` reruns those without an archive).",
            file=sys.stderr,
        )
        return 2
    page = write_report(grid, analysis=not args.no_analysis)
    if args.readme:
        if grid.earlier_budgets:
            update_readme_glance(args.readme, grid)
        else:
            update_readme(args.readme, page)
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
