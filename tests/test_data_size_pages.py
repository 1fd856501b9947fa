"""The data-size question on a grid's page (the Attention Link paper: the link gains more the less data there is):
a size per training split, named and ordered by its pairs (5K, 10K, the full set), and the figure of Δ against
training size at the plateau beside the paper's points."""

from __future__ import annotations

import json

import yaml
from experiment_fixtures import cell_of, tuning_grid


def _two_sizes(tmp_path, experiments):
    """A converged grid (patience 8) at 10K and 5K, dropout tuned at each, and ``finish`` for its rows."""
    grid = tuning_grid(tmp_path, experiments, seeds=(1, 2, 3), values=[0.1, 0.2])
    spec = yaml.safe_load(grid.path.read_text(encoding="utf-8"))
    spec.update(
        common={"early_stopping_patience": 8},
        sizes={"10k": {"train_split": "train_10k"}, "5k": {"train_split": "train_5k"}},
        figures={"data_size": ["al_both"]},
    )
    grid.path.write_text(yaml.safe_dump(spec), encoding="utf-8")

    def finish(size: str, variant: str, seed: int, test: float, tag: str = "", valid: float = 0.0) -> None:
        run = f"{variant}-{size}-seed{seed}" + (f"-{tag}" if tag else "")
        row = {
            "grid": "tuned", "run": run, "variant": variant, "size": size, "seed": seed, "valid": {"bleu": valid},
            "test": {"bleu": test, "bleu_tokenized": test}, "parameters": 100, "device": "cpu",
            "target_tokens_per_second": 1000.0, "output_dir": str(tmp_path / "absent" / run),
        }  # fmt: skip
        with grid.results.open("a", encoding="utf-8") as results:
            results.write(json.dumps(cell_of(row)) + "\n")

    for size in ("10k", "5k"):
        finish(size, "vanilla", 1, 20.0, tag="dropout0.1", valid=20.0)
        finish(size, "vanilla", 1, 25.0, tag="dropout0.2", valid=24.0)
    for seed, (base, link) in {2: (25.0, 26.0), 3: (24.0, 25.5)}.items():
        finish("10k", "vanilla", seed, base)
        finish("10k", "al_both", seed, link)
    for seed, (base, link) in {2: (20.0, 22.0), 3: (21.0, 22.0)}.items():
        finish("5k", "vanilla", seed, base)
        finish("5k", "al_both", seed, link)
    return experiments["grid"].Grid.load(grid.path)


def test_the_5k_size_is_named_and_set_before_10k(tmp_path, experiments):
    comparisons = experiments["comparisons"]
    grid = _two_sizes(tmp_path, experiments)
    assert comparisons.budget_label(grid, "5k") == "5K pairs, to a plateau"
    header = comparisons.budgets_table([grid], ("vanilla", "al_both"))[0]
    assert header.index("5K pairs, to a plateau") < header.index("10K pairs, to a plateau")
    assert comparisons.plateau_deltas(grid, "al_both") == [("train_5k", [2.0, 1.0]), ("train_10k", [1.0, 1.5])]
    (sentence,) = comparisons.plateau_verdicts([grid], ("vanilla", "al_both"))
    assert sentence.index("5K pairs, to a plateau: al_both undecided (+1.50, n=2") < sentence.index("10K pairs")


def test_the_data_size_figure_draws_each_plateau_size_beside_the_papers_points(tmp_path, experiments, monkeypatch):
    figures = experiments["figures"]
    grid = _two_sizes(tmp_path, experiments)
    drawn = []

    class Axes:
        def __getattr__(self, name):
            return lambda *args, **kwargs: drawn.append((name, args, kwargs))

    class Plt:
        def subplots(self, **kwargs):
            return Figure(), Axes()

        def close(self, figure):
            pass

    class Figure:
        def tight_layout(self):
            pass

        def savefig(self, path, dpi):
            path.write_bytes(b"png")

    monkeypatch.setattr(figures, "_plt", Plt)
    path = figures.plot_delta_by_size(grid, "al_both", tmp_path / "delta.png")
    assert path.is_file()
    (ticks,) = [args for name, args, _ in drawn if name == "set_xticks"]
    assert list(ticks[1]) == ["5K pairs", "10K pairs", "30K pairs", "full IWSLT"]
    ours = [(args[0][0], args[1][0]) for name, args, _ in drawn if name == "errorbar"]
    assert [round(x) for x, _ in ours] == [0, 1] and [mean for _, mean in ours] == [1.5, 1.25]
    (paper,) = [args for name, args, kwargs in drawn if name == "plot" and "paper" in kwargs.get("label", "")]
    assert [round(x) for x in paper[0]] == [1, 2, 3] and paper[1] == [1.0, 0.8, 0.3]
    assert figures.plot_delta_by_size(grid, "vanilla", tmp_path / "none.png") is None  # nothing to compare
