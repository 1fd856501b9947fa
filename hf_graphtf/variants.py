"""The named variants: one registry from a variant's name to the options it switches on.

The recipes (`recipes/make_configs.py`), the experiment grids, the benchmarks, the self-check's test
matrix, the gentle-start experiment and the GPU scripts all name option bundles; each reads its bundles
from here, so that a name means one thing everywhere. The canonical name is the recipes' and the
experiments' (``al_both``: it is in the committed results rows); the spellings that tables and logs
already committed use (the benchmarks' ``al-prev-both``, the self-check's ``al-both``, the gentle-start
page's ``paper-link``) are aliases and keep working.

Options are stored as the fields that differ from the defaults (`configuration.GRAPH_OPTION_DEFAULTS`),
so two spellings of one bundle (with and without ``attention_link_mode="previous"``) are one variant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .configuration import GRAPH_OPTION_DEFAULTS


@dataclass(frozen=True)
class NamedVariant:
    """A variant: its canonical ``name``, the ``options`` it sets (non-default fields only), what it is
    in a sentence, the other spellings it goes by, and whether the papers define it."""

    name: str
    options: Mapping[str, Any]
    description: str
    aliases: tuple[str, ...] = field(default=())
    from_paper: bool = True


def _variant(name: str, description: str, *aliases: str, from_paper: bool = True, **options: Any) -> NamedVariant:
    return NamedVariant(name, MappingProxyType(normalized(options)), description, aliases, from_paper)


def normalized(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without the fields at their defaults; an unknown field is refused by name."""
    unknown = sorted(set(options) - set(GRAPH_OPTION_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown option fields {unknown}; the options are {sorted(GRAPH_OPTION_DEFAULTS)}")
    return {key: value for key, value in options.items() if GRAPH_OPTION_DEFAULTS[key] != value}


_GRAPH = {"graph_attention": True}
VARIANTS: dict[str, NamedVariant] = {
    v.name: v
    for v in (
        _variant("vanilla", "vanilla Transformer (baseline)", "aa", "no-link"),
        _variant(
            "al_encoder",
            "attention link in the encoder self-attention",
            "al-prev-encoder",
            "al-enc",
            attention_link="encoder",
        ),
        _variant(
            "al_decoder",
            "attention link in the decoder self- and cross-attention",
            "al-prev-decoder",
            "al-dec",
            attention_link="decoder",
        ),
        _variant(
            "al_both",
            "attention link in the encoder and the decoder",
            "al-prev-both",
            "al-both",
            "paper-link",
            attention_link="both",
        ),
        _variant(
            "al_encoder_cumulative",
            "cumulative attention link in the encoder",
            "al-cum-encoder",
            "al-enc-cum",
            attention_link="encoder",
            attention_link_mode="cumulative",
        ),
        _variant(
            "al_decoder_cumulative",
            "cumulative attention link in the decoder",
            "al-cum-decoder",
            attention_link="decoder",
            attention_link_mode="cumulative",
        ),
        _variant(
            "al_both_cumulative",
            "cumulative attention link in the encoder and the decoder",
            "al-cum-both",
            "al-both-cum",
            attention_link="both",
            attention_link_mode="cumulative",
        ),
        _variant(
            "al_both_gate",
            "attention link in the encoder and the decoder, learned per-head gate starting at zero (not from the "
            "paper)",
            "al-prev-both-gate",
            "al-both-gate",
            "gated-link",
            from_paper=False,
            attention_link="both",
            attention_link_gate="learned",
        ),
        _variant(
            "al_decoder_cumulative_gate",
            "cumulative attention link in the decoder, learned per-head gate",
            "al-dec-cum-gate",
            from_paper=False,
            attention_link="decoder",
            attention_link_mode="cumulative",
            attention_link_gate="learned",
        ),
        _variant("graph_sum", "graph-group encoder, groups summed", "graph-sum", **_GRAPH, graph_fusion="sum"),
        _variant("graph_gate", "graph-group encoder, sigmoid gate", "graph-gate", **_GRAPH, graph_fusion="gate"),
        _variant(
            "graph_self_gate",
            "graph-group encoder, self-attention gate over the groups",
            "graph-self_gate",
            **_GRAPH,
            graph_fusion="self_gate",
        ),
        _variant(
            "graph_half_gate",
            "graph-group encoder in d_model/2, sigmoid gate",
            "graph-half+gate",
            "graph-half-gate",
            **_GRAPH,
            graph_half_dim=True,
        ),
        _variant(
            "graph_shared_gate",
            "graph-group encoder, one attention module for the three groups, sigmoid gate",
            "graph-shared+gate",
            "graph-shared-gate",
            **_GRAPH,
            graph_shared_qkv=True,
        ),
        _variant(
            "graph_half_shared_self_gate",
            "graph-group encoder in d_model/2, one attention module, self-attention gate",
            "graph-half-shared-self_gate",
            **_GRAPH,
            graph_half_dim=True,
            graph_shared_qkv=True,
            graph_fusion="self_gate",
        ),
        _variant(
            "graph_gate_al_decoder",
            "graph-group encoder with the attention link in the decoder",
            **_GRAPH,
            attention_link="decoder",
        ),
        _variant(
            "graph_gate_al_decoder_cumulative",
            "graph-group encoder with the cumulative attention link in the decoder",
            "graph-gate+al-dec-cum",
            **_GRAPH,
            attention_link="decoder",
            attention_link_mode="cumulative",
        ),
    )
}

#: every spelling, canonical names and aliases, to its canonical name
_NAMES: dict[str, str] = {}
for _entry in VARIANTS.values():
    for _spelling in (_entry.name, *_entry.aliases):
        if _spelling in _NAMES:
            raise RuntimeError(f"variant name {_spelling!r} is given twice")
        _NAMES[_spelling] = _entry.name


def variant(name: str) -> NamedVariant:
    """The variant a name or alias stands for; an unknown name is refused, listing the canonical ones."""
    try:
        return VARIANTS[_NAMES[name]]
    except KeyError:
        raise ValueError(f"unknown variant {name!r}; the variants are {', '.join(VARIANTS)}") from None


def variant_options(name: str) -> dict[str, Any]:
    """The options of the variant ``name`` (or an alias), as a fresh dict."""
    return dict(variant(name).options)


def variant_named(options: Mapping[str, Any]) -> NamedVariant | None:
    """The variant whose options these are (default fields ignored), or None for a bundle it lacks."""
    wanted = normalized(options)
    return next((entry for entry in VARIANTS.values() if dict(entry.options) == wanted), None)


__all__ = ["VARIANTS", "NamedVariant", "normalized", "variant", "variant_named", "variant_options"]
