"""Dispatched ops per step and saved activations, against vanilla: a regression guard for launch-bound GPUs.

Where a GPU waits on kernel launches, a variant's speed ratio follows the ops a step dispatches
(recipes/benchmarks/op_count.py; RESULTS.md, "Op counts"). The counts are the same on a CPU, so these tests
hold them where CI can: at today's figures (a change that adds ops fails), and, marked as expected to fail
until they are met, at the targets the GPU work aims for.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"


def _op_count():
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import `common` as a top-level module
    try:
        spec = importlib.util.spec_from_file_location("_benchmarks_op_count", BENCHMARKS / "op_count.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


op_count = _op_count()


@pytest.fixture(scope="module")
def counts() -> dict:
    """The counts of vanilla and of the variants the targets name, made once for the module."""
    return {variant: op_count.variant_counts(variant) for variant in ("vanilla", "al-prev-both", "graph-half+gate")}


@pytest.fixture(scope="module")
def ratios(counts) -> dict[str, dict[str, float]]:
    """Each variant's counts over vanilla's: training ops, greedy decode-step ops, saved activation bytes."""
    base = counts["vanilla"]
    return {
        variant: {
            "training": counts[variant].training_ops / base.training_ops,
            "decode": counts[variant].decode_ops / base.decode_ops,
            "saved": counts[variant].saved_bytes / base.saved_bytes,
        }
        for variant in ("al-prev-both", "graph-half+gate")
    }


#: (variant, measure) -> the ratio to vanilla measured when the guard was set (torch 2.13, transformers 5.23),
#: with 0.02 of room for other releases' op choices
TODAY = {
    ("al-prev-both", "training"): 1.14,
    ("al-prev-both", "decode"): 1.06,
    ("al-prev-both", "saved"): 1.00,
    ("graph-half+gate", "training"): 1.21,
    ("graph-half+gate", "decode"): 1.00,
}
#: the targets of the GPU work not met yet (the link on its concat kernel); met ones are held in TODAY and below
TARGETS = {
    ("al-prev-both", "training"): 1.08,
}


@pytest.mark.parametrize(("variant", "measure"), sorted(TODAY))
def test_a_step_dispatches_no_more_ops_than_today(ratios, variant, measure):
    assert ratios[variant][measure] <= TODAY[variant, measure] + 0.02, ratios[variant]


@pytest.mark.parametrize(("variant", "measure"), sorted(TARGETS))
@pytest.mark.xfail(
    strict=True,
    reason="below the concat kernel's floor (a join of the queries and one of the keys per linked call and the "
    "sums of their two gradients: 1.09x here), and keeping the joins as halves (vanilla's memory) joins them "
    "again in backward: RESULTS.md, 'Op counts'",
)
def test_a_step_meets_the_gpu_target(ratios, variant, measure):
    assert ratios[variant][measure] <= TARGETS[variant, measure], ratios[variant]


def test_the_met_targets_hold(ratios):
    """The concat kernel's greedy decode step at most 1.10x vanilla's ops, and a linked training step saves at
    most 1.05x vanilla's activations (its joins kept as halves, `hf_graphtf.saved_joins`); a graph half-dim +
    gate training step, on the fused group path a GPU takes, at most 1.25x the ops."""
    assert ratios["al-prev-both"]["decode"] <= 1.10
    assert ratios["al-prev-both"]["saved"] <= 1.05
    assert ratios["graph-half+gate"]["training"] <= 1.25


def test_the_links_extra_training_ops_are_its_joins_their_gradient_sums_and_the_last_slices(counts):
    """What a linked training step adds to vanilla's, by op (RESULTS.md, "Op counts"): per linked call a join of
    the queries and one of the keys forward and again backward (the halves, `hf_graphtf.saved_joins`), and the
    sums of the two gradients of the queries and keys that feed two layers; and a copy of each gradient slice
    of a stack's last queries and keys. The floor the page states, 1.09x, is the forward joins and the sums."""
    shape = op_count.COUNT_SHAPE
    linked_calls = (shape.encoder_layers - 1) + 2 * (shape.decoder_layers - 1)  # self-attention, and cross
    base = counts["vanilla"]
    extra = counts["al-prev-both"].training_by_op.copy()
    extra.subtract(base.training_by_op)
    assert {name: count for name, count in extra.items() if count} == {
        "aten.cat": 4 * linked_calls,
        "aten.add": 2 * linked_calls,
        "aten.clone": 2 * 3,  # queries and keys of the three attention stacks
    }
    floor = base.training_ops + 2 * linked_calls + 2 * linked_calls
    assert round(floor / base.training_ops, 2) == 1.09


def test_sdpa_counts_as_one_op_each_way_with_its_own_gradients():
    """The counter's SDPA: one op forward and one backward whatever kernel runs inside, and the gradients
    plain SDPA gives (its backward recomputes the forward quietly)."""
    generator = torch.Generator().manual_seed(0)
    query, key = (torch.randn(2, 4, 5, 16, generator=generator, dtype=torch.float64) for _ in range(2))
    value = torch.randn(2, 4, 5, 8, generator=generator, dtype=torch.float64)  # narrower values: CPU math path
    inputs = [tensor.requires_grad_() for tensor in (query, key, value)]
    expected = torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(*inputs).sum(), inputs)

    def step():
        step.grads = torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(*inputs).sum(), inputs)

    ops = op_count.count_ops(step)
    assert ops["sdpa"] == 1 and ops["sdpa_backward"] == 1
    assert "aten.bmm" not in ops and "aten._softmax" not in ops
    for got, want in zip(step.grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_saved_bytes_count_what_the_forward_leaves_alive_not_the_weights():
    """A linear layer on a ReLU's output keeps that output (the ReLU and the linear layer both save it) and its
    weight; only the ReLU's output is an activation the forward made (the weight and the input live anyway),
    and the linear layer's output, which nothing saves, is gone once the loss is taken."""
    linear = torch.nn.Linear(16, 32)
    inputs = torch.randn(8, 16, requires_grad=True)
    saved = op_count.saved_bytes(lambda: linear(torch.relu(inputs)).sum(), linear.parameters())
    assert saved == inputs.untyped_storage().nbytes()


def test_saved_bytes_count_a_join_kept_as_halves_as_its_halves():
    """The link's joins kept as their halves (`hf_graphtf.saved_joins`) count as the halves, which outlive
    the call, and not as the join, which does not."""
    from hf_graphtf.attention_link import joined_heads
    from hf_graphtf.saved_joins import joins_saved_as_halves

    inputs = torch.randn(2, 3, 4, 5, requires_grad=True)

    def forward():
        current, carried = inputs * 2, inputs * 3
        joined, _ = joined_heads(current, carried)
        with joins_saved_as_halves([(joined, lambda: joined_heads(current, carried)[0])]):
            return (joined * joined).sum()

    assert op_count.saved_bytes(forward, []) == 2 * inputs.untyped_storage().nbytes()
