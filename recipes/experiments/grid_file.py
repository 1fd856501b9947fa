"""A grid file's parsed form: what its YAML says, checked when it is read (`GridFile.load`).

`grid.Grid` adds the state of the grid's runs (which have finished, the tuned value, what is left to
train); the report, the runner and the tests read the file through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Self

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    that has run, the attention-entropy figure from each of ``entropy`` (first seed's model), and a figure of
    Δ against training size at the plateau for each of ``data_size`` (with the paper's points beside it)."""

    gates: tuple[str, ...] = ()
    entropy: tuple[str, ...] = ()
    data_size: tuple[str, ...] = ()


def _pair(common: dict[str, Any], first_recipe: Path) -> str:
    """``src-tgt`` as `test_pairs` reads the languages: the recipe its first variant names, under the grid's
    shared values."""
    recipe = yaml.safe_load(first_recipe.read_text(encoding="utf-8")) or {}
    return "-".join(languages({**recipe, **common}))


@dataclass
class GridFile:
    """A grid file as written, checked: shared overrides, sizes, variants, seeds, where outputs, results and
    archive go, the tuning and the page's layout. Nothing here reads a run's outputs or the results file:
    `grid.Grid` adds that state.

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
    #: for a size that trains only some variants or seeds (its ``variants``/``seeds`` keys): which
    #: (None: every variant, at its own seeds)
    size_variants: dict[str, list[str] | None] = field(default_factory=dict)
    size_seeds: dict[str, list[int] | None] = field(default_factory=dict)
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
    def load(cls, path: str | Path, root: Path = REPO_ROOT) -> Self:
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
        sizes, size_variants, size_seeds = _sizes(path, spec["sizes"], variants, spec["seeds"])
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
                + [(f"size {name}", values) for name, values in sizes.items()]
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
            sizes=sizes,
            variants=variants,
            core=list(spec.get("core") or variants),
            tuning=tuning,
            size_variants=size_variants,
            size_seeds=size_seeds,
            earlier_budgets=list(spec.get("earlier_budgets") or []),
            other_pairs=list(spec.get("other_pairs") or []),
            pair=_pair(spec.get("common") or {}, root / next(iter(variants.values()))["recipe"]),
            tables=_tables(path, spec.get("tables"), variants),
            figures=_figures(path, spec.get("figures"), variants),
        )

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

    def variant_seeds(self, variant: str) -> list[int]:
        """The seeds one variant trains: its own ``seeds`` where the grid file gives them (a subset of the
        grid's, so that the variants a question turns on get more seeds than the rest), else the grid's."""
        return [int(seed) for seed in self.variants[variant].get("seeds") or self.seeds]

    def trains(self, variant: str, size: str, seed: int) -> bool:
        """Whether the grid trains this variant at this size and seed: the variant's seeds, narrowed by the
        size's own ``variants`` and ``seeds`` where it names them."""
        variants, seeds = self.size_variants.get(size), self.size_seeds.get(size)
        return (
            seed in self.variant_seeds(variant)
            and (variants is None or variant in variants)
            and (seeds is None or seed in seeds)
        )

    def archive_folder(self, run_name: str) -> Path:
        """Where a finished run's translations and training log are kept in the repository."""
        return self.archive / run_name


def languages(recipe: dict[str, Any]) -> tuple[str, str]:
    """A recipe's (source, target) languages, with the training script's defaults where it names none."""
    from hf_graphtf.training import DataArguments

    defaults = {item.name: item.default for item in fields(DataArguments)}
    return recipe.get("src_lang", defaults["src_lang"]), recipe.get("tgt_lang", defaults["tgt_lang"])


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
    """A grid file's ``figures`` (``gates``, ``entropy``, ``data_size``: variants of the grid), checked; none
    without it."""
    spec = spec or {}
    keys = ("gates", "entropy", "data_size")
    unknown = set(spec) - set(keys)
    if unknown:
        raise ValueError(f"{path}: figures takes {', '.join(keys)}; got {sorted(unknown)}")
    for key, names in spec.items():
        _known(path, f"figures.{key}", names, variants)
    return Figures(*(tuple(spec.get(key) or ()) for key in keys))


def _known(path: Path, where: str, names: Any, variants: dict[str, Any]) -> None:
    if not isinstance(names, list) or any(name not in variants for name in names):
        raise ValueError(f"{path}: {where} names {names!r}; each must be one of the grid's variants {list(variants)}")


#: the keys of a size that narrow what it trains rather than override the recipe
_SIZE_SCOPE_KEYS = ("variants", "seeds")


def _sizes(
    path: Path, spec: Any, variants: dict[str, Any], seeds: list[int]
) -> tuple[dict[str, dict[str, Any]], dict[str, list[str] | None], dict[str, list[int] | None]]:
    """A grid file's ``sizes``: each size's recipe overrides, and the variants and seeds it trains where it
    names them (``5k: {train_split: train_5k, variants: [vanilla, al_both], seeds: [1, 2, 3]}``: a smaller
    condition that asks one question of fewer runs), checked against the grid's variants and seeds."""
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"{path}: sizes maps each size's name to its overrides")
    overrides, size_variants, size_seeds = {}, {}, {}
    for name, values in spec.items():
        values = dict(values or {})
        chosen = values.pop("variants", None)
        if chosen is not None:
            _known(path, f"size {name!r} variants", chosen, variants)
        own = values.pop("seeds", None)
        if own is not None and (
            not isinstance(own, list) or not own or any(not isinstance(seed, int) or seed not in seeds for seed in own)
        ):
            raise ValueError(f"{path}: size {name!r} seeds must be a list of the grid's seeds {seeds}, not {own!r}")
        overrides[name], size_variants[name], size_seeds[name] = values, chosen, own
    return overrides, size_variants, size_seeds


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
