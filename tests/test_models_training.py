"""Training: the variants learn a toy copy task, and gradient checkpointing changes no gradient."""

from __future__ import annotations

import pytest
import torch
from model_matrix import EOS, OPTION_MATRIX, PAD, VOCAB, tiny_model

from hf_graphtf.transformers_seam import enable_activation_checkpointing

TRAIN_MATRIX = ["vanilla", "al-both", "al-both-cum", "graph-sum", "graph-self_gate", "graph-half-shared-self_gate"]


def copy_task_batch(seed: int = 0, batch: int = 8, length: int = 6) -> dict[str, torch.Tensor]:
    """Sources of random tokens; the target is the source itself (then EOS)."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, VOCAB, (batch, length), generator=generator)
    input_ids = torch.cat([tokens, torch.full((batch, 1), EOS)], dim=1)
    input_ids[0, 3:] = PAD  # one padded row
    input_ids[0, 3] = EOS
    labels = input_ids.masked_fill(input_ids == PAD, -100)
    return dict(input_ids=input_ids, attention_mask=(input_ids != PAD).long(), labels=labels)


@pytest.mark.parametrize("options", TRAIN_MATRIX)
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "grad-ckpt"])
def test_a_few_steps_reduce_the_loss(family, options, checkpointing):
    model = tiny_model(family, OPTION_MATRIX[options], dtype=torch.float32, attn_implementation="sdpa")
    model.config.dropout = 0.1
    if checkpointing:
        enable_activation_checkpointing(model)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batch = copy_task_batch()
    losses = []
    for _ in range(12):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def _gradients(model, batch) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(**batch).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("options", ["al-both", "al-both-cum", "graph-gate+al-dec-cum", "graph-self_gate"])
@pytest.mark.parametrize("use_reentrant", [False, True])
@pytest.mark.parametrize("kernel", ["auto", "concat"])
def test_gradient_checkpointing_gives_the_same_gradients(family, options, use_reentrant, kernel):
    """The carried scores and P enter each checkpointed layer as inputs, so recomputation is exact."""
    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa", attention_link_kernel=kernel)
    model.train()  # dropout is 0 in the tiny config, so train mode is deterministic
    batch = copy_task_batch()
    expected = _gradients(model, batch)
    enable_activation_checkpointing(model, {"use_reentrant": use_reentrant})
    got = _gradients(model, batch)
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-9, atol=1e-12, msg=name)
    # the link really reaches earlier layers: layer 0's attention gets gradient through layer 1's scores
    assert any("layers.0.self_attn.q_proj" in name and got[name].abs().sum() > 0 for name in got)
