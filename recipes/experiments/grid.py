"""An experiment grid: (variant x training size x seed) runs of the training script, read from one YAML file.

`run_grid.py` runs the grid and appends one JSON line per finished run to the grid's results file;
`report.py` turns that file into tables and figures. Both import this module for the grid's runs,
their output folders, the results file and the archive (what the report needs from each run, kept in
the repository: see `archive.py`). What the grid file says, checked, is `grid_file.GridFile`; `Grid` adds
the state of its runs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import archive
from .grid_file import REPO_ROOT, Figures, GridFile, Table, Tuning, languages
from .rows import Row, RowsByCell, read_results

__all__ = [
    "REPO_ROOT",
    "Figures",
    "Grid",
    "GridFile",
    "Progress",
    "Run",
    "Table",
    "Tuning",
    "baseline_row",
    "cpus_differ",
    "languages",
    "relative",
    "resolve_corpus",
]


@dataclass(frozen=True)
class Run:
    """One training run of the grid."""

    variant: str
    size: str
    seed: int
    recipe: Path
    overrides: dict[str, Any] = field(hash=False)
    output_dir: Path
    #: a tuning run's setting (``dropout0.2``): part of its name, so that its rows never mix with the grid's
    tag: str = ""
    #: the tuning runs it needs have not all finished: its tuned setting is not known yet
    waits_for_tuning: bool = False

    @property
    def name(self) -> str:
        return f"{self.variant}-{self.size}-seed{self.seed}" + (f"-{self.tag}" if self.tag else "")

    def recipe_fields(self) -> dict[str, Any]:
        """The run's recipe with the grid's overrides on top: what the training script is given."""
        from hf_graphtf.training import load_recipe

        return {**load_recipe(self.recipe), **self.overrides}

    def progress(self) -> Progress | None:
        """Where the run stands, from the newest whole checkpoint in its output folder (the one training
        resumes from); None without one."""
        from hf_graphtf.training.tooling import PlateauRule, newest_complete_checkpoint

        checkpoint, _ = newest_complete_checkpoint(self.output_dir)
        if checkpoint is None:
            return None
        state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
        recipe = self.recipe_fields()
        metric = recipe.get("metric_for_best_model") or "loss"
        rule = PlateauRule.from_fields(recipe.get)
        history = state.get("log_history", [])
        losses = [entry["eval_loss"] for entry in history if "eval_loss" in entry]
        return Progress(
            step=state["global_step"],
            metric={"bleu": "BLEU", "chrf": "chrF"}.get(metric, metric),
            best_metric=state.get("best_metric"),
            best_step=state.get("best_global_step"),
            eval_loss=losses[-1] if losses else None,
            validation_bleu=tuple((entry["step"], entry["eval_bleu"]) for entry in history if "eval_bleu" in entry),
            waited=None if rule is None else rule.replay(history).waited,  # as the resumed run will count
            patience=None if rule is None else rule.patience,
            watch_loss=rule is not None and rule.watch_loss,
        )


@dataclass(frozen=True)
class Progress:
    """How far an unfinished run got: a converged run takes hours over several sittings, and whoever
    restarts the runner or reads the page mid-grid wants to know where it stands."""

    step: int
    #: the metric that picks the best checkpoint, as the page names it (``BLEU``)
    metric: str
    best_metric: float | None
    best_step: int | None
    #: the newest validation loss
    eval_loss: float | None
    #: (step, validation BLEU) of each evaluation so far, for the page's learning curves
    validation_bleu: tuple[tuple[int, float], ...]
    #: evaluations in a row without a new best (nor, with ``watch_loss``, a new lowest loss); None
    #: without early stopping
    waited: int | None
    patience: int | None
    watch_loss: bool

    def patience_text(self) -> str:
        """``3 of 8 evaluations without a new best (nor a lower validation loss)``, or "" without early
        stopping."""
        if self.waited is None:
            return ""
        return f"{self.waited} of {self.patience} evaluations without a new best" + (
            " (nor a lower validation loss)" if self.watch_loss else ""
        )


@dataclass
class Grid(GridFile):
    """A grid file (`GridFile`: what its YAML says) with the state of its runs: which have finished (the
    results file), the tuned value each size's tuning chose, and so the runs still to train and the rows
    that fill the page's cells."""

    def budget_grids(self) -> list[Grid]:
        """The grids a budgets table spans, in its column order: ``earlier_budgets``, this grid, ``other_pairs``."""
        earlier = [Grid.load(REPO_ROOT / path) for path in self.earlier_budgets]
        return [*earlier, self, *(Grid.load(REPO_ROOT / path) for path in self.other_pairs)]

    def runs(self, variants: str | None = None, sizes: str | None = None, seeds: str | None = None) -> list[Run]:
        """The selected runs, seed-major (every variant's first seed before any second seed), so that a
        grid stopped part-way has whole seeds to compare; with tuning, a size's tuning runs come first and
        its other runs wait (``waits_for_tuning``) until the tuned value is known."""
        chosen_variants = self.select(variants, list(self.variants), "variants")
        chosen_sizes = self.select(sizes, list(self.sizes), "sizes")
        chosen_seeds = [int(s) for s in self.select(seeds, [str(s) for s in self.seeds], "seeds")]
        runs = []
        for size in chosen_sizes:
            tuned: dict[str, Any] = {}
            if self.tuning is not None:
                tuning_runs = self.tuning_runs(size)
                runs += tuning_runs
                value = self.tuned_value(size)
                if value is not None:
                    tuned = {self.tuning.field: value}
            for seed in chosen_seeds:
                for variant in chosen_variants:
                    if not self.trains(variant, size, seed):
                        continue
                    if self.tuning is not None and variant == self.tuning.variant and seed == self.tuning.seed:
                        continue  # one of its tuning runs, listed above, is this run
                    run = self._run(variant, size, seed, tuned)
                    if self.tuning is not None and not tuned:
                        run = replace(run, waits_for_tuning=True)
                    runs.append(run)
        return runs

    def named_runs(self, names: str) -> list[Run]:
        """The runs named in ``names`` (comma-separated run names, as the results rows and ``--dry-run`` give
        them), in that order: a grid's remaining runs can be queued in the order that matters (for
        example the leading variant's seeds first) without editing the grid file between runs."""
        by_name = {run.name: run for run in self.runs()}
        chosen = [name.strip() for name in names.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in by_name]
        if unknown or not chosen:
            raise ValueError(f"unknown runs {unknown or [names]}; the grid has {list(by_name)}")
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"a run is named twice in {chosen}")
        return [by_name[name] for name in chosen]

    def _run(self, variant: str, size: str, seed: int, extra: dict[str, Any], tag: str = "") -> Run:
        spec = self.variants[variant]
        overrides = {**self.common, **(spec.get("options") or {}), **self.sizes[size], **extra, "seed": seed}
        run = Run(variant, size, seed, REPO_ROOT / spec["recipe"], overrides, Path(), tag)
        output_dir = self.output_root / run.name
        overrides["output_dir"] = str(output_dir)
        return replace(run, output_dir=output_dir)

    def tuning_values(self, size: str) -> list[Any]:
        """The values of the tuned field that one size trains, in the order they run: the listed ones and
        those the range grew by (``Tuning.values_tried``); none without tuning."""
        if self.tuning is None:
            return []
        return self.tuning.values_tried(self._tuning_bleu(size))

    def tuning_runs(self, size: str) -> list[Run]:
        """The tuning runs of one size, one per value (none without tuning)."""
        return [self._tuning_run(size, value) for value in self.tuning_values(size)]

    def tuned_value(self, size: str) -> Any:
        """The tuned field's value with the best validation BLEU over the size's tuning runs (the first
        listed on a tie), or None while any of them has not finished."""
        valid_bleu = self._tuning_bleu(size)
        values = self.tuning.values_tried(valid_bleu)
        scores = {value: valid_bleu(value) for value in values}
        return None if None in scores.values() else self.tuning.best(values, scores)

    def tuned_edge_note(self, size: str) -> str | None:
        """``Tuning.edge_note`` for one size's chosen value; None while the tuning has not chosen, or
        when the chosen value lies inside the range."""
        tuned = self.tuned_value(size)
        return None if tuned is None else self.tuning.edge_note(self.tuning_values(size), tuned)

    def tuned_unconverged_note(self, size: str) -> str | None:
        """Which of one size's tuning runs stopped other than on a validation plateau (the step cap, a time
        budget), in words; None while the tuning has not chosen, or when every one of them levelled off.

        The rule compares best validation BLEU, and a run cut off while still improving has a best that
        is where it had got to, not where it would level off: beaten by the chosen value, it is not shown
        to stay below it; chosen, the baseline every variant is compared with had not converged."""
        tuned = self.tuned_value(size)
        if tuned is None:
            return None
        rows = {row.run: row for row in self.finished_rows()}
        field = self.tuning.field
        notes = []
        for value in self.tuning_values(size):
            row = rows[self._tuning_run(size, value).name]
            reason = row.stop_reason
            if reason in (None, "validation plateau"):
                continue
            where = f"{field} {value:g} stopped at the {reason} (step {row.steps:,}), not on a validation plateau"
            if value == tuned:
                notes.append(f"{where}: the chosen value's run, the comparison's baseline, had not converged")
            else:
                notes.append(
                    f"{where}: its validation BLEU {row.valid['bleu']} is where it had got to, not where it would "
                    f"level off, so {field} {tuned:g} is chosen over it without {value:g} shown to stay below it"
                )
        return "; ".join(notes) or None

    def tuned_notes(self, size: str) -> list[str]:
        """What a reader must know about one size's chosen value besides the table: at the edge of the
        range (``tuned_edge_note``), against a run cut off before its plateau (``tuned_unconverged_note``).
        The page and the runner's Tuning line both say these."""
        return [note for note in (self.tuned_edge_note(size), self.tuned_unconverged_note(size)) if note]

    def _tuning_run(self, size: str, value: Any) -> Run:
        tuning = self.tuning
        return self._run(tuning.variant, size, tuning.seed, {tuning.field: value}, tuning.tag(value))

    def _tuning_bleu(self, size: str) -> Callable[[Any], float | None]:
        """The validation BLEU of one size's tuning run at a value, None while it has not finished (the
        results file is read once, here)."""
        rows = {row.run: row for row in self.finished_rows()}

        def valid_bleu(value: Any) -> float | None:
            row = rows.get(self._tuning_run(size, value).name)
            return None if row is None else row.valid["bleu"]

        return valid_bleu

    def cell_runs(self) -> list[Run]:
        """The runs whose rows fill the grid's cells: every run, less the tuning runs at values that were
        not chosen (the report shows those in the tuning table)."""
        chosen = {run.name for run in self._chosen_tuning_runs()}
        tuning = {run.name for size in self.sizes for run in self.tuning_runs(size)}
        return [run for run in self.runs() if run.name not in tuning or run.name in chosen]

    def _chosen_tuning_runs(self) -> list[Run]:
        chosen = []
        for size in self.sizes:
            value = self.tuned_value(size) if self.tuning is not None else None
            chosen += [run for run in self.tuning_runs(size) if value is not None and run.tag == self.tuning.tag(value)]
        return chosen

    def finished_rows(self) -> list[Row]:
        """This grid's rows in its results file (a results file may be shared by several grids)."""
        return [row for row in read_results(self.results) if row.grid == self.name]

    def rows_by_cell(self) -> RowsByCell:
        """The finished rows by (variant, size), each list in seed order. With tuning, the tuning runs at
        values that were not chosen stay out of the cells (the report's tuning table shows them)."""
        rows_by: RowsByCell = defaultdict(list)
        cells = {run.name for run in self.cell_runs()} if self.tuning is not None else None
        for row in self.finished_rows():
            if cells is None or row.run in cells:
                rows_by[(row.variant, row.size)].append(row)
        for runs in rows_by.values():
            runs.sort(key=lambda row: row.seed)
        return rows_by

    def hypotheses(self, row: Row) -> list[str] | None:
        """A finished run's test translations, from its archive or else its output folder."""
        return archive.read_hypotheses(self.archive_folder(row.run), REPO_ROOT / row.output_dir)

    def log_history(self, row: Row) -> list[dict[str, Any]] | None:
        """A finished run's training log, from its archive or else its output folder."""
        return archive.read_log_history(self.archive_folder(row.run), REPO_ROOT / row.output_dir)

    def test_pairs(self, limit: int | None = None) -> tuple[list[str], list[str]]:
        """Sources and references of the test split (the same for every size), ``limit`` of them spread
        over the split; the corpus and languages come from the first variant's recipe."""
        from hf_graphtf.data import load_parallel_corpus
        from hf_graphtf.training import load_recipe

        recipe = {**load_recipe(REPO_ROOT / next(iter(self.variants.values()))["recipe"]), **self.common}
        src_lang, tgt_lang = languages(recipe)
        corpus = resolve_corpus(recipe["corpus"])
        data = load_parallel_corpus(corpus, src_lang=src_lang, tgt_lang=tgt_lang, split="test")
        count = min(limit or len(data), len(data))
        pairs = data.select([i * len(data) // count for i in range(count)])["translation"]
        return [pair[src_lang] for pair in pairs], [pair[tgt_lang] for pair in pairs]


def resolve_corpus(corpus: str) -> str:
    """A recipe's corpus as the scripts open it: a path relative to the repository made absolute; an
    absolute path or a Hub id as it is."""
    return corpus if Path(corpus).is_absolute() or not (REPO_ROOT / corpus).exists() else str(REPO_ROOT / corpus)


def relative(path: Path) -> str:
    """A path as the pages and messages name it: relative to the repository where it lies inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def baseline_row(rows_by: RowsByCell, variant: str, size: str, seed: int | None) -> Row | None:
    """Vanilla's finished run of a size and seed (the tuned one: ``rows_by``, `Grid.rows_by_cell`, holds
    the chosen runs), the run a variant's run is set beside; None for vanilla itself or before that run
    has finished."""
    if variant == "vanilla":
        return None
    return next((row for row in rows_by.get(("vanilla", size), []) if row.seed == seed), None)


def cpus_differ(recorded: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """Whether two CPU records (a row's ``provenance.cpu``) disagree on what both name. A row without
    one counts as agreeing: rows made before the records existed are judged by their scores alone, and
    rows made before the float fingerprint was recorded on model and vector kernels alone."""
    return bool(recorded) and bool(other) and any(recorded[key] != other[key] for key in recorded.keys() & other.keys())
