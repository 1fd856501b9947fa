"""The comparison tables of a grid's page: each variant against vanilla, mean +- sd over seeds, the
difference of means on the same seeds and sacreBLEU's paired bootstrap p on their pooled translations,
laid out as the papers' tables or, across grids, as the verdict at each training budget."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from .grid import REPO_ROOT, Grid, Table
from .rows import Row, RowsByCell
from .speeds import speed_ratio, speed_ratios, training_speed

if TYPE_CHECKING:
    from hf_graphtf.training.tooling import PlateauRule

BOOTSTRAP_SAMPLES = 1000


def training_splits() -> dict[str, tuple[str, float]]:
    """The training splits the grids train on, smallest first: how the pages name each, and its pairs (the
    Bible corpora's subsets, `hf_graphtf.data.bible.SUBSETS`; the whole train split last, as infinity)."""
    from hf_graphtf.data.bible import SUBSETS

    subsets = sorted(SUBSETS, key=lambda subset: subset.size)
    named = {subset.name: (f"{subset.size // 1000}K pairs", float(subset.size)) for subset in subsets}
    return {**named, "train": ("full train set", math.inf)}


def split_label(split: str) -> str:
    """How the pages name a training split (``5K pairs``; a split of no Bible corpus by its own name)."""
    return training_splits().get(split, (split,))[0]


def split_pairs(split: str) -> float:
    """A training split's pairs (`training_splits`), the order sizes are set in; infinity where unknown."""
    return training_splits().get(split, ("", math.inf))[1]


def t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom (SciPy's)."""
    from scipy.stats import t

    return float(t.ppf(probability, df))


def seeds_t_quantile(seeds: int, level: float = 0.95) -> float:
    """The t quantile of a two-sided ``level`` interval of a mean over ``seeds`` seeds (seeds - 1 degrees of
    freedom): the interval's half-width is this many standard errors of the mean."""
    return t_quantile(0.5 + level / 2, seeds - 1)


def seed_interval(deltas: list[float], level: float = 0.95) -> tuple[float, float, float] | None:
    """Mean of the per-seed paired differences and its ``level`` interval from the t distribution (n - 1
    degrees of freedom): how far the Δ could move with other seeds, which the paired bootstrap (the test
    set's sampling) does not say. None under two seeds."""
    if len(deltas) < 2:
        return None
    mean = statistics.mean(deltas)
    half = seeds_t_quantile(len(deltas), level) * statistics.stdev(deltas) / math.sqrt(len(deltas))
    return mean, mean - half, mean + half


#: the most seeds `seeds_to_exclude_zero` looks at; a Δ that would need more is "more than" this
MOST_SEEDS = 50


def seeds_to_exclude_zero(deltas: list[float], level: float = 0.95) -> int | None:
    """The fewest seeds whose ``level`` interval would exclude 0 if the per-seed Δ kept the mean and standard
    deviation seen so far (the interval's half-width shrinks as t(n - 1) / sqrt(n)); None where it already
    does, under two seeds, or for a mean of 0; ``MOST_SEEDS + 1`` where more than `MOST_SEEDS` would be
    needed. A projection from few seeds, whose own spread is uncertain: a guide to the compute, not a
    prediction of the verdict."""
    interval = seed_interval(deltas, level)
    if interval is None:
        return None
    mean, low, high = interval
    if mean == 0 or low > 0 or high < 0:
        return None
    sd = statistics.stdev(deltas)
    for n in range(len(deltas) + 1, MOST_SEEDS + 1):
        if seeds_t_quantile(n, level) * sd / math.sqrt(n) < abs(mean):
            return n
    return MOST_SEEDS + 1


def seeds_count(seeds: int) -> str:
    """A `seeds_to_exclude_zero` result as the pages write it (its cap as "more than" the cap)."""
    return f"more than {MOST_SEEDS}" if seeds > MOST_SEEDS else str(seeds)


def paired_deltas(runs: list[Row], paired: list[Row]) -> list[float]:
    """The per-seed Δ test BLEU of ``runs`` over ``paired`` (`on_shared_seeds`: one row per seed, in order)."""
    return [run.test["bleu"] - base.test["bleu"] for run, base in zip(runs, paired)]


def trains_to_plateau(grid: Grid, size: str) -> bool:
    """Whether a size of a grid trains each run until validation stops improving (an early-stopping
    patience of a few evaluations), not for a fixed number of steps (none, or one too long to act)."""
    return {**grid.common, **grid.sizes[size]}.get("early_stopping_patience", 100) < 50


def cut_off(grid: Grid, rows: list[Row]) -> list[Row]:
    """The runs among ``rows`` that were to train to a validation plateau (`trains_to_plateau`) and stopped
    before one (at the step cap, a time budget, an epoch cap): their BLEU is where the run had got to, not
    where it would have settled, and a mean or a Δ over them has to say so. A run of a fixed budget stops
    at its step cap by design and is never cut off."""
    return [
        row for row in rows if row.stop_reason not in (None, "validation plateau") and trains_to_plateau(grid, row.size)
    ]


def cut_off_label(grid: Grid, rows: list[Row]) -> str:
    """What a cell over ``rows`` appends for its runs that stopped short of a plateau (`cut_off`), each
    by variant, seed and why: ``; not converged: al_both seed 5 (step cap)``; empty where there are none."""
    cut = cut_off(grid, rows)
    if not cut:
        return ""
    return "; not converged: " + ", ".join(f"{row.variant} seed {row.seed} ({row.stop_reason})" for row in cut)


def cut_off_note(grid: Grid, rows: list[Row]) -> list[str]:
    """The sentence under a comparison table that names its runs cut off before a plateau (`cut_off`):
    where each stopped, where its best checkpoint was, and that its BLEU, and each mean and Δ it enters
    (marked in its cell), are where it had got to. Nothing where every run stopped on a plateau."""
    cut = sorted(cut_off(grid, rows), key=lambda row: row.run)
    if not cut:
        return []
    runs = "; ".join(
        f"{row.run} stopped at the {row.stop_reason} (step {row.steps:,}, its best checkpoint at {row.best_step:,})"
        if row.steps is not None and row.best_step is not None
        else f"{row.run} stopped at the {row.stop_reason}"
        for row in cut
    )
    its, it, run = ("Its", "it", "the run") if len(cut) == 1 else ("Their", "they", "each run")
    return [
        f"Not converged: {runs}, before a validation plateau. {its} test BLEU, and each mean and Δ {it} enter"
        f'{"s" if len(cut) == 1 else ""} (the cells that say "not converged"), are where {run} had got to '
        "when it stopped, not where it would have settled."
    ]


def delta_cell(runs: list[Row], paired: list[Row], p_value: float | None, note: str = "") -> str:
    """A budgets-table cell: the mean Δ over the shared seeds, their number, the seed-level 95% interval
    where two or more seeds ran, the pooled paired-bootstrap p, and ``note`` (`cut_off_label`: the runs in
    it that stopped short of a plateau)."""
    deltas = paired_deltas(runs, paired)
    interval = seed_interval(deltas)
    text = f"{statistics.mean(deltas):+.2f} (n={len(deltas)}"
    if interval is not None:
        text += f", 95% CI {interval[1]:+.2f} to {interval[2]:+.2f}"
    text += "" if p_value is None else f", p {p_value:.3f}"
    return text + note + ")"


def mean_sd(values: list[float], note: str = "") -> str:
    """Mean ± sd over seeds with their number, and ``note`` inside the brackets (`cut_off_label`)."""
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f} (n=1{note})"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} (n={len(values)}{note})"


def plateau_swing(grid: Grid, row: Row) -> tuple[float, float] | None:
    """How far validation BLEU moved from one evaluation to the next on a run's plateau, the best
    evaluation and every one after it (mean and largest absolute change): the evaluations' own noise,
    against which a difference between two runs' best validation BLEU can be read. None without the
    run's training log, with fewer than two evaluations on the plateau, or for a run that did not stop on
    one (a run cut off at the step cap may have its best at its last evaluations: the changes after it
    are no plateau's)."""
    if row.stop_reason != "validation plateau":
        return None
    history = grid.log_history(row)
    best_step = row.best_step
    if history is None or best_step is None:
        return None
    bleu = dict(sorted((entry["step"], entry["eval_bleu"]) for entry in history if "eval_bleu" in entry))
    plateau = [value for step, value in bleu.items() if step >= best_step]
    changes = [abs(after - before) for before, after in zip(plateau, plateau[1:])]
    return (statistics.mean(changes), max(changes)) if changes else None


def best_by_step(grid: Grid, row: Row, step: int) -> float | None:
    """A run's best validation BLEU over its evaluations up to ``step``, from its training log: where it
    stood by the step another run had reached. None without the log or without an evaluation by then."""
    history = grid.log_history(row) or []
    by_then = [entry["eval_bleu"] for entry in history if "eval_bleu" in entry and entry["step"] <= step]
    return max(by_then) if by_then else None


def replayed_stop(grid: Grid, row: Row) -> int | None:
    """The step at which early stopping, as the grid file writes it now (``common`` over the run's
    recipe), stops a run with this run's training log; None without the log or without a stop in it. A
    protocol changed while a grid runs holds for the runs that finished before only where this is the
    step each of them stopped at."""
    counts = _patience_counts(grid, row)
    return None if counts is None else counts[0].stop_step(counts[1])


def longest_stall(grid: Grid, row: Row) -> tuple[int, int] | None:
    """The most evaluations in a row a run went without resetting its early-stopping patience before its
    last reset (the rule as the grid file writes it now, replayed over the run's log), and the step the
    stall reached that count: how near the run came to stopping sooner. Where a run stops is itself a
    draw of its seed, and a run one evaluation short of the patience once could as well have stopped
    there. None without the log or a rule; (0, 0) for a run that never stalled before its last reset."""
    counts = _patience_counts(grid, row)
    if counts is None:
        return None
    rule, history = counts
    steps = list(rule.counts(history))
    last_reset = max((index for index, (_, count) in enumerate(steps) if count.waited == 0), default=-1)
    stalls = [(count.waited, step) for step, count in steps[: last_reset + 1] if count.waited]
    return max(stalls, key=lambda stall: stall[0], default=(0, 0))


def _patience_counts(grid: Grid, row: Row) -> tuple[PlateauRule, list[dict]] | None:
    """The early-stopping rule the grid file writes now for a run (``common`` over its recipe) and the
    run's training log; None without either."""
    from hf_graphtf.training import load_recipe
    from hf_graphtf.training.tooling import PlateauRule

    history = grid.log_history(row)
    recipe = {**(load_recipe(REPO_ROOT / row.recipe) if row.recipe else {}), **grid.common}
    rule = PlateauRule.from_fields(recipe.get)
    return None if history is None or rule is None else (rule, history)


def paired_bootstrap(grid: Grid, baseline: list[Row], system: list[Row], references: list[str]) -> float | None:
    """sacreBLEU's paired bootstrap p-value of ``system`` against ``baseline`` on the pooled translations
    of the seeds both have (seed by seed, against the same references); None without translations."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    seeds = sorted({row.seed for row in baseline} & {row.seed for row in system})
    pooled_base, pooled_system = [], []
    for seed in seeds:
        base = grid.hypotheses(next(row for row in baseline if row.seed == seed))
        other = grid.hypotheses(next(row for row in system if row.seed == seed))
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


def on_shared_seeds(runs: list[Row], base: list[Row]) -> tuple[list[Row], list[Row]]:
    """The variant's runs and vanilla's runs of the seeds both have: a Δ over different seeds would
    carry the seeds' own spread (up to a BLEU here) into the difference."""
    seeds = {row.seed for row in runs} & {row.seed for row in base}
    return [row for row in runs if row.seed in seeds], [row for row in base if row.seed in seeds]


def comparison_table(
    grid: Grid, rows_by: RowsByCell, table: Table, sizes: list[str], references: dict[str, list[str]]
) -> list[str]:
    """A Markdown table: one row per variant that has runs, per size BLEU mean ± sd, Δ and p; a sentence
    instead while no variant has a finished run (a converged grid's cells wait for its tuning). A run that
    stopped short of its plateau is marked in its BLEU cell and named under the table (`cut_off_note`)."""
    if not any(rows_by.get((variant, size)) for variant in table.variants for size in sizes):
        return ["No run of these variants has finished yet."]
    header = ["variant"] + (["parameters", "speed vs vanilla"] if table.cost else [])
    for size in sizes:
        header += [f"BLEU {size}", "Δ", "p", f"tok. BLEU {size}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for variant in table.variants:
        if not any(rows_by.get((variant, size)) for size in sizes):
            continue
        cells = [variant]
        if table.cost:
            runs = [row for size in sizes for row in rows_by.get((variant, size), [])]
            cells.append(f"{runs[0].parameters / 1e6:.2f} M")
            cells.append(speed_ratio(rows_by, variant, sizes, lambda row: training_speed(grid, row)))
        for size in sizes:
            runs = rows_by.get((variant, size), [])
            base = rows_by.get(("vanilla", size), [])
            bleu = [row.test["bleu"] for row in runs]
            cells.append(mean_sd(bleu, cut_off_label(grid, runs)))
            if variant == "vanilla" or not runs or not base:
                cells += ["", ""]
            else:
                shared, paired = on_shared_seeds(runs, base)
                if not paired:  # no seed in common: the means of whatever each side has
                    shared, paired = runs, base
                delta = statistics.mean(row.test["bleu"] for row in shared) - statistics.mean(
                    row.test["bleu"] for row in paired
                )
                p_value = paired_bootstrap(grid, base, runs, references[size]) if size in references else None
                cells += [f"{delta:+.2f}", "–" if p_value is None else f"{p_value:.3f}"]
            cells.append(mean_sd([row.test["bleu_tokenized"] for row in runs]))
        lines.append("| " + " | ".join(cells) + " |")
    compared = [row for variant in table.variants for size in sizes for row in rows_by.get((variant, size), [])]
    note = cut_off_note(grid, compared)
    return lines + (["", *note] if note else [])


def budget_label(grid: Grid, size: str, with_pair: bool = False) -> str:
    """How a size of a grid trains, for the budgets table: ``10K pairs, 600 steps`` or ``10K pairs, to a
    plateau``; led by the grid's language pair (``ny-en 10K pairs, to a plateau``) in a table that spans
    more than one."""
    values = {**grid.common, **grid.sizes[size]}
    split = values.get("train_split", "train")
    data = split_label(split)
    data = f"{grid.pair} {data}" if with_pair else data
    if trains_to_plateau(grid, size):
        return f"{data}, to a plateau"
    return f"{data}, {int(values['max_steps']):,} steps" if values.get("max_steps") else data


def compared_pairs(grids: list[Grid]) -> list[str]:
    """The language pairs of ``grids`` that have a finished vanilla cell (a column in a budgets table), in
    the order of the grids; a grid whose runs have not yet finished a cell adds no column and no pair."""
    pairs = []
    for grid in grids:
        rows_by = grid.rows_by_cell()
        if grid.pair not in pairs and any(("vanilla", size) in rows_by for size in grid.sizes):
            pairs.append(grid.pair)
    return pairs


def budgets_table(grids: list[Grid], variants: tuple[str, ...]) -> list[str]:
    """Each variant's difference from vanilla (test BLEU, mean over seeds) and its paired-bootstrap p at
    every budget of ``grids``, with the number of seeds, its parameters and its training speed: how the
    verdict moves as training goes on. Budgets are ordered as given."""
    columns: list[tuple[str, int, str, float]] = []
    deltas, params, speeds = defaultdict(dict), {}, defaultdict(list)
    pairs = compared_pairs(grids)
    for grid in grids:
        rows_by = grid.rows_by_cell()
        sizes = [size for size in grid.sizes if (("vanilla", size) in rows_by)]
        references = test_references(grid, sizes)
        for size in sizes:
            label = budget_label(grid, size, with_pair=len(pairs) > 1)
            values = {**grid.common, **grid.sizes[size]}
            steps = float("inf") if trains_to_plateau(grid, size) else values["max_steps"]
            columns.append((label, pairs.index(grid.pair), values.get("train_split", ""), steps))
            base = rows_by[("vanilla", size)]
            for variant in variants:
                runs = rows_by.get((variant, size), [])
                if variant == "vanilla" or not runs:
                    continue
                runs, paired = on_shared_seeds(runs, base)  # both in seed order, one row per seed
                if not paired:
                    continue
                p_value = paired_bootstrap(grid, paired, runs, references[size]) if size in references else None
                deltas[variant][label] = delta_cell(runs, paired, p_value, cut_off_label(grid, [*paired, *runs]))
                params.setdefault(variant, runs[0].parameters / base[0].parameters - 1)
                speeds[variant] += speed_ratios(rows_by, variant, [size], lambda row, g=grid: training_speed(g, row))
    # by language pair (as the grids come), then by training split (smallest first: 5K, 10K, the full set),
    # then by training length, a plateau last
    columns.sort(key=lambda column: (column[1], split_pairs(column[2]), column[2], column[3]))
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


def seed_spread_note(grids: list[Grid], variants: tuple[str, ...]) -> list[str]:
    """What a budgets table's intervals are, and for one with a one-seed Δ in it, more: the paired bootstrap of
    one pair of runs measures the test set's sampling, not the seed's, so the note sets beside it how much
    each variant's Δ moved from seed to seed where the grids ran several (the largest standard deviation
    of the per-seed Δ over the budgets, and at which). Without it a one-seed Δ with p 0.001 reads as
    settled when another seed could halve it or turn it round."""
    compared = [variant for variant in variants if variant != "vanilla"]
    one_seed, spread, needed = False, {}, defaultdict(list)
    with_pair = len(compared_pairs(grids)) > 1
    for grid in grids:
        rows_by = grid.rows_by_cell()
        for size in grid.sizes:
            for variant in compared:
                # both in seed order, one row per seed: pairs line up
                runs, paired = on_shared_seeds(rows_by.get((variant, size), []), rows_by.get(("vanilla", size), []))
                deltas = paired_deltas(runs, paired)
                one_seed |= len(deltas) == 1
                seeds = seeds_to_exclude_zero(deltas)
                if seeds is not None:
                    label = budget_label(grid, size, with_pair)
                    needed[variant].append(f"{seeds_count(seeds)} ({label}; {len(deltas)} ran)")
                if len(deltas) > 1 and statistics.stdev(deltas) > spread.get(variant, (-1.0, ""))[0]:
                    spread[variant] = (statistics.stdev(deltas), budget_label(grid, size, with_pair))
    interval_note = (
        "Where two or more seeds ran, the 95% CI is the interval of the mean Δ over seeds from the per-seed "
        "paired differences (t distribution); with few seeds it is wide (its t quantile is "
        f"{seeds_t_quantile(3):.2f} at three seeds, {seeds_t_quantile(5):.2f} at five), and a Δ whose interval "
        "spans 0 is not shown to be a gain or a loss, whatever its p."
    )
    if needed:
        interval_note += (
            " If the per-seed Δ kept the mean and spread seen so far, an interval clear of 0 would take this "
            f"many seeds: {'; '.join(f'{v} ' + ', '.join(needed[v]) for v in compared if v in needed)}."
        )
    if not one_seed:
        return [interval_note]
    sentence = interval_note + (
        " A Δ over one seed (n=1) compares one pair of models: its p says how sure the test set makes their "
        "difference, not whether another seed would give the same one."
    )
    if spread:
        largest = "; ".join(
            f"{variant} {spread[variant][0]:.2f} ({spread[variant][1]})" for variant in compared if variant in spread
        )
        sentence += (
            " Where several seeds ran, a variant's Δ moved from seed to seed with a standard deviation of up "
            f"to: {largest}; a one-seed Δ under about twice that could come from the seed alone."
        )
    return [sentence]


def seed_verdict(deltas: list[float]) -> str:
    """What the per-seed Δ of one cell support, in a word and its figures: ``helps`` or ``hurts`` where the
    seed-level 95% interval (`seed_interval`) lies clear of 0 on that side, ``undecided`` where it spans 0
    (with how many seeds would settle it at the spread seen, `seeds_to_exclude_zero`), and no verdict from
    one seed, whose p measures the test set, not the seed."""
    interval = seed_interval(deltas)
    if interval is None:
        return f"one seed ({deltas[0]:+.2f}), no verdict"
    mean, low, high = interval
    word = "helps" if low > 0 else "hurts" if high < 0 else "undecided"
    text = f"{word} ({mean:+.2f}, n={len(deltas)}, 95% CI {low:+.2f} to {high:+.2f}"
    seeds = seeds_to_exclude_zero(deltas)
    if seeds is not None:
        text += f"; {seeds_count(seeds)} seeds would settle it at this spread"
    return text + ")"


def sizes_by_pairs(grid: Grid) -> list[str]:
    """The grid's sizes, smallest training split first (`training_splits`), as the budgets table orders them."""
    return sorted(
        grid.sizes, key=lambda size: split_pairs({**grid.common, **grid.sizes[size]}.get("train_split", "train"))
    )


def plateau_deltas(grid: Grid, variant: str) -> list[tuple[str, list[float]]]:
    """The per-seed Δ of ``variant`` over vanilla at each size of ``grid`` trained to a plateau, on the seeds both
    finished: (the size's training split, its Δ), smallest split first (the data-size figure's points)."""
    rows_by = grid.rows_by_cell()
    points = []
    for size in sizes_by_pairs(grid) if variant != "vanilla" else ():
        if not trains_to_plateau(grid, size):
            continue
        runs, paired = on_shared_seeds(rows_by.get((variant, size), []), rows_by.get(("vanilla", size), []))
        if paired:
            points.append(
                ({**grid.common, **grid.sizes[size]}.get("train_split", "train"), paired_deltas(runs, paired))
            )
    return points


def plateau_verdicts(grids: list[Grid], variants: tuple[str, ...]) -> list[str]:
    """One sentence under a budgets table: at each budget trained to a plateau (`trains_to_plateau`), each
    variant's `seed_verdict` against vanilla on the seeds both finished. Written from the rows, so the
    README's verdict cannot lag the runs; empty where no such budget has a compared cell."""
    with_pair = len(compared_pairs(grids)) > 1
    budgets = []
    for grid in grids:
        rows_by = grid.rows_by_cell()
        for size in sizes_by_pairs(grid):
            if not trains_to_plateau(grid, size) or ("vanilla", size) not in rows_by:
                continue
            verdicts = []
            for variant in variants:
                if variant == "vanilla":
                    continue
                runs, paired = on_shared_seeds(rows_by.get((variant, size), []), rows_by[("vanilla", size)])
                if paired:
                    verdict = seed_verdict(paired_deltas(runs, paired))
                    verdicts.append(f"{variant} {verdict}{cut_off_label(grid, [*paired, *runs])}")
            if verdicts:
                budgets.append(f"{budget_label(grid, size, with_pair)}: {'; '.join(verdicts)}")
    if not budgets:
        return []
    intro = "Verdicts over seeds (helps or hurts where the 95% CI lies clear of 0, undecided where it spans 0): "
    return [intro + ". ".join(budgets) + "."]


BUDGETS_NOTE = (
    "Training speed: the variant's training tokens/s over vanilla's run of the same size, seed and machine, "
    "median over those pairs in every grid (their number in brackets); runs of a grid run hours apart on a "
    "shared machine, so this is a rough guide, and the controlled comparison (interleaved, one process) is "
    "recipes/benchmarks/RESULTS.md."
)


_BUDGETS: dict[Path, list[str]] = {}


def grid_budgets_table(grid: Grid) -> list[str]:
    """`budgets_table` of the grid's ``earlier_budgets``, the grid itself and its ``other_pairs``, over the
    grid's own variants, with `plateau_verdicts` and `seed_spread_note` under it (computed once per run of
    the report: the bootstrap tests take a while)."""
    if grid.path not in _BUDGETS:
        grids, variants = grid.budget_grids(), tuple(grid.variants)
        table = budgets_table(grids, variants)
        for sentences in (plateau_verdicts(grids, variants), seed_spread_note(grids, variants)):
            table += ["", *sentences] if sentences else []
        _BUDGETS[grid.path] = table
    return _BUDGETS[grid.path]


def test_references(grid: Grid, sizes: list[str]) -> dict[str, list[str]]:
    try:
        _, references = grid.test_pairs()
    except (FileNotFoundError, ValueError):
        return {}
    return {size: references for size in sizes}
