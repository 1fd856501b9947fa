"""How fast a grid's runs trained, read from their rows and training logs, and what they would cost
without the speed flags.

A row records its tokens per second over the whole Trainer run, validation passes included; the
training log says how long those passes took, so the speed of the training steps alone can be
recovered (``training_speed``). Speed ratios against vanilla pair runs of the same size and seed on the
same machine (``speed_ratio``), because a shared machine's speed drifts between sittings.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .grid import REPO_ROOT, Grid, cpus_differ
from .rows import Row, RowsByCell


def training_seconds(grid: Grid, row: Row) -> float | None:
    """Seconds the run spent on its training steps: the Trainer's ``train_runtime`` less the validation
    passes inside it, from the run's training log; None without the log.

    Each validation generates greedily for ``max_eval_samples`` sentences; how long that takes depends
    on the validation settings and on how long the model's outputs are at that moment (an early model
    runs to ``generation_max_length``), not on the cost of a training step. In the Bible grids it is
    8-9% of ``train_runtime``. A resumed run's runtime is its last sitting's, so only the validations
    that sitting ran (after ``resumed_from_step``) are subtracted.
    """
    times = runtime_and_training_seconds(grid.log_history(row), row)
    return times[1] if times else None


def training_speed(grid: Grid, row: Row) -> float | None:
    """Target tokens per second of training steps alone (``training_seconds``); None without the log.

    The recorded speed is the run's target tokens over the logged ``train_runtime``, so rescaling it by
    that runtime over the training seconds gives the same tokens over the shorter time."""
    times = runtime_and_training_seconds(grid.log_history(row), row)
    recorded = row.target_tokens_per_second
    return round(recorded * times[0] / times[1], 1) if times and recorded else None


def runtime_and_training_seconds(history: list[dict[str, Any]] | None, row: Row) -> tuple[float, float] | None:
    """(``train_runtime``, that less the ``eval_runtime`` of each validation after the row's
    ``resumed_from_step``) from the run's training log. The log's runtime is unrounded: the row keeps
    it to 0.1 s, too coarse for short runs whose validation takes most of it. A resumed run's log keeps
    the earlier sittings' validations (up to the checkpoint it resumed from) but its runtime is the
    last sitting's alone."""
    runtimes = [entry["train_runtime"] for entry in history or [] if "train_runtime" in entry]
    if not runtimes:
        return None
    from_step = row.resumed_from_step or 0
    validating = sum(entry.get("eval_runtime", 0.0) for entry in history if entry.get("step", 0) > from_step)
    return (runtimes[-1], runtimes[-1] - validating) if validating < runtimes[-1] else None


def speed_ratio(
    rows_by: RowsByCell,
    variant: str,
    sizes: list[str],
    speed_of: Callable[[Row], float | None] = lambda row: None,
) -> str:
    """The variant's training speed over vanilla's: the median of the ratios of each of its runs to
    vanilla's run of the same size and seed, with their range where they differ, e.g. ``0.98 (0.90-1.16)``.

    A grid runs seed by seed, so a seed's vanilla run and the variant's run share a stretch of hours on
    one machine, while the machine's own speed drifts between stretches (the Bible v2 grid's runs were
    about 20% faster, CPU seconds included, from one morning on). Comparing fastest with fastest mixed
    stretches; pairing by seed does not, and the median over pairs discards one pair that straddled
    such a change or shared the cores with other work. The range shows how far the pairs disagree. A
    pair whose runs ran on different machines, or in another precision or attention kernel
    (``same_settings``), is left out: a grid can span hosts and settings, and each runs at its own speed.

    ``speed_of`` gives a run's speed without its validation passes (``training_speed``); at a size
    where some run on either side lacks it, both sides fall back to the recorded figure, which
    includes them, so that a ratio never compares one measure with the other.
    """
    ratios = speed_ratios(rows_by, variant, sizes, speed_of)
    if not ratios:
        return "–"
    if min(ratios) == max(ratios):  # one pair, or vanilla against itself
        return f"{ratios[0]:.2f}"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def speed_ratios(
    rows_by: RowsByCell,
    variant: str,
    sizes: list[str],
    speed_of: Callable[[Row], float | None],
) -> list[float]:
    """The ratios `speed_ratio` summarises: one per run of the variant that has a vanilla run of the same
    size and seed on the same machine."""
    ratios = []
    for size in sizes:
        runs, base = rows_by.get((variant, size), []), rows_by.get(("vanilla", size), [])
        speeds = {id(row): speed_of(row) for row in runs + base}
        if None in speeds.values():
            speeds = {id(row): row.target_tokens_per_second for row in runs + base}
        base_by_seed = {row.seed: row for row in base}
        pairs = [(row, base_by_seed.get(row.seed)) for row in runs]
        ratios += [
            speeds[id(row)] / speeds[id(vanilla)]
            for row, vanilla in pairs
            if vanilla is not None and speeds[id(row)] and speeds[id(vanilla)] and same_settings(row, vanilla)
        ]
    return ratios


def same_machine(row: Row, other: Row) -> bool:
    """Whether two runs ran on the same kind of machine: the same device and ``--jobs`` setting, and CPU
    records (model, vector kernels, float fingerprint) that do not disagree."""
    return (row.device, row.concurrent_runs) == (other.device, other.concurrent_runs) and not cpus_differ(
        row_cpu(row), row_cpu(other)
    )


def same_settings(row: Row, other: Row) -> bool:
    """Whether two runs' speeds compare like with like: the same machine (`same_machine`), precision and
    attention kernel. bf16 with eager attention trained about 1.3x faster than with sdpa on this project's
    CPUs (recipes/benchmarks/RESULTS.md), a difference a variant's speed would otherwise be credited with."""
    return same_machine(row, other) and (row.precision, row.attn_implementation) == (
        other.precision,
        other.attn_implementation,
    )


def row_cpu(row: Row) -> dict[str, Any] | None:
    """The CPU record of a row's provenance (None for rows made before provenance was recorded)."""
    return (row.provenance or {}).get("cpu")


def device_cell(row: Row) -> str:
    """The row's device, with its CPU's model and vector kernels where the row records them: runs of
    one grid may come from different hosts, whose float sums and speeds differ."""
    named = host_name(row_cpu(row))
    return f"{row.device}, {named}" if named else row.device


def host_name(cpu: dict[str, Any] | None, fingerprint: bool = False) -> str:
    """A CPU record's model and vector kernels (``AMD EPYC AVX512``), with ``fingerprint`` also its float
    fingerprint in brackets (two hosts may share model and kernels); "" without a record."""
    cpu = cpu or {}
    named = " ".join(str(cpu[key]) for key in ("model", "kernels") if cpu.get(key))
    if fingerprint and named and cpu.get("float_fingerprint"):
        named += f" (float fingerprint {cpu['float_fingerprint']})"
    return named


def timing_hosts(rows: list[Row]) -> list[str]:
    """The hosts (``host_name``, with the float fingerprint) the rows ran on, each once, in the order met:
    records that do not disagree (`cpus_differ`: an older one without the fingerprint) count as one host,
    named by the fuller record, and rows without a record name none. A grid can move between hosts
    part-way, and the minutes measured on each price a run only roughly on another. The page names them
    rather than the machine it is written on, so that it reads the same wherever it is regenerated."""
    return [host_name(cpu, fingerprint=True) for cpu in host_records(rows)]


def host_records(rows: list[Row]) -> list[dict[str, Any]]:
    """The CPU records of the hosts the rows ran on, each once, in the order met (`timing_hosts`): records
    that do not disagree count as one host, kept as the fuller record."""
    seen: list[dict[str, Any]] = []
    for cpu in filter(None, (row_cpu(row) for row in rows)):
        same = next((i for i, other in enumerate(seen) if not cpus_differ(cpu, other)), None)
        if same is None:
            seen.append(cpu)
        elif len(cpu) > len(seen[same]):
            seen[same] = cpu  # the fuller record names the host (with its fingerprint)
    return seen


SPEED_FLAGS = REPO_ROOT / "recipes" / "benchmarks" / "speed_flags.json"
SPEED_FLAGS_ATTENTION = REPO_ROOT / "recipes" / "benchmarks" / "speed_flags_attention.json"
SPEED_FLAGS_LINK = REPO_ROOT / "recipes" / "benchmarks" / "speed_flags_link_attention.json"
SPEED_FLAGS_GRAPH = {
    variant: REPO_ROOT / "recipes" / "benchmarks" / f"speed_flags_{variant}.json"
    for variant in ("graph_half_gate", "graph_self_gate")
}  # `speed_flags.py --recipe`, each from the grid variant's recipe
#: for each attention kernel a bf16 run trains with, and each kind of model (`model_kind`): the
#: ``speed_flags.py --json`` record that measured it against fp32 (with sdpa), and its mode's name there. The
#: model changes the answer: the link's CPU sdpa path sums materialised scores and skips the flash backward
#: that slows vanilla's bf16 sdpa (1.61x fp32 against vanilla's 1.23x), and the graph models' own ratios
#: differ from vanilla's too
MEASURED_KERNELS: dict[tuple[str, str], tuple[Path, str]] = {
    ("sdpa", "vanilla"): (SPEED_FLAGS, "bf16"),
    ("eager", "vanilla"): (SPEED_FLAGS_ATTENTION, "bf16-eager"),
    ("sdpa", "link"): (SPEED_FLAGS_LINK, "bf16"),
    ("eager", "link"): (SPEED_FLAGS_LINK, "bf16-eager"),
    **{
        (kernel, variant): (path, mode)
        for variant, path in SPEED_FLAGS_GRAPH.items()
        for kernel, mode in (("sdpa", "bf16"), ("eager", "bf16-eager"))
    },
}


def linked(row: Row) -> bool:
    """Whether the row's model carries attention scores between layers (``attention_link`` not none)."""
    return row.options.get("attention_link", "none") != "none"


def model_kind(row: Row, measured: dict[tuple[str, str], tuple[Path, str]]) -> str:
    """Which measurement prices the row: ``link`` for any linked model, the row's variant where its own
    model was measured, ``vanilla`` otherwise."""
    if linked(row):
        return "link"
    own = measured.get((row.attn_implementation, row.variant))
    return row.variant if own is not None and own[0].is_file() else "vanilla"


def _group_words(kernel: str, kind: str, groups: list[tuple[str, str]], variants: set[str]) -> str:
    """What sets a group of runs (of `variants`) apart on the page, where the groups differ in it: kernel,
    model or both."""
    words = []
    if len({group[0] for group in groups}) > 1:
        words.append(f"with {kernel} attention")
    kinds = {group[1] for group in groups}
    if len(kinds) > 1:
        if kind == "link":
            words.append("with the attention link")
        elif kind != "vanilla":
            words.append(f"of {kind}")
        elif kinds <= {"vanilla", "link"}:
            words.append("without the link")
        else:
            words.append("of vanilla" if variants == {"vanilla"} else "of the other variants")
    return "".join(f" {word}" for word in words)


def without_speed_flags(
    stopped: list[Row],
    validation_minutes: Callable[[Row], float | None],
    measured: dict[tuple[str, str], tuple[Path, str]] | None = None,
) -> list[str]:
    """What the bf16 runs would have cost in fp32, from ``recipes/benchmarks/speed_flags.py --json``,
    which trains both side by side: each run's training minutes times bf16's training speed-up, and its
    validation minutes (from its log) times the measured fp32/bf16 ratio of one validation pass (bf16
    generation is not faster on a CPU). The runs of each attention kernel and kind of model (`model_kind`)
    are priced with that measurement (`MEASURED_KERNELS`): under bf16, eager and sdpa train at different
    speeds, the link's sdpa at another again, and each graph model at its own. No grid trains a run twice to
    measure this, so it is an estimate, and the page says so and on which host the ratios were measured."""
    measured = MEASURED_KERNELS if measured is None else measured
    bf16_rows = [row for row in stopped if row.precision == "bf16" and row.train_minutes]
    grouped: dict[tuple[str, str], list[Row]] = {}
    for row in bf16_rows:
        grouped.setdefault((row.attn_implementation, model_kind(row, measured)), []).append(row)
    by_kernel = {group: grouped[group] for group in measured if group in grouped}  # in `measured`'s order
    lines = []
    for (kernel, kind), rows in by_kernel.items():
        path, mode = measured[kernel, kind]
        if not path.is_file():
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        fp32, bf16 = record["modes"].get("fp32"), record["modes"].get(mode)
        if not fp32 or not bf16:
            continue
        validation_ratio = fp32["evaluation_seconds"] / bf16["evaluation_seconds"]
        minutes, estimates = [], []
        for row in rows:
            validating = min(validation_minutes(row) or 0.0, row.train_minutes)
            minutes.append(row.train_minutes)
            estimates.append((row.train_minutes - validating) * bf16["speed_vs_fp32"] + validating * validation_ratio)
        hosts = {(row_cpu(row) or {}).get("float_fingerprint") for row in rows}
        host = "the runs' host" if hosts == {record["float_fingerprint"]} else f"host {record['float_fingerprint']}"
        with_kernel = _group_words(kernel, kind, list(by_kernel), {row.variant for row in rows})
        runs, they = ("runs", "they") if len(rows) > 1 else ("run", "it")
        spread = f" on average ({min(minutes):.0f}-{max(minutes):.0f})" if len(rows) > 1 else ""
        lines += [
            "",
            f"Speed flags: the {len(minutes)} bf16 {runs}{with_kernel} took {statistics.mean(minutes):.0f} minutes"
            f"{spread}; in fp32 {they} would take about "
            f"{statistics.mean(estimates):.0f}. That is an estimate, not a run: bf16 autocast{with_kernel} trained "
            f"{bf16['speed_vs_fp32']:.2f}x ±{bf16['speed_vs_fp32_half_iqr']:.2f} as fast as fp32 at the same loss "
            f"and validated at {1 / validation_ratio:.2f}x the time (`{record['command']}`, {record['date']}, "
            f"{host}; [table](../benchmarks/RESULTS.md)), applied to each run's training and validation minutes.",
        ]
    return lines


def validation_minutes(grid: Grid, row: Row) -> float | None:
    """Minutes of the validation passes in a run's training log (every sitting's, up to the checkpoint
    a resumed sitting started from); None without the log."""
    history = grid.log_history(row)
    return None if history is None else sum(entry.get("eval_runtime", 0.0) for entry in history) / 60


class RunsLeft(NamedTuple):
    """What a grid's unfinished runs will cost (``remaining_minutes``)."""

    #: seed -> (runs left, their training minutes)
    by_seed: dict[int, tuple[int, float]]
    #: the longest finished run's minutes (the price of tuning runs and of runs waiting for the tuning)
    longest: float


def remaining_minutes(grid: Grid, rows: list[Row]) -> RunsLeft | None:
    """Per seed, how many of the grid's runs have not finished and what they will cost in training minutes
    (a reader decides on the next seed, not on the whole grid), and the longest finished run's minutes;
    None when none is left or none has finished with its minutes.

    Each run left is priced at the finished runs most like it: its variant's runs in the cells, mean
    minutes. A variant with none yet is priced at the baseline's run at the tuned value (the same
    protocol and the value every variant uses). A tuning run, or any run before the tuning has
    chosen, at the longest finished run: tuning values differ in how long they train until they stop,
    so their mean would price the next value at a guess, and a cautious one serves the reader better.
    A run under way is priced in full: the pages show finished runs only."""
    finished = {row.run: row for row in rows}
    to_run = [run for run in grid.runs() if run.name not in finished]
    timed = {name: row for name, row in finished.items() if row.train_minutes}
    if not to_run or not timed:
        return None
    longest_row = max(timed.values(), key=lambda row: row.train_minutes)
    tuning = {run.name for size in grid.sizes for run in grid.tuning_runs(size)}
    cells = grid.cell_runs()
    by_variant: dict[str, list[Row]] = {}
    for run in cells:
        if run.name in timed:
            by_variant.setdefault(run.variant, []).append(timed[run.name])
    chosen = {run.size: [timed[run.name]] for run in cells if run.name in tuning and run.name in timed}
    by_seed: dict[int, tuple[int, float]] = {}
    for run in to_run:
        if run.name in tuning:
            like = [longest_row]
        else:
            like = by_variant.get(run.variant) or chosen.get(run.size) or [longest_row]
        minutes = statistics.mean(row.train_minutes for row in like)
        count, total = by_seed.get(run.seed, (0, 0.0))
        by_seed[run.seed] = (count + 1, total + minutes)
    return RunsLeft(dict(sorted(by_seed.items())), longest_row.train_minutes)
