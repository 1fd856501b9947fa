"""Wiring shared by the Marian and BART families: which layers a stack gets, and the extra outputs.

A family module (``modeling_marian.py``, ``modeling_bart.py``) subclasses the vanilla Transformers
classes with these mixins and names its own layer and attention classes. With every option off the
vanilla stacks are kept as they are, so the model is exactly the vanilla one.

This module travels with saved checkpoints (``trust_remote_code``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers.modeling_outputs import Seq2SeqLMOutput, Seq2SeqModelOutput

from .attention_link import check_link_implementation
from .configuration import validate_graph_options
from .layer_blocks import LayerCarry

_OUTPUT_FLAGS = ("output_attentions", "output_hidden_states", "return_dict")


@dataclass
class GraphSeq2SeqModelOutput(Seq2SeqModelOutput):
    r"""encoder_graph_gates (`tuple(torch.FloatTensor)`, returned with `output_graph_gates=True`):
    One tensor per graph encoder layer (layers 1..N-1): the sigmoid gate `w` of shape
    `(batch, src_len, d_model)` for `graph_fusion="gate"`, or the weight of each of the four subgraph
    groups `[high, middle_inc, middle_prev, low]`, shape `(batch, src_len, 4)`, for `"self_gate"`.
    Empty for `"sum"`, which has no gate."""

    encoder_graph_gates: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class GraphSeq2SeqLMOutput(Seq2SeqLMOutput):
    r"""encoder_graph_gates: see [`GraphSeq2SeqModelOutput`]."""

    encoder_graph_gates: tuple[torch.FloatTensor, ...] | None = None


class GraphPreTrainedMixin:
    """Validates the options when a model is built and refuses kernels that would drop the link.

    `remote_code_classes` names (config, base model, translation model); saving writes the matching
    `auto_map` so that a checkpoint of either model class loads with `trust_remote_code=True`.
    """

    remote_code_classes: tuple[str, str, str] | None = None

    def __init__(self, config, *args, **kwargs):
        validate_graph_options(config)
        super().__init__(config, *args, **kwargs)

    def _check_and_adjust_attn_implementation(self, attn_implementation, *args, **kwargs):
        implementation = super()._check_and_adjust_attn_implementation(attn_implementation, *args, **kwargs)
        if getattr(self.config, "attention_link", "none") != "none":
            check_link_implementation(implementation)
        return implementation

    def save_pretrained(self, save_directory, *args, **kwargs):
        if self.remote_code_classes is not None:
            module = type(self).__module__.rsplit(".", 1)[-1]
            self.config.auto_map = auto_map_for(module, *self.remote_code_classes)
        return super().save_pretrained(save_directory, *args, **kwargs)


class GraphEncoderMixin:
    """Encoder stack: linked layers, or graph-group layers 1..N-1 after a standard layer 0."""

    first_graph_layer_class: type[nn.Module]
    graph_layer_class: type[nn.Module]
    linked_layer_class: type[nn.Module]

    def __init__(self, config):
        super().__init__(config)
        if config.graph_attention:
            layers = [self.first_graph_layer_class(config, layer_idx=0)]
            layers += [self.graph_layer_class(config, layer_idx=i) for i in range(1, config.encoder_layers)]
        elif config.links_encoder:
            layers = [self.linked_layer_class(config, layer_idx=i) for i in range(config.encoder_layers)]
        else:
            return
        self.layers = nn.ModuleList(layers)
        self.post_init()

    def forward(self, *args, **kwargs):
        if self.config.graph_attention or self.config.links_encoder:
            kwargs["layer_carry"] = LayerCarry()
        return super().forward(*args, **kwargs)


class GraphDecoderMixin:
    """Decoder stack whose self- and cross-attention are linked across layers."""

    linked_layer_class: type[nn.Module]

    def __init__(self, config):
        super().__init__(config)
        if config.links_decoder:
            self.layers = nn.ModuleList(
                [self.linked_layer_class(config, layer_idx=i) for i in range(config.decoder_layers)]
            )
            self.post_init()

    def forward(self, *args, **kwargs):
        if self.config.links_decoder:
            kwargs["layer_carry"] = LayerCarry()
        return super().forward(*args, **kwargs)


class GraphStacksMixin:
    """Base encoder-decoder model: swaps in the graph/linked stacks the config asks for."""

    encoder_class: type[nn.Module]
    decoder_class: type[nn.Module]

    def __init__(self, config):
        super().__init__(config)
        if config.graph_attention or config.links_encoder:
            self.encoder = self.encoder_class(config)
        if config.links_decoder:
            self.decoder = self.decoder_class(config)
        if not config.is_vanilla:
            self.post_init()  # re-ties the shared embeddings to the new stacks


class GraphGatesOutputMixin:
    """Adds ``output_graph_gates=True`` to ``forward``: the encoder's per-layer gate values.

    Each subclass gets a ``forward`` whose signature is the vanilla one plus ``output_graph_gates``:
    `Trainer` (which drops dataset columns a model does not name) and `generate()` (which refuses
    unknown model kwargs) read that signature.
    """

    gates_output_class: type

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        vanilla = super().forward  # the vanilla class next in the MRO
        signature = inspect.signature(vanilla)
        parameters = list(signature.parameters.values())
        gates = inspect.Parameter("output_graph_gates", inspect.Parameter.KEYWORD_ONLY, default=None)
        tail = [p for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
        head = [p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]

        def forward(self, *args, **kwargs):
            return GraphGatesOutputMixin.forward(self, *args, **kwargs)

        forward.__signature__ = signature.replace(parameters=[*head, gates, *tail])
        forward.__doc__ = GraphGatesOutputMixin.forward.__doc__
        forward.__qualname__ = f"{cls.__qualname__}.forward"
        cls.forward = forward

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        *args: Any,
        encoder_outputs: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        output_graph_gates: bool | None = None,
        **kwargs: Any,
    ):
        r"""As the vanilla forward; `output_graph_gates=True` also returns `encoder_graph_gates`."""
        if not output_graph_gates:
            return super().forward(
                input_ids,
                attention_mask,
                *args,
                encoder_outputs=encoder_outputs,
                inputs_embeds=inputs_embeds,
                **kwargs,
            )
        if encoder_outputs is None:
            flags = {k: kwargs[k] for k in _OUTPUT_FLAGS if k in kwargs and k != "return_dict"}
            encoder_outputs = self.get_encoder()(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_graph_gates=True,
                **flags,
            )
        gates = encoder_outputs.get("graph_gates", ()) if hasattr(encoder_outputs, "get") else ()
        outputs = super().forward(
            input_ids,
            attention_mask,
            *args,
            encoder_outputs=encoder_outputs,
            inputs_embeds=inputs_embeds,
            **kwargs,
        )
        if isinstance(outputs, tuple):
            return (*outputs, gates)
        return self.gates_output_class(**outputs, encoder_graph_gates=gates)


def auto_map_for(model_module: str, config_class: str, base_class: str, lm_class: str) -> dict[str, str]:
    """The `auto_map` that lets `trust_remote_code` users load a checkpoint without this package."""
    return {
        "AutoConfig": f"configuration.{config_class}",
        "AutoModel": f"{model_module}.{base_class}",
        "AutoModelForSeq2SeqLM": f"{model_module}.{lm_class}",
    }
