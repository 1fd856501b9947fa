"""Wiring shared by the model families: which layers a stack gets, how stacks and models are built, and the
extra outputs. The computation itself lives in `attention_link.py` and `graph_attention.py`.

A family module (``modeling_marian.py``, ``modeling_bart.py``, ``modeling_m2m_100.py``) subclasses the
vanilla Transformers classes with these mixins and holds only what differs between families: embeddings,
norms and heads. A stack with no option on is the vanilla stack class itself, so with every option off the
model is exactly the vanilla one.

A family module and its relative imports (this module among them) are what ``save_pretrained`` copies next
to the weights, so ``trust_remote_code=True`` loads a checkpoint without this package.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import PreTrainedModel

from .attention_link import (
    check_link_implementation,
    stack_mask,
)
from .transformers_seam import (
    GradientCheckpointingLayer,
    OutputRecorder,
    cache_kwargs,
    capture_outputs,
    causal_mask,
    create_bidirectional_mask,
    decoder_stack_output,
    enable_activation_checkpointing,
    hf_init,
    is_torchdynamo_compiling,
    keep_computed_positions_frozen,
    merge_with_config_defaults,
    new_decoder_cache,
    take_cache,
)
from .translation_pipeline import custom_pipelines_entry

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


class LinkGateInitMixin:
    """The vanilla initialisation, and the learned link gate at zero (`attention_link_gate="learned"`): at
    build time, and when a checkpoint saved without it is loaded (a missing key, which Transformers fills
    through `_init_weights`). Every class with its own `_init_weights` that can hold linked layers takes it:
    the models and the encoder and decoder stacks, which Transformers initialises as sub-models. A computed
    position table, which loading computes here, stays frozen (`keep_computed_positions_frozen`)."""

    def _init_weights(self, module):
        super()._init_weights(module)
        keep_computed_positions_frozen(module)
        if isinstance(getattr(module, "link_gate", None), nn.Parameter):
            hf_init.zeros_(module.link_gate)


class GraphPreTrainedMixin(LinkGateInitMixin):
    """Builds each module once, and describes the model to engines truthfully.

    * ``__init__`` runs `PreTrainedModel.__init__` only: each Graph* class builds its own modules (the
      vanilla ones where an option is off), so nothing is built and thrown away. It first has the config
      validate its sizes and options (`GraphOptionsMixin.validate_graph_config`; a field set after the
      config was built is checked here, before any weight exists); the modules then read them as they are. A
      ``config.gradient_checkpointing = True`` is taken by the outermost model and turned on for every
      layer once all modules exist.
    * ``_no_split_modules`` names the layer classes actually built (FSDP's transformer-based wrap
      policy and ``device_map`` look them up by class name).
    * Flash and flex attention are not claimed for linked models, which refuse them in the one place
      Transformers checks an attention implementation, at build and at `set_attn_implementation`
      (`_check_and_adjust_attn_implementation`).

    `remote_code_classes` names (config, base model, translation model); saving writes the matching
    `auto_map` so that a checkpoint of either model class loads with `trust_remote_code=True`.
    """

    remote_code_classes: tuple[str, str, str] | None = None
    _warned_frozen_additions = False

    def __init__(self, config, *args, **kwargs):
        config.validate_graph_config()
        self._requested_checkpointing = bool(getattr(config, "gradient_checkpointing", False))
        if self._requested_checkpointing:
            delattr(config, "gradient_checkpointing")  # consumed here, not by the first sub-stack built
        PreTrainedModel.__init__(self, config, *args, **kwargs)

    @property
    def _supports_flash_attn(self) -> bool:
        return not _is_linked(self) and super()._supports_flash_attn

    @property
    def _supports_flex_attn(self) -> bool:
        return not _is_linked(self) and super()._supports_flex_attn

    def post_init(self):
        super().post_init()
        self._no_split_modules = {type(m).__name__ for m in self.modules() if isinstance(m, GradientCheckpointingLayer)}
        if self._requested_checkpointing:
            self._requested_checkpointing = False
            enable_activation_checkpointing(self)

    def _check_and_adjust_attn_implementation(self, attn_implementation, *args, **kwargs):
        implementation = super()._check_and_adjust_attn_implementation(attn_implementation, *args, **kwargs)
        if _is_linked(self):
            check_link_implementation(implementation)
        return implementation

    def added_module_names(self) -> list[str]:
        """The modules this model has and a vanilla checkpoint of its family has no weights for (graph
        attention's), by their full names, as PEFT's ``modules_to_save`` takes them: an adapter such as LoRA
        freezes whatever it does not target, and these would stay at their initialisation. Full names, because
        half-dim's rebuilt ``self_attn`` shares its short name with every other self-attention. The learned
        link gate is a parameter of the attention, ``link_gate``, not a module (docs/training.md, "Adapters")."""
        return [
            f"{name}.{child}"
            for name, module in self.named_modules()
            for child in module.__dict__.get("added_modules", ())
        ]

    def train(self, mode: bool = True):
        """Warns once, the first time the model is set to train with a part it adds to vanilla frozen while
        other parameters train (`frozen_additions`): that part keeps its value, and nothing else would say so.
        Checked here, before the sub-models are set, so the outermost model warns and they do not."""
        if mode and not self._warned_frozen_additions:
            frozen = frozen_additions(self)
            if frozen:
                for module in self.modules():
                    if isinstance(module, GraphPreTrainedMixin):
                        module._warned_frozen_additions = True
                warnings.warn(frozen_additions_message(frozen), UserWarning, stacklevel=2)
        return super().train(mode)

    def save_pretrained(self, save_directory, *args, **kwargs):
        if self.remote_code_classes is not None:
            module = type(self).__module__.rsplit(".", 1)[-1]
            self.config.auto_map = auto_map_for(module, *self.remote_code_classes)
            self.config.custom_pipelines = custom_pipelines_entry()  # translation_pipeline.py travels too
        return super().save_pretrained(save_directory, *args, **kwargs)


def frozen_additions(model: nn.Module) -> list[str]:
    """The parts a vanilla checkpoint lacks (graph layers' `added_modules`, learned ``link_gate`` parameters)
    that cannot train while some other parameter of `model` can: what a frozen base under an adapter
    leaves out. A part wrapped by PEFT's ``modules_to_save`` holds a trainable copy, so it counts as training."""
    if not any(parameter.requires_grad for parameter in model.parameters()):
        return []
    frozen = []
    for name, module in model.named_modules():  # (plain dict lookups: this runs at every `train()`)
        for child in module.__dict__.get("added_modules", ()):
            if not any(parameter.requires_grad for parameter in getattr(module, child).parameters()):
                frozen.append(f"{name}.{child}")
        gate = module._parameters.get("link_gate")
        if gate is not None and not gate.requires_grad:
            frozen.append(f"{name}.link_gate")
    return frozen


def frozen_additions_message(frozen: list[str]) -> str:
    shown = ", ".join(frozen[:3]) + (f" and {len(frozen) - 3} more" if len(frozen) > 3 else "")
    return (
        f"{len(frozen)} parts this model adds to a vanilla checkpoint are frozen while other parameters train "
        f"({shown}): they keep their values, so a learned link gate at zero leaves the link off and graph "
        "modules stay at their initialisation. Under an adapter such as LoRA, pass `model.added_module_names()` "
        "as PEFT's `modules_to_save` and call `requires_grad_(True)` on the `link_gate` parameters "
        '(docs/training.md, "Adapters").'
    )


def _is_linked(model: nn.Module) -> bool:
    config = getattr(model, "config", None)
    return getattr(config, "attention_link", "none") != "none"


def _drop_layer(stack: nn.Module) -> bool:
    """LayerDrop, as the vanilla stacks draw it: skip this layer with probability `stack.layerdrop`."""
    return stack.training and stack.layerdrop > 0.0 and bool(torch.rand([]) < stack.layerdrop)


class FamilyLayers(NamedTuple):
    """A family's layer classes with the package's options, declared in the family's module as short
    subclasses of a mixin and the family's Transformers class: the linked attention, the linked encoder and
    decoder layers, and the graph encoder layer (None for a family graph attention is not defined for); and
    the vanilla attention and encoder layer they subclass, which the stacks build and record outputs of."""

    linked_attention: type[nn.Module]
    linked_encoder_layer: type[nn.Module]
    linked_decoder_layer: type[nn.Module]
    graph_encoder_layer: type[nn.Module] | None
    attention: type[nn.Module]
    encoder_layer: type[nn.Module]


class StackInitMixin:
    """The vanilla stack's ``__init__`` with this stack's layers, written once for the three families.

    Follows ``MarianEncoder.__init__``/``MarianDecoder.__init__`` and BART's and M2M100's (Transformers
    5.17-5.24): the stack's scalars, its embeddings, its layers, its final norms, in that order (the order
    modules are built in is the order of the state dict and of the random initialisation). A family class
    supplies ``build_embeddings(config)`` (``embed_tokens``, ``embed_positions``) and, where its stack has
    norms after the layers (BART's ``layernorm_embedding``, M2M100's ``layer_norm``), ``build_norms(config)``.
    """

    #: the stack's maximum-length attribute: ``max_source_positions`` or ``max_target_positions``
    max_positions_attribute: str
    #: the config field of the stack's layer drop: ``encoder_layerdrop`` or ``decoder_layerdrop``
    layerdrop_field: str

    def __init__(self, config):
        PreTrainedModel.__init__(self, config)
        self.dropout = config.dropout
        self.layerdrop = getattr(config, self.layerdrop_field)
        self.padding_idx = config.pad_token_id
        setattr(self, self.max_positions_attribute, config.max_position_embeddings)
        self.build_embeddings(config)
        self.layers = self.build_layers(config)
        self.build_norms(config)
        self.gradient_checkpointing = False
        self.post_init()

    def build_embeddings(self, config) -> None:
        raise NotImplementedError(f"{type(self).__name__} builds no embeddings")

    def build_norms(self, config) -> None:
        """Norms after the layers (none in Marian)."""

    def token_embeddings(self, input_ids: torch.LongTensor) -> torch.Tensor:
        """The embeddings of `input_ids` where no ``inputs_embeds`` were given (BART's and M2M100's embedding
        modules scale them; Marian's encoder scales them here)."""
        return self.embed_tokens(input_ids)

    def embedded_inputs(self, input_ids, inputs_embeds, *embed_args) -> tuple[torch.Tensor, torch.Tensor]:
        """The first layer's input (the family's `embed`, then dropout) and the token embeddings the masks are
        built from, as the vanilla stack's forward makes them."""
        if inputs_embeds is None:
            inputs_embeds = self.token_embeddings(input_ids)
        hidden_states = self.embed(input_ids, inputs_embeds, *embed_args)
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training), inputs_embeds


class GraphEncoderMixin(StackInitMixin, LinkGateInitMixin):
    """Encoder stack with linked layers, or graph-group layers 1..N-1 after a standard layer 0.

    What one layer hands to the next is explicit in the loops below: the link carry goes from a
    layer's outputs to the next layer's positional inputs, and the graph's previous representation
    P is the input of the layer before. Nothing is kept in shared state, so an activation-
    checkpointing wrapper around any layer re-runs it on exactly the inputs it first saw.
    A family class supplies its ``layer_classes`` (from which its recorded outputs follow),
    ``embed(input_ids, inputs_embeds)`` (its embeddings up to the dropout before the first layer) and, where
    it is pre-LN, ``final_norm``.
    """

    max_positions_attribute = "max_source_positions"
    layerdrop_field = "encoder_layerdrop"
    layer_classes: FamilyLayers

    def __init_subclass__(cls, **kwargs):
        layers = cls.__dict__.get("layer_classes")
        if layers is not None:  # what the vanilla encoder records, and each graph layer's gates; set before
            # `PreTrainedModel.__init_subclass__` runs, in case a Transformers release reads it there
            cls._can_record_outputs = {
                "hidden_states": layers.encoder_layer,
                "attentions": OutputRecorder(layers.attention, index=1, layer_name="self_attn"),
            }
            if layers.graph_encoder_layer is not None:
                cls._can_record_outputs["graph_gates"] = OutputRecorder(layers.graph_encoder_layer, index=1)
        super().__init_subclass__(**kwargs)

    def build_layers(self, config) -> nn.ModuleList:
        classes = self.layer_classes
        if config.graph_attention:
            layers = [classes.encoder_layer(config, layer_idx=0)]
            layers += [classes.graph_encoder_layer(config, layer_idx=i) for i in range(1, config.encoder_layers)]
        elif config.links_encoder:
            layers = [classes.linked_encoder_layer(config, layer_idx=i) for i in range(config.encoder_layers)]
        else:
            raise ValueError("a graph encoder needs graph_attention=True or an encoder attention_link")
        return nn.ModuleList(layers)

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> BaseModelOutput:
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        hidden_states, inputs_embeds = self.embedded_inputs(input_ids, inputs_embeds)
        attention_mask = stack_mask(
            create_bidirectional_mask(config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask),
            attention_mask,
        )
        if self.config.graph_attention:
            hidden_states = self._graph_layers(hidden_states, attention_mask, **kwargs)
        else:
            hidden_states = self._linked_layers(hidden_states, attention_mask, **kwargs)
        return BaseModelOutput(last_hidden_state=self.final_norm(hidden_states))

    def final_norm(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """After the last layer: nothing for post-LN families; a pre-LN family's stack applies its final
        LayerNorm here (M2M100's ``layer_norm``)."""
        return hidden_states

    def _linked_layers(self, hidden_states, attention_mask, **kwargs):
        """LayerDrop skips a layer as fairseq does: its input goes on unchanged, and so does the carry it
        received, so the next layer that runs adds the scores of the last layer that ran."""
        prev_attn = (None, None)  # the carry as (prev_attn, prev_attn_keys); layer 0 has none
        for layer in self.layers:
            if not _drop_layer(self):
                hidden_states, *prev_attn = layer(hidden_states, attention_mask, *prev_attn, **kwargs)
        return hidden_states

    def _graph_layers(self, hidden_states, attention_mask, **kwargs):
        """Layer 0 (the standard layer that makes f_0, on which every graph layer builds) always runs;
        LayerDrop may skip a graph layer n >= 1, which then acts as the identity: the next layer gets the
        P and F that layer n would have got."""
        previous = None  # P of the next layer: the input of the layer before (P_1 = x)
        # `build_layers` puts the standard layer at index 0 and graph layers after it; the position says
        # which is which also once FSDP or an activation-checkpointing wrapper has wrapped the layers
        for index, layer in enumerate(self.layers):
            if index == 0:
                output = layer(hidden_states, attention_mask, **kwargs)
            elif _drop_layer(self):
                continue
            else:
                output, _gate = layer(hidden_states, attention_mask, previous, **kwargs)
            previous, hidden_states = hidden_states, output
        return hidden_states


class GraphDecoderMixin(StackInitMixin, LinkGateInitMixin):
    """Decoder stack whose self- and cross-attention are linked across layers.

    The four carry tensors go from each layer's outputs to the next layer's positional inputs. A
    family class supplies its ``layer_classes`` and ``embed(input_ids, inputs_embeds, cache_length)`` (its
    embeddings up to the dropout before the first layer).
    """

    max_positions_attribute = "max_target_positions"
    layerdrop_field = "decoder_layerdrop"
    layer_classes: FamilyLayers

    def build_layers(self, config) -> nn.ModuleList:
        linked_layer = self.layer_classes.linked_decoder_layer
        return nn.ModuleList([linked_layer(config, layer_idx=i) for i in range(config.decoder_layers)])

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Any,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """As the vanilla decoder stack's forward; the KV cache comes as ``cache`` (Transformers >= 5.24)
        or ``past_key_values`` (earlier releases), either name on any release (`take_cache`)."""
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of decoder_input_ids or decoder_inputs_embeds")
        cache = take_cache(kwargs)
        if use_cache and cache is None:
            cache = new_decoder_cache(self.config)
        past_length = cache.get_seq_length() if cache is not None else 0
        hidden_states, inputs_embeds = self.embedded_inputs(input_ids, inputs_embeds, past_length)
        batch_size, seq_length = inputs_embeds.shape[:2]
        if attention_mask is None and not is_torchdynamo_compiling():
            attention_mask = torch.ones(batch_size, past_length + seq_length, device=inputs_embeds.device)
        causal = stack_mask(causal_mask(self.config, inputs_embeds, attention_mask, cache), attention_mask)
        encoder_attention_mask = stack_mask(
            create_bidirectional_mask(
                config=self.config,
                inputs_embeds=inputs_embeds,
                attention_mask=encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
            ),
            encoder_attention_mask,
        )
        # (self-attention, cross-attention) carries; none before layer 0. A layer LayerDrop skips hands on
        # the carry it received, as in the encoder.
        prev_attn = (None, None, None, None)  # self_prev_attn(_keys), cross_prev_attn(_keys)
        for layer in self.layers:
            if _drop_layer(self):
                continue
            hidden_states, *prev_attn = layer(
                hidden_states,
                causal,
                encoder_hidden_states,
                *prev_attn,
                encoder_attention_mask=encoder_attention_mask,
                use_cache=use_cache,
                **cache_kwargs(cache),  # by the name under which a checkpointing wrapper drops it
                **kwargs,
            )
        return decoder_stack_output(self.final_norm(hidden_states), cache)

    def final_norm(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """As `GraphEncoderMixin.final_norm`."""
        return hidden_states


class GraphGatesOutputMixin:
    """Adds ``output_graph_gates=True`` to ``forward``: the encoder's per-layer gate values.

    The base and translation models write their ``forward`` out with the vanilla parameters plus
    ``output_graph_gates`` (`GraphBaseModelMixin.forward`, `GraphTranslationModelMixin.forward`):
    `Trainer` (which drops dataset columns a model does not name) and `generate()` (which refuses unknown
    model kwargs) read that signature. The parameters follow Transformers' (`transformers_seam.
    SEQ2SEQ_FORWARD_PARAMETERS`, which a test compares with the installed release; the cache is handed on
    under the installed release's name).
    """

    gates_output_class: type

    def forward_with_gates(self, output_graph_gates: bool | None, **inputs: Any):
        r"""The vanilla forward on ``inputs``; with ``output_graph_gates`` the encoder's gates too.

        Training with `labels` builds no KV cache, in every family, as Marian and BART do and M2M100 does not:
        a cache filled during the forward pass makes a recomputing activation-checkpoint wrapper (FSDP's, as
        accelerate applies it) see cross-attention keys already cached and fail. Outputs are unchanged.
        """
        cache = take_cache(inputs)  # either name; both at once is refused
        if cache is not None:  # under the name the installed release's forward takes (`cache` since 5.24)
            inputs.update(cache_kwargs(cache))
        if self.training and inputs.get("labels") is not None:
            inputs["use_cache"] = False
        if not output_graph_gates:
            return super().forward(**inputs)
        if inputs.get("encoder_outputs") is None:
            flags = {k: inputs[k] for k in _OUTPUT_FLAGS if k in inputs and k != "return_dict"}
            inputs["encoder_outputs"] = self.get_encoder()(
                input_ids=inputs.get("input_ids"),
                attention_mask=inputs.get("attention_mask"),
                inputs_embeds=inputs.get("inputs_embeds"),
                output_graph_gates=True,
                **flags,
            )
        encoder_outputs = inputs["encoder_outputs"]
        gates = encoder_outputs.get("graph_gates", ()) if hasattr(encoder_outputs, "get") else ()
        outputs = super().forward(**inputs)
        if isinstance(outputs, tuple):
            return (*outputs, gates)
        return self.gates_output_class(**outputs, encoder_graph_gates=gates)


class StackClasses(NamedTuple):
    """A family's stacks: the vanilla ones, built where no option asks for more, and the Graph* ones."""

    encoder: type[nn.Module]
    graph_encoder: type[nn.Module]
    decoder: type[nn.Module]
    graph_decoder: type[nn.Module]


class GraphBaseModelMixin(GraphGatesOutputMixin, GraphPreTrainedMixin):
    """The base model of a family (`MarianModel`, `BartModel`, `M2M100Model`), built as its vanilla
    ``__init__`` builds it, with the stacks the options ask for: the family gives its stacks (`stack_classes`)
    and its shared embedding (`build_shared`), and every option-off stack is the vanilla class itself."""

    gates_output_class = GraphSeq2SeqModelOutput
    stack_classes: StackClasses

    def __init__(self, config):
        super().__init__(config)
        self.build_shared(config)
        stacks = self.stack_classes
        graph_encoder = config.graph_attention or config.links_encoder
        self.encoder = (stacks.graph_encoder if graph_encoder else stacks.encoder)(config)
        self.decoder = (stacks.graph_decoder if config.links_decoder else stacks.decoder)(config)
        self.post_init()

    def build_shared(self, config) -> None:
        """The shared token embedding, as the family's vanilla ``__init__`` builds it."""
        raise NotImplementedError

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        *,
        output_graph_gates: bool | None = None,
        **kwargs: Any,
    ):
        r"""The family's ``<Family>Model.forward``; ``output_graph_gates=True`` also returns
        ``encoder_graph_gates``, the encoder's per-layer gate values (`forward_with_gates`)."""
        return self.forward_with_gates(
            output_graph_gates,
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            past_key_values=past_key_values,
            **kwargs,
        )


class GraphTranslationModelMixin(GraphGatesOutputMixin, GraphPreTrainedMixin):
    """The translation model of a family (`generate()`): its base model (`base_model_class`, a
    `GraphBaseModelMixin`) and the head its vanilla ``__init__`` builds (`build_head`)."""

    gates_output_class = GraphSeq2SeqLMOutput
    base_model_class: type[nn.Module]

    def __init__(self, config):
        super().__init__(config)
        self.model = self.base_model_class(config)
        self.build_head(config)
        self.post_init()

    def build_head(self, config) -> None:
        """The output projection (and logits bias, where the family has one), as the vanilla ``__init__``."""
        raise NotImplementedError

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: Any = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        *,
        output_graph_gates: bool | None = None,
        **kwargs: Any,
    ):
        r"""The family's translation model's ``forward`` (``MarianMTModel.forward``, ...);
        ``output_graph_gates=True`` also returns ``encoder_graph_gates`` (`forward_with_gates`)."""
        return self.forward_with_gates(
            output_graph_gates,
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            labels=labels,
            use_cache=use_cache,
            past_key_values=past_key_values,
            **kwargs,
        )


def register_family(config_class: type, base_model_class: type, translation_model_class: type) -> None:
    """Ties both models to the family's config (`from_pretrained` reads `config_class`), tells them which
    classes a saved checkpoint's `auto_map` names (`GraphPreTrainedMixin.save_pretrained`), and registers the
    three for the Auto* factories."""
    names = (config_class.__name__, base_model_class.__name__, translation_model_class.__name__)
    stacks = base_model_class.stack_classes
    for model_class in (stacks.graph_encoder, stacks.graph_decoder, base_model_class, translation_model_class):
        model_class.config_class = config_class
    for model_class in (base_model_class, translation_model_class):
        model_class.remote_code_classes = names
    config_class.register_for_auto_class()
    base_model_class.register_for_auto_class("AutoModel")
    translation_model_class.register_for_auto_class("AutoModelForSeq2SeqLM")


def scaled_word_embedding(embedding_class: type[nn.Module], config) -> nn.Module:
    """A family's scaling token embedding (BART's, M2M100's), as its stacks and base model build it."""
    embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
    return embedding_class(config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale)


def auto_map_for(model_module: str, config_class: str, base_class: str, lm_class: str) -> dict[str, str]:
    """The `auto_map` that lets `trust_remote_code` users load a checkpoint without this package."""
    return {
        "AutoConfig": f"configuration.{config_class}",
        "AutoModel": f"{model_module}.{base_class}",
        "AutoModelForSeq2SeqLM": f"{model_module}.{lm_class}",
    }
