"""Scale-out: FSDP2 sharding with the wrap policy and activation checkpointing that accelerate applies.

accelerate 1.15 selects FSDP only for accelerator-backed runs (`accelerate/state.py`: a CPU run
becomes MULTI_CPU and the FSDP settings are dropped), so `recipes/accelerate/fsdp.yaml` cannot be
launched on this CPU machine; the training script refuses such a launch instead of training
without FSDP. What the config asks of the model runs here with torch itself, on two gloo
processes: accelerate's transformer-based wrap policy resolves the layer classes, every layer is
checkpoint-wrapped and then sharded with `fully_shard`, and the gradients must equal those of the
plain model on one process.
"""

from __future__ import annotations

import gc
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import yaml
from model_matrix import OPTION_MATRIX, tiny_model
from recipe_fixtures import REPO_ROOT, TRAIN_SCRIPT, subprocess_env, tiny_recipe, write_recipe, write_tiny_corpus
from test_models_training import copy_task_batch

from hf_graphtf.self_check.matrix import options_for

ACCELERATE_CONFIGS = REPO_ROOT / "recipes" / "accelerate"


def _gradients(model) -> dict[str, torch.Tensor]:
    grads = {}
    for name, param in model.named_parameters():
        if param.grad is not None:
            grad = param.grad.full_tensor() if hasattr(param.grad, "full_tensor") else param.grad
            grads[name.replace("_checkpoint_wrapped_module.", "")] = grad.detach().clone()
    return grads


def _fsdp_worker(rank: int, world_size: int, store_file: str, family: str, options: str, result_file: str) -> None:
    """One rank of the FSDP2 run; rank 0 writes the loss, the wrapped-layer count and the full gradients.

    The way out is ordered because a run now and then died after its work with "terminate called
    without an active exception" (gloo, torch 2.13; once in CI, twice in 81 repeats here): a file
    store instead of a TCP store (no store thread, no port to race for), a barrier after the last
    collective (no rank closes its connections while the other still uses them), and the sharded
    model, whose device mesh holds the group, dropped before the group is destroyed rather than
    during interpreter finalization.
    """
    from accelerate.utils import FullyShardedDataParallelPlugin
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=world_size)
    try:
        model = tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa").train()
        plugin = FullyShardedDataParallelPlugin(
            fsdp_version=2, auto_wrap_policy="transformer_based_wrap", activation_checkpointing=True
        )
        plugin.set_auto_wrap_policy(model)  # raises if a `_no_split_modules` name is not in the model
        layer_classes = tuple(plugin.auto_wrap_policy.keywords["transformer_layer_cls"])
        apply_activation_checkpointing(
            model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda m: isinstance(m, layer_classes)
        )
        wrapped = [m for m in model.modules() if isinstance(m, layer_classes)]
        for layer in wrapped:
            fully_shard(layer)
        fully_shard(model)
        batch = copy_task_batch()  # every rank the same batch: the averaged gradient is the one-process one
        loss = model(**batch).loss
        loss.backward()
        gradients = _gradients(model)  # gathering the shards is a collective: every rank takes part
        if rank == 0:
            torch.save((loss.item(), len(wrapped), gradients), result_file)
        dist.barrier()
        del model, wrapped, layer, loss, gradients
        gc.collect()
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("options", ["al-both-cum", "graph-gate+al-dec-cum", "graph-half-shared-self_gate"])
def test_fsdp_sharding_with_activation_checkpointing_keeps_gradients(family, options, tmp_path):
    reference = tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa").train()
    expected_loss = reference(**copy_task_batch()).loss
    expected_loss.backward()
    expected = _gradients(reference)

    result_file = str(tmp_path / "rank0.pt")
    mp.start_processes(
        _fsdp_worker,
        args=(2, str(tmp_path / "store"), family, options, result_file),
        nprocs=2,
        join=True,
        start_method="spawn",
    )
    loss, wrapped, got = torch.load(result_file)
    assert wrapped == reference.config.encoder_layers + reference.config.decoder_layers
    assert loss == pytest.approx(expected_loss.item(), rel=1e-12)
    assert got.keys() == expected.keys()
    total = torch.sqrt(sum(g.norm() ** 2 for g in expected.values()))
    for name, grad in expected.items():
        error = (got[name] - grad).norm() / torch.maximum(grad.norm(), 1e-6 * total)
        assert error < 1e-8, f"{name}: relative L2 error {error:.3g}"


@pytest.mark.parametrize("name", ["ddp.yaml", "fsdp.yaml", "deepspeed_zero2.yaml", "deepspeed_zero3.yaml"])
def test_accelerate_configs_parse(name):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(ACCELERATE_CONFIGS / name))
    raw = yaml.safe_load((ACCELERATE_CONFIGS / name).read_text())
    assert str(config.distributed_type).endswith(raw["distributed_type"])
    if name == "fsdp.yaml":
        assert config.fsdp_config["fsdp_activation_checkpointing"] is True
        assert config.fsdp_config["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"


def test_fsdp_wrap_policy_resolves_for_every_variant(family):
    from accelerate.utils import FullyShardedDataParallelPlugin

    for options in options_for(family).values():
        model = tiny_model(family, options)
        plugin = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy="transformer_based_wrap")
        plugin.set_auto_wrap_policy(model)
        classes = plugin.auto_wrap_policy.keywords["transformer_layer_cls"]
        assert {type(layer) for layer in model.model.encoder.layers} | {
            type(layer) for layer in model.model.decoder.layers
        } == classes


def test_fsdp_launch_that_accelerate_would_drop_is_refused(tmp_path):
    """On CPU accelerate turns an FSDP launch into plain data parallel; the script says so and stops."""
    corpus = write_tiny_corpus(tmp_path / "corpus")
    recipe = write_recipe(tmp_path / "recipe.yaml", tiny_recipe(corpus, tmp_path / "out", max_steps=2))
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    command = [accelerate, "launch", "--config_file", str(ACCELERATE_CONFIGS / "fsdp.yaml"), "--num_processes", "2"]
    result = subprocess.run(
        [*command, str(TRAIN_SCRIPT), str(recipe)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        cwd=REPO_ROOT,
        timeout=600,
    )
    assert result.returncode != 0
    assert "launched with a FSDP config, but this run is MULTI_CPU" in result.stdout + result.stderr
    assert not (tmp_path / "out" / "results.json").exists()
