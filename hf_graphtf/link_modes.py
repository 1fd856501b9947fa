"""The attention link's modes (``attention_link_mode``), one record each: what a linked layer hands on to the
next one, and what that allows the kernels (docs/method.md, "Attention link").

Layer n computes ``S_n = A_n + L_{n-1}`` and hands on ``L_n``: its own scores ``A_n`` (``previous``, the
Attention Link paper) or its linked scores ``S_n`` (``cumulative``, a running sum as in RealFormer). Everything
that differs between modes reads the record: the config's allowed values, what the scores kernel and the concat
kernel carry, whether cross-attention may cache its keys joined with the carried ones, and whether autograd may
keep a join as its halves. So a mode is one registration (docs/internals.md, "Adding a link mode"), and a mode
nothing registered is refused where the config is built, never run as another.

This module travels with saved checkpoints (``trust_remote_code``): it imports only the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class LinkMode:
    """One mode: its name, what it carries (``"own"``: ``L_n = A_n``; ``"linked"``: ``L_n = S_n``) and its help."""

    name: str
    carries: Literal["own", "linked"]
    help: str

    def __post_init__(self) -> None:
        if self.carries not in ("own", "linked"):
            raise ValueError(f"link mode {self.name!r}: carries must be 'own' or 'linked'; got {self.carries!r}")

    def carry(self, own: T, linked: T) -> T:
        """What the layer hands on, given its own scores (or queries and keys) and its linked ones."""
        return own if self.carries == "own" else linked

    @property
    def stores_linked_keys(self) -> bool:
        """Whether cross-attention may keep its keys in the KV cache joined with the carried ones: where the carry
        is a layer's own width. A linked carry grows by a layer's width with every layer, and its joined keys
        would be held that wide for the whole `generate`."""
        return self.carries == "own"

    @property
    def keeps_halves(self) -> bool:
        """Whether autograd may keep a join for backward as its two halves (`saved_joins`): where both halves live
        on anyway, as the next layer joins this layer's own queries and keys. A linked carry is the join itself,
        which the next layer's join keeps."""
        return self.carries == "own"


#: the registered modes by name (the config reads a live view: one registered later is allowed too)
LINK_MODES: dict[str, LinkMode] = {}


def register_link_mode(mode: LinkMode) -> LinkMode:
    """Add `mode` to `LINK_MODES`; a name taken already is refused."""
    if mode.name in LINK_MODES:
        raise ValueError(f"link mode {mode.name!r} is registered already")
    LINK_MODES[mode.name] = mode
    return mode


def get_link_mode(name: str) -> LinkMode:
    """The registered mode `name`; another name is refused, naming the registered ones."""
    if name not in LINK_MODES:
        raise ValueError(f"attention_link_mode must be one of {', '.join(map(repr, LINK_MODES))}; got {name!r}.")
    return LINK_MODES[name]


PREVIOUS = register_link_mode(
    LinkMode("previous", "own", "'previous' adds the previous layer's own scores (the Attention Link paper).")
)
CUMULATIVE = register_link_mode(
    LinkMode("cumulative", "linked", "'cumulative' adds its linked scores, a running sum as in RealFormer.")
)

__all__ = ["CUMULATIVE", "LINK_MODES", "PREVIOUS", "LinkMode", "get_link_mode", "register_link_mode"]
