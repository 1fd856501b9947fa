"""The link's joins kept for backward as their halves (`hf_graphtf.saved_joins`): the same gradients, joined again.

The CPU's SDPA serves the concat kernel's wider queries and keys with its math kernel, which saves products
of its own rather than its inputs, so nothing here would be a join to keep as halves. These tests run SDPA
the way a GPU's fused kernels save it: `_InputSavingSdpa` saves its inputs and takes its gradients in
backward by running the forward again.
"""

from __future__ import annotations

import functools
from unittest import mock

import pytest
import torch
from model_matrix import OPTION_MATRIX, tiny_model
from test_models_training import copy_task_batch

from hf_graphtf import attention_link, saved_joins
from hf_graphtf.attention_link import CarriedQueryKey, joined_heads, linked_concat_attention
from hf_graphtf.link_modes import PREVIOUS
from hf_graphtf.transformers_seam import enable_activation_checkpointing

_SDPA = torch.nn.functional.scaled_dot_product_attention


class _InputSavingSdpa(torch.autograd.Function):
    @staticmethod
    def forward(ctx, kwargs: dict, query, key, value):
        ctx.kwargs = kwargs
        ctx.save_for_backward(query, key, value)
        return _SDPA(query, key, value, **kwargs)

    @staticmethod
    def backward(ctx, grad_output):
        inputs = [tensor.detach().requires_grad_() for tensor in ctx.saved_tensors]
        with torch.enable_grad():
            output = _SDPA(*inputs, **ctx.kwargs)
        return None, *torch.autograd.grad(output, inputs, grad_output)


def _input_saving_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    kwargs = dict(attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kwargs)
    return _InputSavingSdpa.apply(kwargs, query, key, value)


@pytest.fixture
def fused_like_sdpa():
    with mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", _input_saving_sdpa):
        yield


@pytest.fixture
def rejoins():
    """Counts the joins made again in backward."""
    made = []
    original = attention_link._join_again

    def counted(*halves):
        made.append(1)
        return original(*halves)

    with mock.patch.object(attention_link, "_join_again", counted):
        yield made


def _gradients(model, batch) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(**batch).loss.backward()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}


def _joins_made(model, batch) -> int:
    """How many joins a forward pass makes (each linked call joins its queries and its keys)."""
    calls = []
    with mock.patch.object(attention_link, "joined_heads", functools.partial(_spy, calls)):
        model(**batch)
    return len(calls)


def _spy(calls, *args):
    calls.append(1)
    return joined_heads(*args)


def _linked(family, options: str):
    """A tiny linked model in training mode on the concat kernel, every layer kept (no layer drop)."""
    layers_kept = dict(encoder_layerdrop=0.0, decoder_layerdrop=0.0)
    return tiny_model(
        family, OPTION_MATRIX[options], attn_implementation="sdpa", attention_link_kernel="concat", **layers_kept
    ).train()


@pytest.mark.parametrize("options", ["al-both", "al-both-gate"])
def test_halves_give_the_gradients_the_joins_give(family, options, fused_like_sdpa, rejoins):
    """Every join is kept as its halves and made again in backward, and every gradient is bit for bit the one
    the saved joins give (float64)."""
    model = _linked(family, options)
    batch = copy_task_batch()
    with mock.patch.object(attention_link, "saves_halves", lambda *tensors: False):
        expected = _gradients(model, batch)
    assert not rejoins
    got = _gradients(model, batch)
    assert len(rejoins) == _joins_made(model, batch) > 0
    assert got.keys() == expected.keys()
    for name, grad in expected.items():
        assert torch.equal(got[name], grad), name


def test_cumulative_mode_saves_its_joins(fused_like_sdpa, rejoins):
    """In cumulative mode the join is the carry the next layer joins again, alive anyway: nothing to gain."""
    model = _linked("marian", "al-both-cum")
    model(**copy_task_batch()).loss.backward()
    assert not rejoins


@pytest.mark.parametrize("use_reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_checkpointing_keeps_the_gradients(use_reentrant, fused_like_sdpa, rejoins):
    """Non-reentrant checkpointing saves through hooks of its own, so the joins step aside (no rejoin);
    reentrant checkpointing recomputes without hooks, and its recomputation keeps halves. Both give the
    gradients of a plain step."""
    model = _linked("marian", "al-both")
    batch = copy_task_batch()
    expected = _gradients(model, batch)
    rejoins.clear()
    enable_activation_checkpointing(model, {"use_reentrant": use_reentrant})
    got = _gradients(model, batch)
    assert bool(rejoins) == use_reentrant
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-10, atol=1e-12, msg=name)


def test_a_linked_call_passes_gradcheck(fused_like_sdpa, rejoins):
    """Two layers' queries and keys through one linked call, halves saved: analytical gradients (with the
    joins made again) against numerical ones, float64."""
    generator = torch.Generator().manual_seed(0)
    shape = (2, 2, 3, 4)  # batch, heads, length, head dim

    def tensor(width: int = 4) -> torch.Tensor:
        return torch.randn(*shape[:3], width, generator=generator, dtype=torch.float64, requires_grad=True)

    inputs = (tensor(), tensor(), tensor(), tensor(), tensor(3))
    module = torch.nn.Module()
    module.is_causal = False

    def linked(query, key, carried_query, carried_key, value):
        carry = CarriedQueryKey(carried_query, carried_key)
        output, _, _ = linked_concat_attention(
            module, query, key, value, None, carry, mode=PREVIOUS, scaling=0.5, dropout=0.0
        )
        return output

    assert torch.autograd.gradcheck(linked, inputs)
    assert rejoins


def test_a_saved_view_of_a_join_comes_back_with_its_geometry(rejoins):
    """A kernel may save a view of a join (a transposed one, a slice): it comes back as that view."""
    current, carried = (torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True) for _ in range(2))
    weight = torch.randn(2, 3, 10, 3, dtype=torch.float64, requires_grad=True)
    joined, _ = joined_heads(current, carried)
    with saved_joins.joins_saved_as_halves([(joined, functools.partial(attention_link._join_again, current, carried))]):
        product = (joined.transpose(2, 3)[..., 1:] * weight).sum()  # mul saves the view for the weight's gradient
    (got,) = torch.autograd.grad(product, weight)
    assert rejoins
    torch.testing.assert_close(got, joined.transpose(2, 3)[..., 1:].detach(), rtol=0, atol=0)


def test_other_saved_tensor_hooks_keep_the_joins():
    """Under another pair of saved-tensor hooks (offloading, checkpointing) the joins step aside."""
    wants = torch.ones(2, requires_grad=True)
    assert saved_joins.saves_halves(wants)
    with torch.autograd.graph.saved_tensors_hooks(lambda tensor: tensor, lambda tensor: tensor):
        assert not saved_joins.saves_halves(wants)
    with torch.no_grad():
        assert not saved_joins.saves_halves(wants)
    assert not saved_joins.saves_halves(torch.ones(2))


def test_a_torch_without_the_hooks_record_keeps_the_joins(monkeypatch):
    """Where torch's record of active hooks is missing or reads differently, the joins are kept: memory as
    before, never a halves-saving that shadows hooks it cannot see."""
    monkeypatch.delattr(torch._C._autograd, "_top_saved_tensors_default_hooks")
    assert saved_joins.other_hooks_active()
    monkeypatch.undo()

    def changed(*args):
        raise TypeError("takes no arguments")

    monkeypatch.setattr(torch._C._autograd, "_top_saved_tensors_default_hooks", changed)
    assert saved_joins.other_hooks_active()
    assert not saved_joins.saves_halves(torch.ones(2, requires_grad=True))
