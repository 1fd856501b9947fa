"""Activation checkpointing and engine wrapping: every wrapper recomputes exactly, engines find the layers.

Each layer's inputs from the previous layer (link carry, graph P) are arguments of the layer call that
a wrapper re-runs, so wrapping any layer changes no gradient. Vanilla would pass these checks with a
hidden-state carry too; the linked and graph variants are the ones that can fail them.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
from accelerate.utils.dataclasses import get_module_class_from_name
from model_matrix import FAMILIES, OPTION_MATRIX, tiny_config, tiny_model
from test_models_training import copy_task_batch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from transformers.modeling_layers import GradientCheckpointingLayer

from hf_graphtf.transformers_seam import enable_activation_checkpointing

options_params = pytest.mark.parametrize("options", list(OPTION_MATRIX), ids=list(OPTION_MATRIX))


def _gradients(model, batch) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(**batch).loss.backward()
    return {
        n.replace("_checkpoint_wrapped_module.", ""): p.grad.clone()
        for n, p in model.named_parameters()
        if p.grad is not None
    }


def _assert_same_gradients(got: dict, expected: dict) -> None:
    """Relative L2 error per parameter below 1e-8 (float64).

    Key-projection biases get an exactly-zero gradient in theory (softmax ignores a shift shared by
    all keys), so theirs is float noise; an error is measured against 1e-6 of the whole gradient's
    norm when a parameter's own gradient is smaller than that.
    """
    assert got.keys() == expected.keys()
    total = torch.sqrt(sum(g.norm() ** 2 for g in expected.values()))
    for name, grad in expected.items():
        error = (got[name] - grad).norm() / torch.maximum(grad.norm(), 1e-6 * total)
        assert error < 1e-8, f"{name}: relative L2 error {error:.3g}"


def _layer_classes(model) -> tuple[type, ...]:
    return tuple({type(m) for m in model.modules() if isinstance(m, GradientCheckpointingLayer)})


@options_params
@pytest.mark.parametrize(
    "impl", [CheckpointImpl.NO_REENTRANT, CheckpointImpl.REENTRANT], ids=["non-reentrant", "reentrant"]
)
def test_checkpoint_wrapper_on_every_layer_keeps_gradients(family, options, impl):
    """What accelerate applies for FSDP activation checkpointing: torch's wrapper around each layer."""
    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa").train()  # dropout 0
    batch = copy_task_batch()
    expected = _gradients(model, batch)
    classes = _layer_classes(model)
    apply_activation_checkpointing(
        model,
        checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=impl),
        check_fn=lambda module: isinstance(module, classes),
    )
    assert sum("_checkpoint_wrapped_module" in n for n, _ in model.named_modules()) > 0
    _assert_same_gradients(_gradients(model, batch), expected)


@options_params
@pytest.mark.parametrize("use_reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_transformers_checkpointing_keeps_gradients(family, options, use_reentrant):
    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa").train()
    batch = copy_task_batch()
    expected = _gradients(model, batch)
    enable_activation_checkpointing(model, {"use_reentrant": use_reentrant})
    _assert_same_gradients(_gradients(model, batch), expected)


@options_params
def test_no_split_modules_name_the_layers_built(family, options):
    """accelerate's transformer-based wrap policy looks each name up in the model, and must find it."""
    model = tiny_model(family, OPTION_MATRIX[options])
    built = {type(m).__name__ for m in model.modules() if isinstance(m, GradientCheckpointingLayer)}
    assert set(model._no_split_modules) == built
    for name in model._no_split_modules:
        assert get_module_class_from_name(model, name) is not None, name


@pytest.mark.parametrize("options", ["vanilla", "al-both", "graph-gate+al-dec-cum"])
def test_config_gradient_checkpointing_turns_it_on_for_every_layer(family, options):
    config = tiny_config(family, OPTION_MATRIX[options])
    config.gradient_checkpointing = True
    model_class = FAMILIES[family][1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # through the installed version's current name
        model = model_class(config)
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    renamed = hasattr(type(model), "is_activation_checkpointing")  # later 5.x; the old name warns there
    assert model.is_activation_checkpointing if renamed else model.is_gradient_checkpointing
    assert all(layer.gradient_checkpointing for layer in layers)
    assert not hasattr(model.config, "gradient_checkpointing")  # consumed, not saved


def test_graph_layer_alone_names_what_it_needs(graph_family):
    model = tiny_model(graph_family, OPTION_MATRIX["graph-gate"])
    layer = model.get_encoder().layers[1]
    with pytest.raises(ValueError, match="needs the previous representation P"):
        layer(torch.zeros(1, 3, 16, dtype=torch.float64), None)


def test_zero3_partitioned_weights_take_the_per_module_graph_path(graph_family):
    """DeepSpeed ZeRO-3 gathers a parameter only when its own module runs: the fused path must not read it."""
    model = tiny_model(graph_family, OPTION_MATRIX["graph-shared-gate"])
    layer = model.get_encoder().layers[1]
    assert layer._can_fuse({})
    layer.self_attn.q_proj.weight.ds_id = 0  # what ZeRO-3 sets on the parameters it partitions
    assert not layer._can_fuse({})


def test_the_graph_path_is_chosen_per_device_from_its_measurement(graph_family):
    """On a CPU, shared q/k/v layers take the fused path (measured faster) and separate modules one call per
    module (measured no faster, more memory); a GPU takes the fused path, which dispatches fewer ops."""
    from hf_graphtf.graph_attention import fused_path_pays

    assert fused_path_pays("cpu", True) and not fused_path_pays("cpu", False)
    assert fused_path_pays("cuda", True) and fused_path_pays("cuda", False)
    separate = tiny_model(graph_family, OPTION_MATRIX["graph-gate"]).get_encoder().layers[1]
    assert separate._fusable({}) and not separate._can_fuse({})
