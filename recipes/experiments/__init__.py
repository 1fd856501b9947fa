"""The experiment tooling: run a grid of training runs, keep what each run needs, report the grid.

A grid file (``grid_*.yaml``) names the runs (variants x sizes x seeds), the protocol they share and the
tables of its page. Two scripts use it, each run as ``python recipes/experiments/<script>.py GRID``:
`run_grid` (train, record a row per finished run, archive its translations and log) and `report` (the
page, ``RESULTS_<grid>.md``, and its figures). The modules they share:

- `rows`: a finished run's record (`Row`, typed and versioned; older rows are upgraded where they are read);
- `grid`: the grid file (`Grid`: its runs, tuning, tables and figures) and the rows it has;
- `archive`: a run's test translations and training log, kept in the repository;
- `comparisons`, `speeds`: the numbers of the page's tables; `figures`: its plots;
- `sections` and `page_template.md`: the page's sections and their prose.
"""
