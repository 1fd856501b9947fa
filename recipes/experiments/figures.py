"""The figures of a grid's page: BLEU by source length, learning curves (validation BLEU against steps
and minutes), and, from the first seed's models, the graph gate per layer against sentence length and
attention entropy per layer (both from `hf_graphtf.analysis`)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from .grid import REPO_ROOT, Grid, baseline_row
from .rows import Row, RowsByCell
from .speeds import runtime_and_training_seconds, same_machine, same_settings

ANALYSIS_SENTENCES = 300  # test sentences, spread over the split, for the gate and entropy figures

#: the Attention Link paper's gain of the link over its baseline (test BLEU) at each training size it reports
#: (its Tables III-V: IWSLT14, a larger model than these grids'), drawn beside a grid's own as the paper's
PAPER_LINK_GAINS = (("10K pairs", 1.0), ("30K pairs", 0.8), ("full IWSLT", 0.3))


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


def plot_bleu_by_length(rows_by: RowsByCell, size: str, path: Path) -> Path | None:
    plt = _plt()
    figure, axes = plt.subplots(figsize=(9, 4))
    styles = variant_styles(sorted({variant for variant, _ in rows_by}))  # one style per variant across sizes
    drawn = False
    for (variant, row_size), runs in sorted(rows_by.items()):
        if row_size != size or not runs[0].test.get("bleu_by_length"):
            continue
        labels = list(runs[0].test["bleu_by_length"])
        # a bucket without sentences has no BLEU: a gap in the line, not a zero
        scores = [[run.test["bleu_by_length"][label]["bleu"] for run in runs] for label in labels]
        means = [statistics.mean(s) if None not in s else float("nan") for s in scores]
        axes.plot(labels, means, marker="o", label=variant, **styles[variant])
        drawn = True
    if drawn:
        axes.set_xlabel("source length (words)")
        axes.set_ylabel("test BLEU (mean over seeds)")
        axes.set_title(f"BLEU by source length, {size}")
        axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside: lines cross
    return _save(plt, figure, path if drawn else None)


def plot_delta_by_size(grid: Grid, variant: str, path: Path) -> Path | None:
    """Δ test BLEU of ``variant`` over vanilla against training size, at the plateau: the mean over seeds with
    its seed-level 95% interval (a point alone where one seed ran), and the paper's points beside them
    (`PAPER_LINK_GAINS`), on one axis of sizes smallest first. None where no size trained to a plateau has a
    compared seed."""
    from .comparisons import plateau_deltas, seed_interval, split_label

    ours = [(split_label(split), deltas) for split, deltas in plateau_deltas(grid, variant)]
    if not ours:
        return None
    labels = sorted({label for label, _ in ours} | {label for label, _ in PAPER_LINK_GAINS}, key=_size_rank)
    plt = _plt()
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.axhline(0, color="grey", linewidth=0.8)
    for label, deltas in ours:
        interval = seed_interval(deltas)
        mean, low, high = interval if interval else (deltas[0], deltas[0], deltas[0])
        x = labels.index(label) - 0.08
        axes.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o", color="C0", capsize=4)
        axes.annotate(
            f"{mean:+.2f} (n={len(deltas)})", (x, mean), textcoords="offset points", xytext=(8, -16), fontsize="small"
        )
    axes.plot([], [], "o", color="C0", label=f"{variant}, {grid.pair} (this grid; 95% CI over seeds)")
    paper_x = [labels.index(label) + 0.08 for label, _ in PAPER_LINK_GAINS]
    axes.plot(
        paper_x,
        [gain for _, gain in PAPER_LINK_GAINS],
        "s--",
        color="C1",
        label="the paper's (IWSLT14, a larger model)",
    )
    axes.set_xticks(range(len(labels)), labels)
    axes.set_xlim(-0.5, len(labels) - 0.5)
    axes.set_xlabel("training pairs")
    axes.set_ylabel("Δ test BLEU over vanilla, at the plateau")
    axes.set_title("The link's gain against training size")
    axes.legend(fontsize="small")
    return _save(plt, figure, path)


def _size_rank(label: str) -> tuple[float, str]:
    """A sort key for size labels (``5K pairs``, ``full train set``): by thousands of pairs, a full set last."""
    thousands = label.split("K pairs")[0]
    return (float(thousands) if thousands.isdigit() else math.inf, label)


def _save(plt, figure, path: Path | None) -> Path | None:
    """Write ``figure`` to ``path`` (None: nothing was drawn, nothing is written) and free it either way: a
    report draws a figure per size and grid, and pyplot keeps every open one."""
    if path is not None:
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def learning_curve(grid: Grid, row: Row) -> list[tuple[int, float, float]] | None:
    """(step, minutes, valid BLEU) of each evaluation, from the run's training log; minutes are the
    step times the run's mean seconds per training step, validation passes left out
    (``training_seconds``; for a resumed run, its last sitting's steps)."""
    history = grid.log_history(row)
    if history is None:
        return None
    times = runtime_and_training_seconds(history, row)
    seconds = times[1] if times else row.train_seconds
    steps = (row.steps or 0) - (row.resumed_from_step or 0)
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


def _share(count: int, total: int) -> str:
    return "" if count == total else f" ({count} of {total} runs)"


def minutes_elsewhere(rows_by: RowsByCell, size: str) -> dict[str, str]:
    """For the minutes panel of the learning curves: each variant with runs that trained on another
    machine than vanilla's run of the same seed, or in another precision or attention kernel, and a
    legend label saying how many (a grid can move between hosts and settings part-way, and such minutes
    do not compare with vanilla's)."""
    labels = {}
    for (variant, row_size), runs in sorted(rows_by.items()):
        if row_size != size:
            continue
        bases = [(run, base) for run in runs if (base := baseline_row(rows_by, variant, size, run.seed)) is not None]
        elsewhere = sum(not same_machine(run, base) for run, base in bases)
        otherwise = sum(same_machine(run, base) and not same_settings(run, base) for run, base in bases)
        what = [f"another host than vanilla's{_share(elsewhere, len(runs))}"] if elsewhere else []
        what += [f"another precision or attention kernel{_share(otherwise, len(runs))}"] if otherwise else []
        if what:
            labels[variant] = f"{variant}: {'; '.join(what)}, minutes not comparable"
    return labels


def plot_learning_curves(
    grid: Grid,
    rows_by: RowsByCell,
    size: str,
    path: Path,
    title: str | None = None,
) -> Path | None:
    """Validation BLEU against steps and against minutes: each seed a thin line, each variant's mean
    over its seeds a bold one (at the evaluations every seed reached), so a grid's thirty-odd runs
    still read as one line per variant: finished runs only. The minutes panel names the variants with
    runs from another host than vanilla's (`minutes_elsewhere`)."""
    plt = _plt()
    figure, (by_step, by_minute) = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    elsewhere = minutes_elsewhere(rows_by, size)
    # one style per variant across sizes
    styles = variant_styles(sorted({variant for variant, _ in rows_by}))
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
        by_minute.plot([p[1] for p in mean], [p[2] for p in mean], label=elsewhere.get(variant, "_"), **style)
        drawn = True
    if drawn:
        by_step.set_xlabel("step")
        by_minute.set_xlabel("minutes of training")
        by_step.set_ylabel("validation BLEU (greedy)")
        by_step.legend(fontsize="small")
        if elsewhere:
            by_minute.legend(fontsize="small", loc="lower right")
        figure.suptitle(title or f"Learning curves, {size} (bold: mean over seeds; thin: each seed)")
    return _save(plt, figure, path if drawn else None)


def analysis_figures(rows_by: RowsByCell, size: str, figures: Path, grid: Grid) -> list[Path]:
    """Gate figure of the first graph_gate model and entropy figure of the first vanilla and linked models."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_graphtf  # noqa: F401  (registers the model types)
    from hf_graphtf.analysis import (
        attention_entropy_profile,
        graph_gate_profile,
        plot_attention_entropy,
        plot_gate_profile,
    )

    sources, targets = grid.test_pairs(ANALYSIS_SENTENCES)

    def first_model(variant: str):
        run = analysis_run(rows_by, variant, size)
        if run is None or not has_model(run):
            return None
        folder = REPO_ROOT / run.output_dir
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
        return AutoTokenizer.from_pretrained(folder), model

    written = []
    gated = gate_variant(grid, rows_by, size)
    loaded = first_model(gated) if gated else None
    if loaded:
        profile = graph_gate_profile(*loaded, sources, [10, 20, 30, 40, 50])
        seed = analysis_run(rows_by, gated, size).seed
        title = f"{gated}, {size}, seed {seed}"
        written.append(plot_gate_profile(profile, figures / f"gates_{size}.png", title=title))
    entropies = {}
    for variant in grid.figures.entropy:
        loaded = first_model(variant)
        if loaded:
            entropies[variant] = attention_entropy_profile(*loaded, sources, targets)
    if entropies:
        written.append(plot_attention_entropy(entropies, figures / f"entropy_{size}.png"))
    return written


def gate_variant(grid: Grid, rows_by: RowsByCell, size: str) -> str | None:
    """The variant whose first model the gate figure at ``size`` is drawn from: the first of the grid file's
    ``figures.gates`` that has run."""
    return next((variant for variant in grid.figures.gates if rows_by.get((variant, size))), None)


def analysis_run(rows_by: RowsByCell, variant: str, size: str) -> Row | None:
    """The run whose model the gate or entropy figure of ``variant`` at ``size`` is drawn from: its first seed."""
    runs = rows_by.get((variant, size), [])
    return runs[0] if runs else None


def has_model(row: Row) -> bool:
    return (REPO_ROOT / row.output_dir / "config.json").is_file()


def models_missing_for_analysis(grid: Grid) -> list[str]:
    """Runs whose model the gate and entropy figures are drawn from but which is not on this machine
    (models are not archived: at tens of MB each they stay in the output folders)."""
    rows_by = grid.rows_by_cell()
    needed = [
        analysis_run(rows_by, variant, size)
        for size in grid.sizes
        for variant in (gate_variant(grid, rows_by, size), *grid.figures.entropy)
        if variant is not None
    ]
    return [row.run for row in needed if row is not None and not has_model(row)]
