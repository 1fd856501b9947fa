"""The sections of a grid's page besides its comparison tables: how far the grid has run, the tuning, where
each run stopped and what the rest will cost, the verdict across budgets, and every run.

Each returns its Markdown lines (none when the grid has nothing to say there); the prose comes from
``page_template.md`` (`prose`), the numbers from `comparisons` and `speeds`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from string import Template
from typing import Any

from .comparisons import (
    BUDGETS_NOTE,
    best_by_step,
    compared_pairs,
    grid_budgets_table,
    longest_stall,
    plateau_swing,
    replayed_stop,
)
from .figures import plot_learning_curves
from .grid import Grid, baseline_row, cpus_differ
from .rows import Row
from .speeds import (
    device_cell,
    host_name,
    host_records,
    remaining_minutes,
    row_cpu,
    timing_hosts,
    training_speed,
    validation_minutes,
    without_speed_flags,
)

TEMPLATE = Path(__file__).with_name("page_template.md")


@functools.cache
def _snippets() -> dict[str, str]:
    """The template's snippets by name, each one paragraph (its lines joined by spaces)."""
    text = re.sub(r"\A<!--.*?-->\s*", "", TEMPLATE.read_text(encoding="utf-8"), flags=re.S)  # the file's own note
    parts = re.split(r"^<!-- (.+?) -->\n", text, flags=re.M)
    return {name: " ".join(body.split("\n")).strip() for name, body in zip(parts[1::2], parts[2::2])}


def prose(name: str, **fields: Any) -> str:
    """The template's snippet ``name`` with its ``$fields`` filled in (a missing field is an error)."""
    return Template(_snippets()[name]).substitute(fields)


def progress_section(grid: Grid, rows: list[Row]) -> list[str]:
    """A paragraph saying how much of the grid has run: a grid takes many sittings, and a page drawn
    part-way must not read as the whole comparison, nor a finished one leave its reader to count. The page
    shows finished runs only; where a run under way stands is the runner's log, not a committed page."""
    finished = {row.run for row in rows}
    planned = grid.runs()
    done = sum(run.name in finished for run in planned)
    if done == len(planned):
        return [prose("complete", planned=len(planned)), ""]
    per_size = []
    for size in grid.sizes:
        runs = [run for run in planned if run.size == size]
        per_size.append(f"{size}: {sum(run.name in finished for run in runs)} of {len(runs)}")
    return [prose("progress", done=done, planned=len(planned), per_size="; ".join(per_size)), ""]


def tuning_section(grid: Grid, rows: list[Row], figures: Path) -> list[str]:
    """The tuning runs of a grid that tunes its baseline: each value's validation and test BLEU, where it
    stopped, and the value chosen (best validation BLEU; test BLEU plays no part); its learning curves go
    to ``figures``."""
    if grid.tuning is None:
        return []
    tuning = grid.tuning
    by_name = {row.run: row for row in rows}
    intro = prose("tuning", field=tuning.field, variant=tuning.variant, seed=tuning.seed)
    if tuning.step is not None:
        intro += " " + prose("tuning range grows", step=f"{tuning.step:g}", low=f"{tuning.bounds[0]:g}",
                             high=f"{tuning.bounds[1]:g}")  # fmt: skip
    if tuning.range_reason is not None:
        intro += " " + tuning.range_reason.rstrip(".") + "."
    lines = [
        f"## Tuning: {tuning.field} of {tuning.variant}, seed {tuning.seed}",
        "",
        intro,
        "",
        f"| size | {tuning.field} | valid BLEU | test BLEU | stopped at | best step | why | minutes | chosen |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size in grid.sizes:
        curves = {
            (f"{tuning.variant}, {tuning.field} {row.tuning['value']}", size): [row]
            for row in rows
            if row.tuning and row.size == size
        }
        tried = list(zip(grid.tuning_values(size), grid.tuning_runs(size)))
        figure = figures / f"tuning_{size}.png"
        figure.parent.mkdir(parents=True, exist_ok=True)
        title = f"Tuning {tuning.field} of {tuning.variant}, seed {tuning.seed}, {size}: each run until it stopped"
        if curves and plot_learning_curves(grid, curves, size, figure, title):
            lines[4:4] = [f"![tuning learning curves, {size}](figures/{grid.name}/{figure.name})", ""]
        chosen = grid.tuned_value(size)
        for value, run in tried:
            row = by_name.get(run.name)
            if row is None:
                lines.append(f"| {size} | {value} | – | – | – | – | not finished | – | |")
                continue
            lines.append(
                f"| {size} | {value} | {row.valid['bleu']} | {row.test['bleu']} | {row.steps} | "
                f"{row.best_step or '–'} | {row.stop_reason or '–'} | {_minutes(row)} | "
                f"{'yes' if chosen == value else ''} |"
            )
    for size in grid.sizes:
        for note in grid.tuned_notes(size):
            lines += ["", f"{size}: {note}."]
    return [*lines, ""]


def stopping_section(grid: Grid, rows: list[Row]) -> list[str]:
    """For runs that train until validation BLEU stops improving: where each stopped and why, its best
    step, its training minutes and precision, and what the seeds still to run will cost at those minutes,
    naming the hosts that measured them (said to be rough where there were several)."""
    stopped = [row for row in rows if row.stop_reason]
    if not stopped or not any(row.stop_reason == "validation plateau" for row in stopped):
        return []
    lines = [
        "## When each run stopped",
        "",
        prose("stopping", resets=_patience_resets(grid)),
        "",
        "| run | stopped at | why | best step | valid BLEU (best) | vanilla by the stop | swing on the plateau | "
        "test BLEU | minutes | precision |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows_by = grid.rows_by_cell()
    for row in sorted(stopped, key=lambda row: (row.size, row.seed, row.variant, row.run)):
        swing = plateau_swing(grid, row)
        base = baseline_row(rows_by, row.variant, row.size, row.seed)
        by_stop = None if base is None else best_by_step(grid, base, row.steps)
        lines.append(
            f"| {row.run} | {row.steps} | {row.stop_reason} | {row.best_step or '–'} | "
            f"{row.valid['bleu']} | {'–' if by_stop is None else by_stop} | "
            f"{'–' if swing is None else f'{swing[0]:.2f} ({swing[1]:.2f})'} | "
            f"{row.test['bleu']} | {_minutes(row)} | {row.precision or 'fp32'} |"
        )
    return [
        *lines,
        *_conditions_differ(stopped),
        *_still_to_run(grid, rows),
        *_replay_check(grid, stopped),
        *_closest_calls(grid, stopped),
        *without_speed_flags(stopped, lambda row: validation_minutes(grid, row)),
        "",
    ]


def _conditions_differ(stopped: list[Row]) -> list[str]:
    """A paragraph naming how each run trained, when the runs compared did not all train alike (else
    nothing): a grid can move between hosts part-way, and `precision: auto` and the attention kernel follow
    the host. Each such pair reached equal loss at equal steps where measured, but different rounding sends
    two runs apart as a change of seed does, and a reader comparing them should know. A row that does not
    record its host agrees with any (`cpus_differ`); an older row's kernel is sdpa, the only one then."""

    def conditions(row: Row) -> tuple[str, str]:
        return row.precision or "fp32", row.attn_implementation

    hosts = host_records(stopped)  # an older record without the fingerprint names its host by the fuller one
    if len(hosts) < 2 and len({conditions(row) for row in stopped}) < 2:
        return []
    groups: dict[str, list[str]] = {}
    for row in stopped:
        precision, kernel = conditions(row)
        cpu = row_cpu(row)
        cpu = next((host for host in hosts if not cpus_differ(cpu, host)), None) if cpu else None
        host = host_name(cpu, fingerprint=True) or "host unrecorded"
        groups.setdefault(f"{precision} with {kernel} attention on {host}", []).append(row.run)
    return [
        "",
        prose("conditions differ", groups="; ".join(f"{how}: {', '.join(runs)}" for how, runs in groups.items())),
    ]


def _still_to_run(grid: Grid, rows: list[Row]) -> list[str]:
    """What the runs left will cost, each priced at the finished runs most like it (`remaining_minutes`)."""
    left = remaining_minutes(grid, rows)
    if left is None:
        return []
    seeds = "; ".join(f"seed {seed}: {_runs(n)}, about {m / 60:.1f} hours" for seed, (n, m) in left.by_seed.items())
    # the longest run prices tuning runs and runs waiting for the tuning; once it has chosen, none is left
    choosing = grid.tuning is not None and any(grid.tuned_value(size) is None for size in grid.sizes)
    longest = choosing or grid.tuning is None
    text = prose(
        "still to run",
        runs=_runs(sum(n for n, _ in left.by_seed.values())),
        hours=f"{sum(m for _, m in left.by_seed.values()) / 60:.1f}",
        where=_priced_where(rows),
        seeds=seeds,
        field=grid.tuning.field if grid.tuning is not None else "tuned value",
        longest=prose("still to run: longest", minutes=f"{left.longest:.0f}") if longest else ".",
        grows=" " + prose("still to run: grows") if choosing and grid.tuning.step is not None else "",
    )
    return ["", text]


def _minutes(row: Row) -> str:
    return "–" if row.train_minutes is None else f"{row.train_minutes:.0f}"


def _runs(count: int) -> str:
    """``count`` runs, in words ("1 run", "5 runs")."""
    return f"{count} run" + ("" if count == 1 else "s")


def _priced_where(rows: list[Row]) -> str:
    """Where the price of the runs left was measured: the host of the finished runs' minutes, or, where a
    grid moved between hosts, each of them, with the caution that their minutes differ."""
    hosts = timing_hosts([row for row in rows if row.train_minutes])
    if not hosts:
        return prose("priced unrecorded")
    if len(hosts) == 1:
        return prose("priced on one host", host=hosts[0])
    return prose("priced on several", hosts=" and ".join(hosts))


def _patience_resets(grid: Grid) -> str:
    """What resets a run's early-stopping patience under the grid's protocol, in words."""
    resets = "a new best validation BLEU"
    return resets + (" or a new lowest validation loss" if grid.common.get("early_stopping_watch_loss") else "")


def _replay_check(grid: Grid, stopped: list[Row]) -> list[str]:
    """Whether every plateau stop replays from its run's log under the early-stopping rule as the grid
    file writes it now, naming the runs that do not (their rows then answer to another protocol)."""
    plateau = [row for row in stopped if row.stop_reason == "validation plateau"]
    replays = [(row, replayed_stop(grid, row)) for row in plateau]
    if not plateau or any(step is None for _, step in replays):
        return []
    rule = f"{grid.common.get('early_stopping_patience')} evaluations without {_patience_resets(grid)}"
    differing = [f"{row.run} (its log stops at {step})" for row, step in replays if step != row.steps]
    if differing:
        verdict = f"a run stops elsewhere than it did: {'; '.join(differing)}."
    else:
        verdict = "every plateau stop above happens at the step the run stopped at."
    return ["", prose("replayed", rule=rule, verdict=verdict)]


def _closest_calls(grid: Grid, stopped: list[Row]) -> list[str]:
    """How near each run came to stopping sooner: its longest stall before its last reset of the patience
    (`longest_stall`). A comparison of runs that stopped at different steps rests on where each stopped,
    and a run that once came within an evaluation of its patience could as well have stopped there."""
    stalls = [(row, longest_stall(grid, row)) for row in stopped]
    if not stalls or any(stall is None for _, stall in stalls):
        return []
    runs = "; ".join(
        f"{row.run} {count}" + (f" (to step {step})" if count else "")
        for row, (count, step) in sorted(stalls, key=lambda pair: pair[0].run)
    )
    patience = grid.common.get("early_stopping_patience")
    return ["", prose("closest calls", resets=_patience_resets(grid), patience=patience, runs=runs)]


def budgets_section(grid: Grid) -> list[str]:
    """The grid's verdict beside the earlier grids' it names (``earlier_budgets``)."""
    if not grid.earlier_budgets:
        return []
    spanned = grid.budget_grids()
    earlier, others = spanned[: spanned.index(grid)], spanned[spanned.index(grid) + 1 :]
    grids = ", ".join(f"[{g.name}]({g.page.name})" for g in earlier)
    others = [g for g in others if compared_pairs([g])]  # another pair's grid is named once it has a column
    pairs = "".join(f" The same protocol on {g.pair}: [{g.name}]({g.page.name})." for g in others)
    text = prose("budgets", grids=grids, note=BUDGETS_NOTE, pairs=pairs)
    return ["## How the verdict moves with training", "", text, "", *grid_budgets_table(grid), ""]


def runs_section(grid: Grid, rows: list[Row]) -> list[str]:
    """Every finished run of the grid, one row each: where and how it ran, its scores and its speeds."""
    lines = [
        "## Every run",
        "",
        prose("cores used"),
        "",
        prose("speeds"),
        "",
        "| run | device | steps | epochs | valid BLEU | test BLEU | chrF | chrF++ | tok. BLEU | stuttering | "
        "target tok/s | train tok/s | wall s | cores used |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda row: (row.size, row.variant, row.seed)):
        test, stutter = row.test, row.test.get("repeated_token_outputs")
        steps = f"{row.steps} (resumed at {row.resumed_from_step})" if row.resumed_from_step else str(row.steps)
        lines.append(
            f"| {row.run} | {device_cell(row)} | {steps} | {row.epochs} | {row.valid['bleu']} | "
            f"{test['bleu']} | {test['chrf']} | {test['chrf_pp']} | {test['bleu_tokenized']} | "
            f"{'–' if stutter is None else f'{stutter:.1%}'} | {row.target_tokens_per_second} | "
            f"{training_speed(grid, row) or '–'} | {row.wall_seconds} | {row.cores_used or '–'} |"
        )
    return lines
