"""Configurations for the graph-group and attention-link variants of Marian, BART and M2M100 (NLLB-200).

Each config class declares the option fields; one mixin validates them, so that every family validates them
the same way. Validation raises a plain `ValueError` naming the field, the value and the allowed values,
because that is what a user catches and reads; the `@strict` type checks of the parent configs raise a
different exception type, so the new fields are deliberately kept out of them (annotated `Any`).

This module travels with saved checkpoints (``trust_remote_code``): it imports only Transformers (and
huggingface_hub's ``strict``, as Transformers' configs do), the fusion registry (torch) and the link-mode
registry.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar

from huggingface_hub.dataclasses import strict
from transformers import BartConfig, M2M100Config, MarianConfig

from .graph_fusions import FUSIONS
from .link_modes import LINK_MODES


@dataclass(frozen=True)
class GraphOption:
    """One option of the graph and link configs, defined once: its name, default, allowed values and help.

    Everything else reads these: the config classes' defaults and validation, the training script's
    arguments (`ModelArguments`), the recipe generator, the fine-tuning loader and the docs' options
    table (a test keeps the config classes' declared fields equal to this list). ``choices`` is None
    for a True/False option. With every option at its default the model is vanilla.
    """

    name: str
    default: Any
    choices: Collection[str] | None
    help: str

    @property
    def annotation(self) -> type:
        return bool if self.choices is None else str

    def check(self, config_name: str, value: Any) -> None:
        """Raise a `ValueError` naming the field, the value and what is allowed."""
        if self.choices is None:
            if not isinstance(value, bool):
                raise ValueError(f"{config_name}.{self.name} must be True or False; got {value!r}.")
        elif not isinstance(value, str) or value not in self.choices:
            choices = ", ".join(repr(choice) for choice in self.choices)
            raise ValueError(f"{config_name}.{self.name} must be one of {choices}; got {value!r}.")


#: the fusions of the subgraph groups, as `graph_fusions` registers them (a live view: one registered
#: later is allowed too)
GRAPH_FUSIONS = FUSIONS.keys()

GRAPH_OPTIONS: tuple[GraphOption, ...] = (
    GraphOption(
        "attention_link",
        "none",
        ("none", "encoder", "decoder", "both"),
        "Which stacks carry pre-softmax attention scores from layer to layer: 'encoder' (self-attention), "
        "'decoder' (self- and cross-attention), 'both' or 'none'.",
    ),
    GraphOption(
        "attention_link_mode",
        "previous",
        LINK_MODES.keys(),
        " ".join(mode.help for mode in LINK_MODES.values()),
    ),
    GraphOption(
        "attention_link_kernel",
        "auto",
        ("auto", "scores", "concat"),
        "How the link runs under sdpa: 'scores' (sum materialised scores), 'concat' (one SDPA call on "
        "head-dim-concatenated queries and keys) or 'auto' (scores on CPU and for one-row decoding steps, "
        "concat otherwise). Same results either way.",
    ),
    GraphOption(
        "attention_link_gate",
        "none",
        ("none", "learned"),
        "Not from the paper: 'learned' weighs the carried scores by a learned per-head weight (`link_gate`, "
        "zeros at the start), so a pretrained checkpoint with the link on starts exactly where it was; "
        "'none' adds them as the paper does.",
    ),
    GraphOption(
        "graph_attention",
        False,
        None,
        "Graph-group self-attention in encoder layers 1..N-1 (high, middle and low order subgraphs over the "
        "previous and the incremental representation).",
    ),
    GraphOption("graph_fusion", "gate", GRAPH_FUSIONS, "How the subgraph groups are fused."),
    GraphOption("graph_half_dim", False, None, "The three group attentions work in d_model/2."),
    GraphOption("graph_shared_qkv", False, None, "One attention module serves all three group attentions."),
)

GRAPH_OPTION_DEFAULTS: dict[str, Any] = {option.name: option.default for option in GRAPH_OPTIONS}
_BY_NAME = {option.name: option for option in GRAPH_OPTIONS}
ATTENTION_LINK_CHOICES = _BY_NAME["attention_link"].choices
ATTENTION_LINK_MODES = _BY_NAME["attention_link_mode"].choices
ATTENTION_LINK_KERNELS = _BY_NAME["attention_link_kernel"].choices
ATTENTION_LINK_GATES = _BY_NAME["attention_link_gate"].choices


def validate_graph_options(config: Any) -> None:
    """Raise a `ValueError` naming the field if any graph or link option is invalid, or two do not combine.

    The config classes call it (`GraphOptionsMixin.validate_graph_config`): at construction, when a model is
    built from the config and when the config is saved.
    """
    name = type(config).__name__
    for option in GRAPH_OPTIONS:
        option.check(name, getattr(config, option.name))
    if config.graph_attention and getattr(config, "layer_norm_position", "post") != "post":
        raise ValueError(
            f"{name}.graph_attention=True is defined by its papers for post-LN encoders (Marian, BART) only; "
            f"this family's layers are {config.layer_norm_position}-LN, for which no form is defined. "
            "Use attention_link here, or a Marian or BART model for graph-group attention."
        )
    if config.graph_attention and config.attention_link in ("encoder", "both"):
        raise ValueError(
            f"{name}.attention_link={config.attention_link!r} links the encoder, which cannot be combined with "
            "graph_attention=True (neither paper defines it); allowed with graph_attention: 'none', 'decoder'."
        )
    if config.graph_attention and config.graph_half_dim:
        half, heads = config.d_model // 2, config.encoder_attention_heads
        if config.d_model % 2 or half % heads:
            raise ValueError(
                f"{name}.graph_half_dim=True needs d_model/2 divisible by encoder_attention_heads; "
                f"got d_model={config.d_model}, encoder_attention_heads={heads}."
            )


#: size fields that must be positive whole numbers
POSITIVE_SIZE_FIELDS = (
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "max_position_embeddings",
)
#: probabilities that must lie in [0, 1)
RATE_FIELDS = ("dropout", "attention_dropout", "activation_dropout")


def validate_sizes(config: Any) -> None:
    """Raise a `ValueError` naming the field for sizes and rates the model cannot be built with.

    Without it ``encoder_layers=-1`` builds (and saves) a model with no encoder layers, and zero
    heads, a negative width or ``dropout=2.0`` fail deep inside torch, after the corpus is loaded
    and a tokenizer trained. Fields the object does not have are skipped (``vocab_size`` is only
    known once a tokenizer exists).
    """
    name = type(config).__name__
    for field in (*POSITIVE_SIZE_FIELDS, "vocab_size"):
        value = getattr(config, field, None)
        if value is None and field == "vocab_size":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}.{field} must be a positive whole number; got {value!r}.")
    for stack in ("encoder", "decoder"):
        heads = getattr(config, f"{stack}_attention_heads")
        if config.d_model % heads:
            raise ValueError(
                f"{name}.d_model ({config.d_model}) must be divisible by {stack}_attention_heads ({heads})."
            )
    for field in RATE_FIELDS:
        value = getattr(config, field, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name}.{field} must be a probability in [0, 1); got {value!r}.")


def options_docstring(options: tuple[GraphOption, ...] = GRAPH_OPTIONS) -> str:
    """The ``Args:`` entries of the option fields, from their definitions (Transformers' docstring style)."""
    lines = []
    for option in options:
        kind = "bool" if option.choices is None else "str"
        lines.append(f"        {option.name} (`{kind}`, defaults to `{option.default!r}`):")
        choices = "" if option.choices is None else " One of " + ", ".join(f"`{c!r}`" for c in option.choices) + "."
        lines.append(f"            {option.help}{choices}")
    return "\n".join(lines)


#: the option fields and the sizes and rates their checks read: what a config validates at construction, and
#: what `from_dict` builds in at construction rather than setting afterwards
VALIDATED_FIELDS = frozenset({option.name for option in GRAPH_OPTIONS} | set(POSITIVE_SIZE_FIELDS) | set(RATE_FIELDS))


class GraphOptionsMixin:
    """Option handling shared by the family configs: the one owner of the options' validation.

    Each config class declares the option fields, as a `PretrainedConfig` subclass declares its own (a test
    keeps them equal to `GRAPH_OPTIONS`, where each option's default, choices and help are defined), and is a
    ``@strict`` dataclass as Transformers' configs are; `__init_subclass__` appends the options' ``Args:``
    entries to its docstring.

    The options are validated where Transformers validates a config, with a plain `ValueError` naming the field
    (what users catch; huggingface_hub's ``@strict`` field validators see one value, not the config, and raise
    their own error type, so the option fields are annotated `Any` and left to these checks):

    * at construction (`__post_init__`), so a recipe or a checkpoint with a bad or unknown value is refused
      where it is read;
    * when a model is built from the config (`GraphPreTrainedMixin.__init__`), which catches a field set
      after construction, as a plain attribute, before any weight exists;
    * when the config is saved (`validate_graph_config`, a ``@strict`` class validator, which Transformers'
      `save_pretrained` runs), so no checkpoint carries an invalid combination.
    """

    def __init_subclass__(cls, **kwargs):
        if cls.__doc__ and "Args:" not in cls.__doc__:
            cls.__doc__ = cls.__doc__.rstrip() + "\n\n    Args:\n" + options_docstring() + "\n"
        super().__init_subclass__(**kwargs)

    #: the vanilla model type whose checkpoints these configs may load (all options then default)
    vanilla_model_type: ClassVar[str]
    #: where the family's layers put LayerNorm: "post" (Marian, BART: ``norm(x + f(x))``) or "pre"
    #: (M2M100/NLLB: ``x + f(norm(x))``, with a final LayerNorm after each stack). The layer blocks
    #: (`layer_blocks.py`) read it from the config they are built with, so it travels with checkpoints.
    layer_norm_position: ClassVar[str] = "post"

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.validate_graph_config()

    def validate_graph_config(self) -> None:
        """Raise a `ValueError` naming the field if a size, a rate or an option is invalid, or two options do not
        combine (`validate_sizes`, `validate_graph_options`)."""
        validate_sizes(self)
        validate_graph_options(self)

    @property
    def links_encoder(self) -> bool:
        """True when encoder self-attention carries scores across layers."""
        return self.attention_link in ("encoder", "both")

    @property
    def links_decoder(self) -> bool:
        """True when decoder self- and cross-attention carry scores across layers."""
        return self.attention_link in ("decoder", "both")

    @property
    def is_vanilla(self) -> bool:
        """True when no option changes what the model computes."""
        return self.attention_link == "none" and not self.graph_attention

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any):
        # Accept our own checkpoints and vanilla ones of the same family (all options then take their
        # defaults); refuse any other family instead of building a silently mismatched model.
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type not in (cls.model_type, cls.vanilla_model_type):
            raise ValueError(
                f"{cls.__name__} cannot load a checkpoint of model type {model_type!r}: it loads "
                f"{cls.model_type!r} and vanilla {cls.vanilla_model_type!r} checkpoints only. Use the matching "
                "class or AutoModelForSeq2SeqLM."
            )
        # Options given as keyword arguments are built in with the rest, so that construction validates them
        # together with the checkpoint's sizes (Transformers' `from_dict` would set them after construction, as
        # plain attributes that only a model build or a save checks).
        config_dict = {**config_dict, **{name: kwargs.pop(name) for name in list(kwargs) if name in VALIDATED_FIELDS}}
        return super().from_dict(config_dict, **kwargs)


@strict
class GraphMarianConfig(GraphOptionsMixin, MarianConfig):
    r"""`MarianConfig` plus the graph-group attention and attention-link options (their entries below come
    from `GRAPH_OPTIONS`).
    """

    model_type = "graph_marian"
    vanilla_model_type = "marian"

    # The options of `GRAPH_OPTIONS`, with its defaults. `Any`: `GraphOption.check` validates them (a ValueError
    # naming the field), not the parent config's `@strict` type checks, which raise another exception type.
    attention_link: Any = "none"
    attention_link_mode: Any = "previous"
    attention_link_kernel: Any = "auto"
    attention_link_gate: Any = "none"
    graph_attention: Any = False
    graph_fusion: Any = "gate"
    graph_half_dim: Any = False
    graph_shared_qkv: Any = False


@strict
class GraphBartConfig(GraphOptionsMixin, BartConfig):
    r"""`BartConfig` plus the graph-group attention and attention-link options."""

    model_type = "graph_bart"
    vanilla_model_type = "bart"

    # The options of `GRAPH_OPTIONS`, with its defaults. `Any`: `GraphOption.check` validates them (a ValueError
    # naming the field), not the parent config's `@strict` type checks, which raise another exception type.
    attention_link: Any = "none"
    attention_link_mode: Any = "previous"
    attention_link_kernel: Any = "auto"
    attention_link_gate: Any = "none"
    graph_attention: Any = False
    graph_fusion: Any = "gate"
    graph_half_dim: Any = False
    graph_shared_qkv: Any = False


@strict
class GraphM2M100Config(GraphOptionsMixin, M2M100Config):
    r"""`M2M100Config` (the architecture of NLLB-200) plus the attention-link options.

    M2M100's layers are pre-LN, for which the graph-group papers define nothing: `graph_attention=True`
    is refused here.
    """

    model_type = "graph_m2m_100"
    vanilla_model_type = "m2m_100"
    layer_norm_position = "pre"

    # The options of `GRAPH_OPTIONS`, with its defaults. `Any`: `GraphOption.check` validates them (a ValueError
    # naming the field), not the parent config's `@strict` type checks, which raise another exception type.
    attention_link: Any = "none"
    attention_link_mode: Any = "previous"
    attention_link_kernel: Any = "auto"
    attention_link_gate: Any = "none"
    graph_attention: Any = False
    graph_fusion: Any = "gate"
    graph_half_dim: Any = False
    graph_shared_qkv: Any = False


__all__ = [
    "GRAPH_OPTIONS",
    "GRAPH_OPTION_DEFAULTS",
    "GraphBartConfig",
    "GraphM2M100Config",
    "GraphMarianConfig",
    "GraphOption",
    "validate_graph_options",
    "validate_sizes",
]
