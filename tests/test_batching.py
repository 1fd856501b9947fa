"""Token-based batching and the training time budget, alone and through the recipe."""

from __future__ import annotations

import json
import random

import pytest
import torch
from recipe_fixtures import (
    one_thread,  # noqa: F401  (autouse fixture)
    tiny_recipe,
    write_recipe,
    write_tiny_corpus,
)
from safetensors.torch import load_file

from hf_graphtf.tokenization import train_joint_tokenizer
from hf_graphtf.training import parse_recipe_args, run_translation
from hf_graphtf.training.batching import TokenBatchSampler, token_batches
from hf_graphtf.training.budget import TrainingTimeBudget, _largest, trained_seconds_in
from hf_graphtf.training.schedule import cooldown_factor, with_cooldown


def _lengths(n=500, seed=0):
    rng = random.Random(seed)
    sources = [rng.randint(2, 90) for _ in range(n)]
    return sources, [max(1, s + rng.randint(-5, 5)) for s in sources]


def test_token_batches_cover_every_sentence_once_within_the_token_limit():
    sources, targets = _lengths()
    batches = token_batches(sources, targets, 400)
    assert sorted(i for batch in batches for i in batch) == list(range(len(sources)))
    for batch in batches:
        padded = len(batch) * max(max(sources[i], targets[i]) for i in batch)
        assert padded <= 400 or len(batch) == 1
    assert batches == token_batches(sources, targets, 400)  # deterministic
    spread = [max(sources[i] for i in b) - min(sources[i] for i in b) for b in batches]
    assert sum(spread) / len(spread) < 12  # grouped by length (random batches would spread ~80)


def test_a_sentence_longer_than_the_limit_gets_its_own_batch():
    assert token_batches([3, 50, 3], [3, 60, 3], 40) == [[0, 2], [1]]
    with pytest.raises(ValueError, match="positive"):
        token_batches([1], [1], 0)


def test_sampler_shuffles_batches_per_epoch_reproducibly():
    sources, targets = _lengths()
    sampler = TokenBatchSampler(sources, targets, 400, seed=3)
    first = list(sampler)
    assert sorted(map(sorted, first)) == sorted(map(sorted, sampler.batches))
    sampler.set_epoch(1)
    second = list(sampler)
    assert second != first and sorted(map(sorted, second)) == sorted(map(sorted, first))
    again = TokenBatchSampler(sources, targets, 400, seed=3)
    again.set_epoch(1)
    assert list(again) == second


@pytest.mark.parametrize("world_size", [2, 3])
def test_processes_get_disjoint_equal_shares(world_size):
    sources, targets = _lengths()
    shares = []
    for rank in range(world_size):
        sampler = TokenBatchSampler(sources, targets, 400, world_size=world_size, rank=rank, seed=1)
        sampler.set_epoch(2)
        shares.append([tuple(b) for b in sampler])
        assert len(shares[-1]) == len(sampler) == len(sampler.batches) // world_size
    seen = [b for share in shares for b in share]
    assert len(seen) == len(set(seen))  # disjoint
    assert len(seen) > len(TokenBatchSampler(sources, targets, 400).batches) - world_size  # only a remainder dropped


def _run(tmp_path, name, **overrides):
    corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 64, "valid": 8, "test": 8})
    tokenizer = tmp_path / "tokenizer"
    if not tokenizer.is_dir():  # one tokenizer for every run of a test, so that only training can differ
        lines = [json.loads(line)["translation"] for line in (corpus / "train.jsonl").read_text().splitlines()]
        texts = [pair[side] for pair in lines for side in ("es", "en")]
        train_joint_tokenizer(texts, src_lang="es", tgt_lang="en", vocab_size=300, output_dir=tokenizer)
    recipe = tiny_recipe(
        corpus, tmp_path / name, max_tokens_per_batch=120, dropout=0.0, do_eval=False, do_predict=False,
        eval_strategy="no", save_steps=2, tokenizer_name_or_path=str(tokenizer),
    )  # fmt: skip
    recipe.update(overrides)
    return run_translation(*parse_recipe_args([str(write_recipe(tmp_path / f"{name}.yaml", recipe))]))


def test_recipe_trains_one_epoch_of_token_batches(tmp_path):
    results = _run(tmp_path, "epoch", max_steps=-1, num_train_epochs=1)
    assert results["train"]["global_step"] == results["train"]["batches_per_epoch"] > 4
    assert results["train"]["epoch"] == pytest.approx(1.0)
    assert results["training"]["max_tokens_per_batch"] == 120


def test_resumed_run_sees_the_same_batches_as_an_uninterrupted_one(tmp_path):
    """Interrupted in the second epoch and resumed: the same weights as one run (float32, bit for bit)."""
    straight = _run(tmp_path, "straight", max_steps=-1, num_train_epochs=2)
    per_epoch = straight["train"]["batches_per_epoch"]
    _run(tmp_path, "resumed", max_steps=per_epoch + 2)  # stop inside epoch 2 (checkpoints every 2 steps)
    resumed = _run(tmp_path, "resumed", max_steps=-1, num_train_epochs=2)
    assert resumed["train"]["resumed_from_checkpoint"] is not None
    a = load_file(tmp_path / "straight" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_time_budget_stops_with_a_checkpoint_and_scores_the_test_split(tmp_path):
    results = _run(
        tmp_path, "budget", max_steps=500, max_train_minutes=0.0001, do_eval=True, do_predict=True,
        eval_strategy="steps", eval_steps=200, save_steps=200, load_best_model_at_end=True,
    )  # fmt: skip
    assert results["train"]["stopped_by_time_budget"] and results["train"]["global_step"] < 500
    step = results["train"]["global_step"]
    checkpoint = tmp_path / "budget" / f"checkpoint-{step}"
    assert checkpoint.is_dir()  # saved at the step where the budget ran out, off the save schedule
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert any("eval_bleu" in entry for entry in state["log_history"])  # and evaluated there
    assert trained_seconds_in(str(checkpoint)) >= 0.006
    assert "bleu" in results["test"] and results["train"]["train_minutes"] is not None


def test_time_budget_counts_the_time_of_earlier_runs():
    budget = TrainingTimeBudget(1.0, trained_seconds=60.0)
    budget.on_train_begin(None, None, None)

    class Args:
        save_strategy = eval_strategy = "steps"

    class Control:
        should_training_stop = should_save = should_evaluate = False

    class State:
        global_step = 7

    control = budget.on_step_end(Args(), State(), Control())
    assert control.should_training_stop and budget.stopped_at_step == 7
    with pytest.raises(ValueError, match="positive"):
        TrainingTimeBudget(0)


# --------------------------------------------------------------------------- learning-rate cool-down


def test_cooldown_keeps_the_schedule_then_falls_linearly_to_zero():
    from transformers import get_scheduler

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    plain_optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    plain = get_scheduler("inverse_sqrt", plain_optimizer, 4)
    cooled = with_cooldown(get_scheduler("inverse_sqrt", optimizer, 4), 0.25, lambda step: step / 40)
    for step in range(1, 41):
        optimizer.step()
        plain_optimizer.step()
        cooled.step()
        plain.step()
        expected = plain.get_last_lr()[0] * (1.0 if step <= 30 else (40 - step) / 10)
        assert cooled.get_last_lr()[0] == pytest.approx(expected, rel=1e-12, abs=1e-15), step
    assert cooled.get_last_lr()[0] == 0.0
    assert cooldown_factor(0.5, 0.2) == 1.0 and cooldown_factor(0.9, 0.2) == pytest.approx(0.5)
    assert cooldown_factor(1.3, 0.2) == 0.0  # past the budget (the last step of a time budget)
    assert "_lr_lambdas" not in cooled.state_dict() or not any(cooled.state_dict()["_lr_lambdas"])
    with pytest.raises(ValueError, match="LambdaLR"):
        with_cooldown(torch.optim.lr_scheduler.StepLR(optimizer, 5), 0.2, lambda step: 0.0)


def _logged_learning_rates(output_dir) -> dict[int, float]:
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return {entry["step"]: entry["learning_rate"] for entry in state["log_history"] if "learning_rate" in entry}


def test_recipe_cools_down_to_zero_at_max_steps(tmp_path):
    _run(tmp_path, "plain", max_steps=8)
    cooled = _run(tmp_path, "cooled", max_steps=8, lr_cooldown_fraction=0.5)
    assert cooled["training"]["lr_cooldown_fraction"] == 0.5
    before, after = _logged_learning_rates(tmp_path / "plain"), _logged_learning_rates(tmp_path / "cooled")
    # the Trainer logs the rate its update used: the factors of the step before (the cool-down after 4 of 8)
    for step in range(1, 9):
        assert after[step] == pytest.approx(before[step] * min(1.0, (9 - step) / 4), rel=1e-9, abs=1e-15), step
    assert after[8] == pytest.approx(before[8] / 4) and cooled["train"]["global_step"] == 8


def test_recipe_with_a_time_budget_cools_down_by_minutes_spent(tmp_path):
    """With ``max_train_minutes`` the share of the budget is time, not steps: a 3-second budget ends near
    a learning rate of zero although far fewer than half of the 10,000 steps are done (so the step share
    never reached the cool-down; on any machine, fast or slow: a step takes well over 0.6 ms)."""
    results = _run(tmp_path, "timed", max_steps=10_000, max_train_minutes=0.05, lr_cooldown_fraction=0.5)
    assert results["train"]["stopped_by_time_budget"]
    rates = _logged_learning_rates(tmp_path / "timed")
    last = max(rates)
    assert 4 < last < 5_000 and rates[3] == pytest.approx(0.003)  # the warm-up peak, before the cool-down
    assert rates[last] < 0.5 * 0.003 * (2 / (last - 1)) ** 0.5  # inverse_sqrt alone would give exactly that


def _largest_in_process(rank: int, init_file: str, results):
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    results[rank] = _largest(10.0 + rank * 2.5)
    torch.distributed.destroy_process_group()


def test_every_process_sees_the_largest_spent_time(tmp_path):
    """The budget's seconds (which the stop decision and the cool-down read) agree across processes:
    otherwise the processes would stop at different steps, or update with different learning rates."""
    context = torch.multiprocessing.get_context("spawn")
    results = context.Manager().dict()
    processes = [
        context.Process(target=_largest_in_process, args=(rank, str(tmp_path / "init"), results)) for rank in (0, 1)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(180)  # two spawned interpreters importing torch: slow on a loaded machine
    assert [process.exitcode for process in processes] == [0, 0]
    assert dict(results) == {0: 12.5, 1: 12.5}


def test_repeated_token_share_counts_stuttering_outputs():
    from hf_graphtf.scoring import has_repeated_token, translation_report

    assert has_repeated_token("God has been been been been.")
    assert not has_repeated_token("God has been been been.")
    assert not has_repeated_token("a b a b a b a b")
    report = translation_report(["x", "y"], ["it it it it", "it is"], [["it"], ["it is"]], [5])
    assert report["repeated_token_outputs"] == 0.5
