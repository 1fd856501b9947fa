"""An experiment grid: (variant x training size x seed) runs of the training script, read from one YAML file.

`run_grid.py` runs the grid and appends one JSON line per finished run to the grid's results file;
`report.py` turns that file into tables and figures. Both import this module for the grid's runs,
their output folders, the results file and the archive (what the report needs from each run, kept in
the repository: see `archive.py`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from . import archive
from .rows import Row, RowsByCell, read_results

REPO_ROOT = Path(__file__).resolve().parents[2]


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


@dataclass(frozen=True)
class Tuning:
    """One hyperparameter tuned on the baseline before the comparison, the papers' practice: ``variant``
    (vanilla) is trained with seed ``seed`` at each of ``values`` of ``field``, on every size; the value
    with the best validation BLEU is then used by every run of that size. The baseline's own run at that
    value is the tuning run (it is not trained twice). Rows of tuning runs carry ``tuning`` and the tag."""

    variant: str
    field: str
    values: list[Any]
    seed: int
    #: grow the range by this much on the side where the best value lies at its edge (None: fixed values)
    step: float | None = None
    #: the lowest and highest value the range may grow to
    bounds: tuple[float, float] | None = None
    #: why the values are these (a sentence the page prints under its tuning heading), where the range
    #: leaves out values a reader would expect: a value left out unexplained reads as one not thought of
    range_reason: str | None = None

    def tag(self, value: Any) -> str:
        return f"{self.field}{value}"

    def values_tried(self, valid_bleu: Callable[[Any], float | None]) -> list[Any]:
        """The values to train, given each value's validation BLEU (``valid_bleu``, None while its run has
        not finished): the listed ones, and, while every one of them has finished and the best lies at
        the edge of the range, the next value beyond that edge, within ``bounds``. A best value at the
        edge of the range is not yet a tuned one: the value just beyond might be better still."""
        values = list(self.values)
        while self.step is not None:
            scores = {value: valid_bleu(value) for value in values}
            if None in scores.values():
                break
            best = self.best(values, scores)
            low, high = self.bounds
            if best == max(values) and round(best + self.step, 10) <= high:
                values.append(round(best + self.step, 10))
            elif best == min(values) and round(best - self.step, 10) >= low:
                values.append(round(best - self.step, 10))
            else:
                break
        return values

    def edge_note(self, values: list[Any], chosen: Any) -> str | None:
        """Why a chosen value at the edge of the values tried is the best the grid tried rather than a
        tuned optimum: the range stopped there (at a bound, or, without ``step``, at the listed values)
        and the value beyond it was never trained. None when the best lies inside the range."""
        if len(values) < 2 or chosen not in (min(values), max(values)):
            return None
        side = "highest" if chosen == max(values) else "lowest"
        limit = (
            f"the {side} the grid allows ({self.bounds[0]:g}-{self.bounds[1]:g})"
            if self.step is not None
            else f"the {side} listed"
        )
        return (
            f"{self.field} {chosen:g} is the {side} value tried, {limit}: the best within the range, "
            "not shown to be the best there is"
        )

    @staticmethod
    def best(values: list[Any], valid_bleu: dict[Any, float]) -> Any:
        """The value with the best validation BLEU (the first listed on a tie)."""
        return max(values, key=lambda value: (valid_bleu[value], -values.index(value)))


@dataclass(frozen=True)
class Table:
    """One comparison table of a grid's page, as its grid file lays it out: its heading, its variants in row
    order (those without a finished run are left out) and, with ``cost``, the parameters and speed columns."""

    title: str
    variants: tuple[str, ...]
    cost: bool = False


@dataclass(frozen=True)
class Figures:
    """The variants a grid's analysis figures are drawn from: the gate figure from the first of ``gates``
    that has run, the attention-entropy figure from each of ``entropy`` (first seed's model)."""

    gates: tuple[str, ...] = ()
    entropy: tuple[str, ...] = ()


def _pair(common: dict[str, Any], first_recipe: Path) -> str:
    """``src-tgt`` as `test_pairs` reads the languages: the recipe its first variant names, under the grid's
    shared values."""
    recipe = yaml.safe_load(first_recipe.read_text(encoding="utf-8")) or {}
    return "-".join(languages({**recipe, **common}))


@dataclass
class Grid:
    """A grid file: shared overrides, sizes, variants, seeds, where outputs, results and archive go.

    ``archive`` defaults to ``archive/<name>`` beside the results file."""

    path: Path
    name: str
    results: Path
    output_root: Path
    archive: Path
    seeds: list[int]
    common: dict[str, Any]
    sizes: dict[str, dict[str, Any]]
    variants: dict[str, dict[str, Any]]
    core: list[str]
    tuning: Tuning | None = None
    #: grid files whose budgets the report sets beside this grid's ("how the verdict moves")
    earlier_budgets: list[str] = field(default_factory=list)
    #: grid files of the same question on other language pairs, whose columns the report sets after this
    #: pair's (the README's table: a column per pair and budget)
    other_pairs: list[str] = field(default_factory=list)
    #: the language pair its runs translate, ``src-tgt`` (the grid's ``common`` or its first recipe)
    pair: str = ""
    #: the page's comparison tables (by default one of every variant) and analysis figures
    tables: list[Table] = field(default_factory=list)
    figures: Figures = field(default_factory=Figures)

    @classmethod
    def load(cls, path: str | Path, root: Path = REPO_ROOT) -> Grid:
        """Read a grid YAML; relative paths in it are relative to ``root`` (the repository)."""
        path = Path(path)
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        missing = [key for key in ("name", "results", "output_root", "seeds", "sizes", "variants") if key not in spec]
        if missing:
            raise ValueError(f"{path}: missing {', '.join(missing)}")
        variants = spec["variants"]
        for name, variant in variants.items():
            recipe = root / variant.get("recipe", "")
            if not recipe.is_file():
                raise ValueError(
                    f"{path}: variant {name!r} names recipe {variant.get('recipe')!r}, which does not exist"
                )
        unknown = [name for name in spec.get("core", []) if name not in variants]
        if unknown:
            raise ValueError(f"{path}: core lists unknown variants {unknown}")
        for name, variant in variants.items():
            own = variant.get("seeds")
            if own is None:
                continue
            if not isinstance(own, list) or not own or not all(isinstance(seed, int) for seed in own):
                raise ValueError(f"{path}: variant {name!r} seeds must be a list of integers, not {own!r}")
            outside = [seed for seed in own if seed not in spec["seeds"]]
            if outside:
                raise ValueError(f"{path}: variant {name!r} lists seeds {outside} that the grid's seeds lack")
        tuning = None
        if spec.get("tuning"):
            tuning_spec = spec["tuning"]
            missing = [key for key in ("variant", "field", "values", "seed") if key not in tuning_spec]
            if missing:
                raise ValueError(f"{path}: tuning is missing {', '.join(missing)}")
            unknown = sorted(set(tuning_spec) - set(_TUNING_KEYS))
            if unknown:  # a misspelt key would otherwise be dropped without a word
                raise ValueError(f"{path}: tuning has unknown keys {unknown}; it takes {', '.join(_TUNING_KEYS)}")
            reason = tuning_spec.get("range_reason")
            if reason is not None and (not isinstance(reason, str) or not reason.strip()):
                raise ValueError(f"{path}: tuning's range_reason must be a sentence, not {reason!r}")
            tuning = Tuning(
                tuning_spec["variant"],
                tuning_spec["field"],
                list(tuning_spec["values"]),
                tuning_spec["seed"],
                range_reason=None if reason is None else reason.strip(),
            )
            if "extend" in tuning_spec:
                tuning = replace(tuning, **_tuning_extension(path, tuning, tuning_spec["extend"]))
            if tuning.variant not in variants:
                raise ValueError(f"{path}: tuning names unknown variant {tuning.variant!r}")
            if len(tuning.values) < 2:
                raise ValueError(f"{path}: tuning needs at least two values of {tuning.field}")
            if tuning.seed not in spec["seeds"]:
                raise ValueError(f"{path}: the tuning seed {tuning.seed} is not one of the grid's seeds")
            fixed = [
                where
                for where, values in [("common", spec.get("common") or {})]
                + [(f"variant {name}", variant.get("options") or {}) for name, variant in variants.items()]
                + [(f"size {name}", values or {}) for name, values in spec["sizes"].items()]
                if tuning.field in values
            ]
            if fixed:
                raise ValueError(f"{path}: {tuning.field} is tuned, but {', '.join(fixed)} also set it")
        return cls(
            path=path,
            name=spec["name"],
            results=root / spec["results"],
            output_root=root / spec["output_root"],
            archive=root / spec["archive"]
            if "archive" in spec
            else (root / spec["results"]).parent / "archive" / spec["name"],
            seeds=[int(seed) for seed in spec["seeds"]],
            common=dict(spec.get("common") or {}),
            sizes={name: dict(values or {}) for name, values in spec["sizes"].items()},
            variants=variants,
            core=list(spec.get("core") or variants),
            tuning=tuning,
            earlier_budgets=list(spec.get("earlier_budgets") or []),
            other_pairs=list(spec.get("other_pairs") or []),
            pair=_pair(spec.get("common") or {}, root / next(iter(variants.values()))["recipe"]),
            tables=_tables(path, spec.get("tables"), variants),
            figures=_figures(path, spec.get("figures"), variants),
        )

    def budget_grids(self) -> list[Grid]:
        """The grids a budgets table spans, in its column order: ``earlier_budgets``, this grid, ``other_pairs``."""
        earlier = [Grid.load(REPO_ROOT / path) for path in self.earlier_budgets]
        return [*earlier, self, *(Grid.load(REPO_ROOT / path) for path in self.other_pairs)]

    @property
    def page(self) -> Path:
        """The report's page, ``RESULTS_<name>.md`` beside the results file: one page per grid, so that one
        grid's report never replaces another's (figures likewise go to ``figures/<name>/``)."""
        return self.results.parent / f"RESULTS_{self.name}.md"

    def select(self, names: str | None, available: list[str], what: str) -> list[str]:
        """``all``/None, ``core`` (variants), or a comma-separated list checked against ``available``."""
        if names in (None, "all"):
            return list(available)
        chosen = self.core if names == "core" and what == "variants" else [n.strip() for n in names.split(",")]
        unknown = [name for name in chosen if name not in available]
        if unknown:
            raise ValueError(f"unknown {what} {unknown}; the grid has {available}")
        return chosen

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
                    if seed not in self.variant_seeds(variant):
                        continue
                    if self.tuning is not None and variant == self.tuning.variant and seed == self.tuning.seed:
                        continue  # one of its tuning runs, listed above, is this run
                    run = self._run(variant, size, seed, tuned)
                    if self.tuning is not None and not tuned:
                        run = replace(run, waits_for_tuning=True)
                    runs.append(run)
        return runs

    def variant_seeds(self, variant: str) -> list[int]:
        """The seeds one variant trains: its own ``seeds`` where the grid file gives them (a subset of the
        grid's, so that the variants a question turns on get more seeds than the rest), else the grid's."""
        return [int(seed) for seed in self.variants[variant].get("seeds") or self.seeds]

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

    def archive_folder(self, run_name: str) -> Path:
        """Where a finished run's translations and training log are kept in the repository."""
        return self.archive / run_name

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


def languages(recipe: dict[str, Any]) -> tuple[str, str]:
    """A recipe's (source, target) languages, with the training script's defaults where it names none."""
    from hf_graphtf.training import DataArguments

    defaults = {item.name: item.default for item in fields(DataArguments)}
    return recipe.get("src_lang", defaults["src_lang"]), recipe.get("tgt_lang", defaults["tgt_lang"])


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


def _tables(path: Path, spec: Any, variants: dict[str, Any]) -> list[Table]:
    """A grid file's ``tables``, checked: each names a title and variants of the grid (a misspelt variant
    would otherwise drop out of its table unseen); without any, one table of every variant."""
    if spec is None:
        return [Table("Every variant", tuple(variants))]
    if not isinstance(spec, list) or not spec:
        raise ValueError(f"{path}: tables is a list of {{title, variants, cost}}")
    tables = []
    for table in spec:
        if not isinstance(table, dict) or not {"title", "variants"} <= set(table) <= {"title", "variants", "cost"}:
            raise ValueError(f"{path}: a table takes title, variants and cost (optional); got {table!r}")
        _known(path, f"table {table['title']!r}", table["variants"], variants)
        tables.append(Table(str(table["title"]), tuple(table["variants"]), bool(table.get("cost", False))))
    return tables


def _figures(path: Path, spec: Any, variants: dict[str, Any]) -> Figures:
    """A grid file's ``figures`` (``gates``, ``entropy``: variants of the grid), checked; none without it."""
    spec = spec or {}
    unknown = set(spec) - {"gates", "entropy"}
    if unknown:
        raise ValueError(f"{path}: figures takes gates and entropy; got {sorted(unknown)}")
    for key, names in spec.items():
        _known(path, f"figures.{key}", names, variants)
    return Figures(tuple(spec.get("gates") or ()), tuple(spec.get("entropy") or ()))


def _known(path: Path, where: str, names: Any, variants: dict[str, Any]) -> None:
    if not isinstance(names, list) or any(name not in variants for name in names):
        raise ValueError(f"{path}: {where} names {names!r}; each must be one of the grid's variants {list(variants)}")


#: the keys a grid file's ``tuning`` takes
_TUNING_KEYS = ("variant", "field", "values", "seed", "extend", "range_reason")


def _tuning_extension(path: Path, tuning: Tuning, extend: Any) -> dict[str, Any]:
    """``step`` and ``bounds`` of a tuning's ``extend: {step: 0.1, bounds: [0.0, 0.5]}``, checked."""
    if not isinstance(extend, dict) or set(extend) != {"step", "bounds"}:
        raise ValueError(f"{path}: tuning.extend takes step and bounds, as in {{step: 0.1, bounds: [0.0, 0.5]}}")
    step, bounds = extend["step"], extend["bounds"]
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
        raise ValueError(f"{path}: tuning.extend.step must be a positive number; got {step!r}")
    numbers = isinstance(bounds, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bounds)
    if not numbers or len(bounds) != 2 or bounds[0] > bounds[1]:
        raise ValueError(f"{path}: tuning.extend.bounds must be [lowest, highest]; got {bounds!r}")
    outside = [value for value in tuning.values if not bounds[0] <= value <= bounds[1]]
    if outside:
        raise ValueError(f"{path}: tuning values {outside} lie outside tuning.extend.bounds {bounds}")
    return {"step": float(step), "bounds": (float(bounds[0]), float(bounds[1]))}
