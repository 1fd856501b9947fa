"""Stopping on a validation plateau: the best checkpoint translates the test split, a resumed run stops at
the step an uninterrupted one stops at, nothing reads a clock, and the loss clause keeps a stalled run going."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from experiment_fixtures import (
    assert_same_stop_and_model,
    plateau_run,
)
from recipe_fixtures import (
    one_thread,  # noqa: F401  (autouse fixture)
    tiny_recipe,
    write_recipe,
)
from safetensors.torch import load_file

from hf_graphtf.training import parse_recipe_args
from hf_graphtf.training.resume import STOP_REASONS


def test_a_run_stops_on_a_plateau_and_translates_with_its_best_checkpoint(tmp_path):
    results = plateau_run(tmp_path, "plateau")
    train = results["train"]
    # the first evaluation is the best; three more without improvement end it, far below the cap
    assert train["stop_reason"] == "validation plateau" == STOP_REASONS[0]
    assert (train["best_step"], train["global_step"]) == (1, 4)
    assert train["train_minutes"] > 0 and train["precision"] == "fp32"
    assert [step for step, _ in train["validation_bleu"]] == [1, 2, 3, 4]
    software = results["software"]  # what a rerun must match, as the grid rows record it
    assert software["packages"]["torch"] == torch.__version__ and software["packages"]["transformers"]
    assert software["commit"] is None or len(software["commit"]) == 40
    # the saved model (which translated the test split) is the best checkpoint's, not the last step's
    best = load_file(tmp_path / "plateau" / "checkpoint-1" / "model.safetensors")
    final = load_file(tmp_path / "plateau" / "model.safetensors")
    assert all(torch.equal(best[key], final[key]) for key in best)
    last = load_file(tmp_path / "plateau" / "checkpoint-4" / "model.safetensors")
    assert not all(torch.equal(best[key], last[key]) for key in best)


def test_a_resumed_run_stops_at_the_step_of_an_uninterrupted_one(tmp_path, experiments):
    straight = plateau_run(tmp_path, "straight")["train"]
    # interrupted after step 2, one evaluation into its patience: the counter must come back with it
    plateau_run(tmp_path, "resumed", max_steps=2)

    # the runner says where it stands before it resumes it
    def run_in(folder: str):
        return experiments["grid"].Run("vanilla", "small", 1, tmp_path / "resumed.yaml", {}, tmp_path / folder)

    state = experiments["run_grid"].resume_state(run_in("resumed"))
    best = json.loads((tmp_path / "resumed" / "checkpoint-2" / "trainer_state.json").read_text())["best_metric"]
    assert state == f"resumes from step 2, best validation loss {best} at step 1, 1 of 3 evaluations without a new best"
    # its learning curve so far, as the uninterrupted run's first two evaluations (the runner's view of it)
    progress = run_in("resumed").progress()
    assert [list(point) for point in progress.validation_bleu] == [list(p) for p in straight["validation_bleu"][:2]]
    (tmp_path / "empty").mkdir()
    assert experiments["run_grid"].resume_state(run_in("empty")).startswith("starts over")
    resumed = plateau_run(tmp_path, "resumed")["train"]
    assert resumed["resumed_from_checkpoint"].endswith("checkpoint-2")
    assert_same_stop_and_model(tmp_path, "straight", straight, "resumed", resumed)


def test_the_step_cap_is_named_when_it_ends_a_run(tmp_path):
    train = plateau_run(tmp_path, "capped", early_stopping_patience=50, max_steps=3)["train"]
    assert train["stop_reason"] == "step cap" and train["global_step"] == 3


def test_the_stopping_step_does_not_depend_on_the_clock(tmp_path, monkeypatch):
    """A machine busy with other work makes every step slower: early stopping and the checkpoint kept
    must come out the same (no budget, so the training clock only counts)."""
    import time

    straight = plateau_run(tmp_path, "straight")["train"]
    real = time.monotonic
    slow = {"offset": 0.0}

    def slower() -> float:
        slow["offset"] += 7.0
        return real() + slow["offset"]

    monkeypatch.setattr(time, "monotonic", slower)
    busy = plateau_run(tmp_path, "busy")["train"]
    assert_same_stop_and_model(tmp_path, "straight", straight, "busy", busy)


def test_a_falling_validation_loss_keeps_a_stalled_run_training(tmp_path):
    """The tiny run above, whose metric only gets worse, stops at step 4; with early_stopping_watch_loss
    each new lowest validation loss resets the patience too, and its loss falls at every evaluation, so
    it trains on to the step cap."""
    train = plateau_run(tmp_path, "watching", early_stopping_watch_loss=True, max_steps=8)["train"]
    state = json.loads((tmp_path / "watching" / "trainer_state.json").read_text(encoding="utf-8"))
    losses = [entry["eval_loss"] for entry in state["log_history"] if "eval_loss" in entry]
    assert len(losses) == 8 and all(later < earlier for earlier, later in zip(losses, losses[1:]))
    assert (train["stop_reason"], train["global_step"], train["best_step"]) == ("step cap", 8, 1)
    saved = state["stateful_callbacks"]["PlateauStopping"]
    assert saved["args"]["watch_loss"] is True and saved["attributes"]["best_eval_loss"] == losses[-1]


@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_the_patience_counts_as_transformers_early_stopping_does(threshold):
    """Without the loss clause the count is Transformers' EarlyStoppingCallback's, evaluation by
    evaluation (its best metric kept as the Trainer keeps it: any improvement, threshold or not)."""
    from transformers import EarlyStoppingCallback

    from hf_graphtf.training.plateau import PatienceCount, PlateauRule

    generator = torch.Generator().manual_seed(0)
    bleu = (torch.rand(200, generator=generator) * 3).cumsum(0) % 7  # climbs, falls back, ties
    bleu = [round(value, 1) for value in bleu.tolist()]
    reference = EarlyStoppingCallback(early_stopping_patience=1000, early_stopping_threshold=threshold)
    args, state = SimpleNamespace(greater_is_better=True), SimpleNamespace(best_metric=None)
    rule, count = PlateauRule(patience=1000, metric_key="eval_bleu", threshold=threshold), PatienceCount()
    for value in bleu:
        reference.check_metric_value(args, state, None, value)
        state.best_metric = value if state.best_metric is None or value > state.best_metric else state.best_metric
        count = rule.count(count, value, 3.0)
        assert count.waited == reference.early_stopping_patience_counter and count.best_metric == state.best_metric


def test_the_loss_clause_resets_the_patience_only_on_a_new_lowest_loss():
    """A BLEU stall with a falling loss never stops; a loss that only returns to its best (a tie) or
    rises does not reset; the stop step replays from a log as the callback counts."""
    from hf_graphtf.training.plateau import PlateauRule

    by_bleu, watching = PlateauRule(3, "eval_bleu"), PlateauRule(3, "eval_bleu", watch_loss=True)

    stall = [
        {"step": 100 * i, "eval_bleu": 1.5 if i == 1 else 1.0, "eval_loss": round(5.0 - 0.1 * i, 2)}
        for i in range(1, 12)
    ]
    assert by_bleu.stop_step(stall) == 400  # BLEU alone: 3 evaluations after the best at 100
    assert watching.stop_step(stall) is None  # the loss fell every time
    # the lowest loss is 4.7 at step 300; 4.7 again at 400 (a tie), then higher: stopped at the third
    flat = [
        *stall[:3],
        *({"step": 400 + 100 * i, "eval_bleu": 1.0, "eval_loss": loss} for i, loss in enumerate([4.7, 4.75, 4.8])),
    ]
    assert watching.stop_step(flat) == 600
    unordered = [flat[i] for i in (5, 0, 3, 1, 4, 2)]  # a log read back out of order replays the same
    assert watching.stop_step(unordered) == 600


def test_the_loss_clause_needs_a_patience(tmp_path):
    recipe = tiny_recipe(tmp_path / "corpus", tmp_path / "out", early_stopping_watch_loss=True)
    with pytest.raises(ValueError, match="early_stopping_watch_loss needs early_stopping_patience"):
        parse_recipe_args([str(write_recipe(tmp_path / "recipe.yaml", recipe))])


def test_a_checkpoint_saved_with_other_stateful_callbacks_resumes(tmp_path):
    """A run resumed from a checkpoint saved before its early stopping watched the loss (the state names
    Transformers' EarlyStoppingCallback, not PlateauStopping) saves its next checkpoints and finishes,
    counting its patience from the log as the rule now says."""
    plateau_run(tmp_path, "older", max_steps=2)
    state_file = tmp_path / "older" / "checkpoint-2" / "trainer_state.json"
    state = json.loads(state_file.read_text(encoding="utf-8"))
    state["stateful_callbacks"]["EarlyStoppingCallback"] = state["stateful_callbacks"].pop("PlateauStopping")
    state_file.write_text(json.dumps(state), encoding="utf-8")
    train = plateau_run(tmp_path, "older", max_steps=6, early_stopping_watch_loss=True)["train"]
    assert train["resumed_from_checkpoint"].endswith("checkpoint-2")
    assert (train["global_step"], train["stop_reason"]) == (6, "step cap")  # the loss fell: no plateau
