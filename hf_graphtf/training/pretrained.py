"""Start from a saved Marian, BART or M2M100/NLLB model (an opus-mt checkpoint, a BART, an NLLB-200, or
one of ours) with the options on.

A vanilla checkpoint is loaded into the graph model class of its family with the recipe's link and
graph options: every pretrained weight lands where the vanilla model had it (attention link adds no
parameters; graph layers keep ``self_attn`` as their high-order group), and only the modules the
options add (middle/low-order groups, gates) start from the family's own initialisation. A
checkpoint trained with this package keeps its options: a recipe that asks for different ones is
refused, naming the fields, because training on would silently change the architecture.
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import logging

from ..configuration import GRAPH_OPTION_DEFAULTS
from ..families import FAMILY_OF_MODEL_TYPE
from ..model_files import check_model_source, named_source

logger = logging.get_logger(__name__)


def checkpoint_family(model_type: str | None, source: str) -> tuple[str, type[PretrainedConfig], type[PreTrainedModel]]:
    """The family of a checkpoint's ``model_type`` (name, config class, translation model class); any
    other type is refused with the supported ones."""
    if model_type not in FAMILY_OF_MODEL_TYPE:
        raise ValueError(
            f"{source}: model type {model_type!r} cannot be fine-tuned with the graph/link options; "
            f"supported: {', '.join(sorted(FAMILY_OF_MODEL_TYPE))} (Marian/opus-mt and BART checkpoints)."
        )
    family = FAMILY_OF_MODEL_TYPE[model_type]
    return family.name, family.config_class, family.seq2seq_class


def resolve_options(
    saved_model_type: str, saved_config: dict[str, Any], requested: dict[str, Any], source: str
) -> dict[str, Any]:
    """The options the loaded model gets.

    A vanilla checkpoint takes the requested options, and so does one of this package saved with every
    option off (it is a vanilla model under our model type). A checkpoint with options on keeps its own;
    a recipe left at the defaults inherits them, any other request must match them exactly.
    """
    saved = {name: saved_config.get(name, default) for name, default in GRAPH_OPTION_DEFAULTS.items()}
    if not saved_model_type.startswith("graph_") or saved == GRAPH_OPTION_DEFAULTS:
        if requested["graph_attention"] and requested["graph_half_dim"]:
            raise ValueError(
                f"{source}: graph_half_dim replaces the pretrained self-attention with d_model/2 projections, so "
                "the pretrained attention weights cannot be used. Fine-tune with graph_half_dim: false, or train "
                "a half-dim model from scratch (no model_name_or_path)."
            )
        return dict(requested)
    if requested == GRAPH_OPTION_DEFAULTS:
        return saved
    differing = {name: (saved[name], value) for name, value in requested.items() if saved[name] != value}
    if differing:
        listed = "; ".join(f"{name}: checkpoint {old!r}, recipe {new!r}" for name, (old, new) in differing.items())
        raise ValueError(
            f"{source} was trained with other options than the recipe asks for ({listed}). Set the recipe's options "
            "to the checkpoint's (or leave them all at their defaults to keep them), or start from a vanilla model."
        )
    return saved


def load_pretrained_with_options(
    source: str, requested: dict[str, Any], attn_implementation: str | None = None
) -> tuple[str, PreTrainedModel]:
    """``(family, model)``: the checkpoint at ``source`` (folder or Hub id) as a graph model with the options.

    The weights load through the graph class's own ``from_pretrained``, so shapes are checked and the
    modules the options add are initialised (and listed in Transformers' "newly initialized" warning).
    """
    check_model_source(source, weights=False)
    with named_source(source):
        config_dict, _ = PretrainedConfig.get_config_dict(source)
    model_type = config_dict.get("model_type")
    family, config_class, model_class = checkpoint_family(model_type, source)
    check_model_source(source)  # the weights, once the model type is known to be usable
    options = resolve_options(model_type, config_dict, requested, source)
    # the config validates the options with the checkpoint's sizes (once); no "model of type marian" warning
    config = config_class.from_dict(config_dict, **options)
    added = {name: value for name, value in options.items() if value != GRAPH_OPTION_DEFAULTS[name]}
    logger.info(f"Loading {model_type} checkpoint {source} as {model_class.__name__} with options {added or 'none'}.")
    model = model_class.from_pretrained(source, config=config, attn_implementation=attn_implementation)
    return family, model


__all__ = ["checkpoint_family", "load_pretrained_with_options", "resolve_options"]
