"""LoRA (PEFT) in the training recipe: which weights train, what each checkpoint holds, what the run leaves.

With ``lora_r`` set, the pretrained model gets LoRA adapters on ``lora_target_modules`` and every other
weight is frozen, except what the options add to a vanilla checkpoint: graph attention's modules train
whole (PEFT's ``modules_to_save``) and so does the learned link gate. The gate is a parameter of the
attention, not a module, so PEFT neither trains nor saves it; this module does both, with the gates of
each checkpoint in their own file beside the adapter, so that a resumed run and the best-checkpoint
reload get the gates trained with the adapter they load. The run ends with the adapter merged into the
model it saves (`merged_model`), which loads like any other.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import PreTrainedModel
from transformers.utils import ADAPTER_CONFIG_NAME

from ..errors import UserError
from .arguments import ModelArguments

#: the trained parameters PEFT does not save with an adapter (the learned link gates), beside the adapter
EXTRA_PARAMETERS_FILE = "trained_gates.safetensors"
#: parameters that train under LoRA although PEFT does not know them: the learned link gate, a parameter
_EXTRA_PARAMETER_SUFFIX = ".link_gate"


def is_adapter_model(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a PEFT model (by what it has, so PEFT need not be installed to ask)."""
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def add_lora(model: PreTrainedModel, model_args: ModelArguments) -> torch.nn.Module:
    """``model`` with LoRA adapters as the recipe sets them, and what the options add set to train whole."""
    from peft import LoraConfig, get_peft_model

    options = model_args.lora_options()
    config = LoraConfig(
        r=options["r"],
        lora_alpha=options["lora_alpha"],
        lora_dropout=options["lora_dropout"],
        target_modules=options["target_modules"],
        modules_to_save=model.added_module_names() or None,
        task_type="SEQ_2_SEQ_LM",
    )
    try:
        with warnings.catch_warnings():
            # PEFT 0.21 asks Transformers >= 5.23 a deprecated question; nothing a user can act on
            warnings.filterwarnings(
                "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
            )
            adapted = get_peft_model(model, config)
    except ValueError as error:  # no layer of that name: PEFT's message lists none of the model's
        raise LoraTargetError(
            f"lora_target_modules {options['target_modules']} do not name layers of this model ({error}). Its "
            f"linear layers: {', '.join(sorted(_linear_names(model)))}."
        ) from None
    for parameter in extra_parameters(adapted).values():
        parameter.requires_grad_(True)
    return adapted


class LoraTargetError(UserError, ValueError):
    """``lora_target_modules`` names no layer of the model."""


class AdapterCheckpointError(UserError, ValueError):
    """An adapter checkpoint lacks the learned link gates trained with it, or holds other ones."""


def _linear_names(model: torch.nn.Module) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}


def extra_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """The learned link gates of ``model``, by their names in the base model (PEFT's prefix dropped)."""
    base = model.get_base_model() if is_adapter_model(model) else model
    return {name: p for name, p in base.named_parameters() if name.endswith(_EXTRA_PARAMETER_SUFFIX)}


def save_extra_parameters(model: torch.nn.Module, folder: str | os.PathLike[str]) -> None:
    """Write the gates beside an adapter in ``folder`` (nothing when the model has none)."""
    gates = extra_parameters(model)
    if gates:
        tensors = {name: p.detach().cpu().contiguous() for name, p in gates.items()}
        save_file(tensors, Path(folder) / EXTRA_PARAMETERS_FILE)


def load_extra_parameters(model: torch.nn.Module, folder: str | os.PathLike[str]) -> None:
    """Copy the gates saved in ``folder`` into ``model``; a model with gates and a folder without them is refused,
    since training on would restart the gates at zero under an adapter trained with them."""
    gates = extra_parameters(model)
    if not gates:
        return
    path = Path(folder) / EXTRA_PARAMETERS_FILE
    if not path.is_file():
        raise AdapterCheckpointError(
            f"{folder} holds an adapter but not the learned link gates trained with it ({path.name})."
        )
    saved = load_file(path)
    if set(saved) != set(gates):
        differing = sorted(set(saved) ^ set(gates))
        raise AdapterCheckpointError(f"{path}: these gates are not this model's or missing there: {differing[:4]}.")
    with torch.no_grad():
        for name, parameter in gates.items():
            parameter.copy_(saved[name].to(parameter.device, parameter.dtype))


def saved_lora_options(checkpoint: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The LoRA fields a checkpoint was trained with (as `ModelArguments.lora_options`), None for a whole model."""
    path = Path(checkpoint) / ADAPTER_CONFIG_NAME
    if not path.is_file():
        return None
    saved = json.loads(path.read_text(encoding="utf-8"))
    targets = saved.get("target_modules")
    return {
        "r": saved.get("r"),
        "lora_alpha": saved.get("lora_alpha"),
        "lora_dropout": saved.get("lora_dropout"),
        "target_modules": sorted(targets) if isinstance(targets, list) else targets,
    }


def load_adapter_checkpoint(model: torch.nn.Module, checkpoint: str | os.PathLike[str]) -> None:
    """Load a checkpoint's adapter and gates into the PEFT model the recipe built (a finished run evaluated again
    from a checkpoint, when it left no merged model)."""
    model.load_adapter(os.fspath(checkpoint), model.active_adapter, is_trainable=False)
    load_extra_parameters(model, checkpoint)


def merged_model(model: torch.nn.Module) -> PreTrainedModel:
    """The model with the adapter merged into its weights: what the run evaluates and leaves in its output_dir.

    Not the adapter alone: it was trained on a model with the options on, and PEFT's config names the vanilla
    checkpoint as its base, which `AutoPeftModel` would load without them, silently. The adapter and the gates
    of each step stay in the checkpoints, for resuming.
    """
    return model.merge_and_unload()


def check_adapter_engine(model: torch.nn.Module, distributed_type: str) -> None:
    """Refuse LoRA with learned gates under FSDP or DeepSpeed: the gates are saved and loaded here from the
    parameters as one process holds them, which those engines shard (untested: refused, not left to chance)."""
    if distributed_type in ("FSDP", "DEEPSPEED") and is_adapter_model(model) and extra_parameters(model):
        raise AdapterCheckpointError(
            f"LoRA with attention_link_gate: learned is not supported under {distributed_type}, which shards the "
            "gates this package saves beside each adapter. Train it with DDP or one process (recipes/accelerate/"
            "ddp.yaml), or without the learned gate."
        )


def trainable_count(model: torch.nn.Module) -> int:
    """How many parameters train: under LoRA the adapters, the modules the options add and the gates."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = [
    "AdapterCheckpointError",
    "EXTRA_PARAMETERS_FILE",
    "LoraTargetError",
    "add_lora",
    "check_adapter_engine",
    "extra_parameters",
    "merged_model",
    "is_adapter_model",
    "load_adapter_checkpoint",
    "load_extra_parameters",
    "save_extra_parameters",
    "saved_lora_options",
    "trainable_count",
]
