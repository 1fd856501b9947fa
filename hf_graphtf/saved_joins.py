"""Autograd keeps a linked layer's joined queries and keys as their two halves, and joins them again in backward.

The concat kernel of the attention link runs one SDPA call on ``[Q_n | Q_{n-1}]`` and ``[K_n | K_{n-1}]``
(docs/method.md, "The concat identity"). A fused SDPA kernel saves its inputs for backward, so those joins,
twice the width of a layer's own queries and keys, would live from the forward to the backward pass although
both of their halves live then anyway: ``Q_n`` and ``K_n`` go on to the next layer, whose join saves them, and
``Q_{n-1}`` and ``K_{n-1}`` are the previous layer's. Saving the halves instead frees each join as soon as its
SDPA call returns: a linked step then saves what a vanilla one does, for one more join of the queries and one
of the keys per linked layer in backward (recipes/benchmarks/RESULTS.md, "Op counts").

`joins_saved_as_halves` does it with `torch.autograd.graph.saved_tensors_hooks`, so it holds for whichever SDPA
kernel runs and uses that kernel's own backward; a saved view of a join (a kernel may save a transposed one)
comes back with the view's geometry. It steps aside where it cannot help or would get in the way: without
gradients, while compiling (the compiler plans what it saves), and under other saved-tensor hooks, such as
non-reentrant activation checkpointing or offloading, which own the saved tensors there.

This module travels with saved checkpoints (``trust_remote_code``): it imports only torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import NamedTuple

import torch

#: A join and how to make it again from its halves (a function of no arguments holding them).
Join = tuple[torch.Tensor, Callable[[], torch.Tensor]]


class _SavedAsHalves(NamedTuple):
    """What autograd keeps in place of a join or a view of one: the way to join it again, and the view."""

    rejoin: Callable[[], torch.Tensor]
    size: torch.Size
    stride: tuple[int, ...]
    storage_offset: int


def other_hooks_active() -> bool:
    """Whether saved-tensor hooks are in force already (checkpointing, offloading), or disabled (some torch
    transforms refuse new ones). Reads torch's own record of them (`torch._C._autograd`, used by its
    checkpointing and compiler); if a release lacks it or reads it differently, assume hooks are active and keep
    out."""
    autograd = torch._C._autograd
    top = getattr(autograd, "_top_saved_tensors_default_hooks", None)
    enabled = getattr(autograd, "_saved_tensors_hooks_is_enabled", None)
    if top is None or enabled is None:
        return True
    try:
        return not enabled() or top(False) is not None
    except TypeError:  # a release that changed the signature: keep out, as above
        return True


def saves_halves(*tensors: torch.Tensor) -> bool:
    """Whether a call on `tensors` should save joins as halves: gradients flow, nothing compiles, no other
    saved-tensor hooks are in force."""
    return (
        torch.is_grad_enabled()
        and any(tensor.requires_grad for tensor in tensors)
        and not torch.compiler.is_compiling()
        and not other_hooks_active()
    )


@contextlib.contextmanager
def joins_saved_as_halves(joins: list[Join]) -> Iterator[None]:
    """Within the block, a tensor autograd saves that lies in the storage of one of `joins` is kept as that
    join's halves and made again when backward asks for it; every other tensor is saved as usual. The caller
    decides whether to enter at all (`saves_halves`)."""
    storages = {joined.untyped_storage().data_ptr(): rejoin for joined, rejoin in joins if joined.numel()}

    def pack(tensor: torch.Tensor) -> torch.Tensor | _SavedAsHalves:
        rejoin = storages.get(tensor.untyped_storage().data_ptr())
        if rejoin is None:
            return tensor
        return _SavedAsHalves(rejoin, tensor.size(), tensor.stride(), tensor.storage_offset())

    def unpack(saved: torch.Tensor | _SavedAsHalves) -> torch.Tensor:
        if not isinstance(saved, _SavedAsHalves):
            return saved
        return saved.rejoin().as_strided(saved.size, saved.stride, saved.storage_offset)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield
