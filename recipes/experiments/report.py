"""Turn a grid's results file into its page, ``RESULTS_<grid name>.md``, and PNG figures.

    python recipes/experiments/report.py recipes/experiments/grid_bible_cpu.yaml
    python recipes/experiments/report.py GRID --no-analysis   # no model loading: gate/entropy figures kept

The page: how far the grid has run, the tuning, where each run stopped, the verdict across budgets,
the comparison tables the grid file names (``tables``: as the papers lay theirs out, every cell the
mean +- sd over seeds of test BLEU, with the difference from vanilla and sacreBLEU's paired bootstrap
p on the seeds' pooled translations), the figures (BLEU by source length, learning curves, and from
the first seed's models the graph gate and attention entropy per layer) and every run. Nothing in the
results file is dropped.

Translations and training logs come from the grid's archive in the repository (archive.py), else from
the runs' output folders; the report refuses to write a page that would lose a run's bootstrap test or
learning curve because neither is here (``run_grid.py GRID --restore`` brings them back).

This script assembles the page and the README's generated parts; the sections and their prose come
from ``sections.py`` and ``page_template.md``, the tables from ``comparisons.py``, the figures from
``figures.py``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as a script (`python recipes/experiments/report.py`): import its siblings as the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "recipes.experiments"

from . import archive
from .comparisons import BOOTSTRAP_SAMPLES, compared_pairs, comparison_table, grid_budgets_table, test_references
from .figures import (
    analysis_figures,
    models_missing_for_analysis,
    plot_bleu_by_length,
    plot_delta_by_size,
    plot_learning_curves,
)
from .grid import REPO_ROOT, Grid, relative
from .sections import budgets_section, progress_section, prose, runs_section, stopping_section, tuning_section


def write_report(grid: Grid, analysis: bool = True, out: Path | None = None, date: datetime.date | None = None) -> Path:
    """Write the grid's page (``grid.page``, or the same name in ``out``) and its figures, dated ``date``
    (today). Without ``analysis`` no model is loaded: the gate and entropy figures are not redrawn, and
    those already in the figures folder (drawn from the same first-seed models, which a finished run never
    changes) stay linked."""
    rows, rows_by = grid.finished_rows(), grid.rows_by_cell()
    sizes = [size for size in grid.sizes if any(size == key[1] for key in rows_by)]
    references = test_references(grid, sizes)
    out = grid.results.parent if out is None else out
    figures = out / "figures" / grid.name
    figures.mkdir(parents=True, exist_ok=True)
    figure_paths: list[Path] = []
    for size in sizes:
        drawn = (
            plot_bleu_by_length(rows_by, size, figures / f"bleu_by_length_{size}.png"),
            plot_learning_curves(grid, rows_by, size, figures / f"learning_curves_{size}.png"),
        )
        figure_paths += [path for path in drawn if path]
        if analysis:
            figure_paths += analysis_figures(rows_by, size, figures, grid)
        else:
            drawn_before = (figures / f"gates_{size}.png", figures / f"entropy_{size}.png")
            figure_paths += [path for path in drawn_before if path.is_file()]
    for variant in grid.figures.data_size:  # the gain against training size, beside the paper's
        figure_paths += [
            path for path in [plot_delta_by_size(grid, variant, figures / f"delta_by_size_{variant}.png")] if path
        ]
    overrides = ", ".join(f"`{key}: {_yaml(value)}`" for key, value in grid.common.items())
    budgets = "; ".join(
        f"{size}: " + ", ".join(f"`{k}: {_yaml(v)}`" for k, v in values.items()) for size, values in grid.sizes.items()
    )
    generated = prose(
        "generated",
        grid_file=relative(grid.path),
        date=(date or datetime.date.today()).isoformat(),
        results_file=relative(grid.results),
        count=len(rows),
        devices="; ".join(sorted({row.device for row in rows})) or "–",
    )
    signature = f"(`{rows[0].test['bleu_signature']}`)" if rows else ""
    protocol = prose("protocol", overrides=overrides, budgets=budgets, signature=signature, samples=BOOTSTRAP_SAMPLES)
    tables = [
        line
        for table in grid.tables
        for line in (f"## {table.title}", "", *comparison_table(grid, rows_by, table, sizes, references), "")
    ]
    lines = [
        f"# Experiment results: grid `{grid.name}`",
        "",
        generated,
        "",
        *progress_section(grid, rows),
        protocol,
        "",
        *tuning_section(grid, rows, figures),
        *stopping_section(grid, rows),
        *budgets_section(grid),
        *tables,
        "## Figures",
        "",
        *([f"![{path.stem}](figures/{grid.name}/{path.name})" for path in figure_paths] or ["None yet."]),
        "",
        *runs_section(grid, rows),
    ]
    path = out / grid.page.name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


README_START, README_END = "<!-- experiment tables: start -->", "<!-- experiment tables: end -->"


GLANCE_START, GLANCE_END = "<!-- results at a glance: start -->", "<!-- results at a glance: end -->"


def update_readme_glance(readme: Path, grid: Grid, date: datetime.date | None = None) -> None:
    """Write the grid's budgets table (`grid_budgets_table`) between the README's at-a-glance markers."""
    text = readme.read_text(encoding="utf-8")
    if GLANCE_START not in text or GLANCE_END not in text:
        raise ValueError(f"{readme}: no {GLANCE_START} ... {GLANCE_END} markers to write the table between")
    grids = grid.budget_grids()
    runs = sum(len(each.finished_rows()) for each in grids)
    pairs = compared_pairs(grids) or [grid.pair]
    splits = f"{' and '.join(pairs)} test split" + ("s (the same chapters in each)" if len(pairs) > 1 else "")
    date = (date or datetime.date.today()).isoformat()
    generated = prose("readme glance", grid_file=relative(grid.path), date=date, runs=runs, splits=splits)
    body = "\n".join([generated, "", *grid_budgets_table(grid)])
    before, rest = text.split(GLANCE_START, 1)
    after = rest.split(GLANCE_END, 1)[1]
    readme.write_text(f"{before}{GLANCE_START}\n{body}\n{GLANCE_END}{after}", encoding="utf-8")


def update_readme(readme: Path, page: Path, grid: Grid) -> None:
    """Copy the two comparison tables of ``page`` between the README's markers (generated, never typed)."""
    text = readme.read_text(encoding="utf-8")
    if README_START not in text or README_END not in text:
        raise ValueError(f"{readme}: no {README_START} ... {README_END} markers to write the tables between")
    report = page.read_text(encoding="utf-8")
    first = f"## {grid.tables[0].title}"
    tables = first + report.split(first, 1)[1].split("## Figures", 1)[0]
    for table in grid.tables:  # a level below the README's own headings
        tables = tables.replace(f"## {table.title}", f"#### {table.title}")
    header = report.split("\n\n", 2)[1]  # the "Generated by ..." paragraph
    body = f"{header}\n\n{tables}".rstrip()
    before, rest = text.split(README_START, 1)
    after = rest.split(README_END, 1)[1]
    readme.write_text(f"{before}{README_START}\n{body}\n{README_END}{after}", encoding="utf-8")


def _yaml(value: Any) -> str:
    """A value as the grid file spells it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _some(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def runs_missing_outputs(grid: Grid) -> list[str]:
    """Runs with neither an archive nor an output folder holding their translations and training log.

    Without them the report has no bootstrap test and no learning curve for the run, and would
    overwrite a page that had them with one that shows "–". Runs archive themselves as they finish;
    ``run_grid.py GRID --restore`` archives older ones."""
    return [
        row.run
        for row in grid.finished_rows()
        if not (archive.is_archived(grid.archive_folder(row.run)) or archive.can_archive(REPO_ROOT / row.output_dir))
    ]


def grids_missing_test_corpus(grid: Grid) -> list[tuple[Grid, str]]:
    """The grids the page compares (`Grid.budget_grids`) that have finished runs but whose test split is
    not on this machine, each with the loader's error (it names the command that builds the corpus).

    The paired bootstrap tests score the runs' translations against that split; without it their
    p-values would drop out of the tables and the README with nothing said."""
    missing = []
    for each in grid.budget_grids():
        if not each.finished_rows():
            continue
        try:
            each.test_pairs(limit=1)
        except (FileNotFoundError, ValueError) as error:
            missing.append((each, str(error)))
    return missing


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
        help="write the report even where runs' output folders, or the test corpus of a grid it compares, are "
        "missing (their p-values and curves drop out)",
    )
    args = parser.parse_args(argv)
    grid = Grid.load(args.grid)
    missing = runs_missing_outputs(grid)
    if missing and not args.allow_missing_outputs:
        print(
            f"error: {len(missing)} runs in {relative(grid.results)} have no archive and no output folder "
            f"here ({_some(missing)}); the report would lose their bootstrap tests and learning curves. "
            f"Restore them with `python recipes/experiments/run_grid.py {relative(grid.path)} --restore` "
            "(it reruns what it must and checks each rerun reproduces its row), or pass --allow-missing-outputs.",
            file=sys.stderr,
        )
        return 2
    corpora = grids_missing_test_corpus(grid)
    if corpora and not args.allow_missing_outputs:
        for each, error in corpora:
            print(
                f"error: {relative(each.path)} has finished runs but its test corpus is not here, so their "
                f"paired bootstrap p-values would drop out: {error}",
                file=sys.stderr,
            )
        print("Build the corpora, or pass --allow-missing-outputs to write the page without them.", file=sys.stderr)
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
            update_readme(args.readme, page, grid)
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
