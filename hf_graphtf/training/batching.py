"""Token-based batching: batches of about N tokens, of sentences of similar length, in shuffled order.

Batches of a fixed number of sentences drawn at random pad every sentence to the longest one in its
batch: on the Bible corpus (verses of 2 to 80+ words) most of such a batch is padding, and a batch of
long verses is several times the work of a batch of short ones. Here, as in fairseq and joeynmt,
the training split is sorted by length once, cut greedily into batches whose padded size (sentences
x longest side) stays within ``max_tokens``, and the order of the batches is shuffled each epoch.
The batches are fixed for the whole run, so every epoch has the same number of steps and a resumed
run sees exactly the batches an uninterrupted one would.

With several processes each takes a disjoint share of every epoch's batches (batch ``k`` goes to
process ``k mod world_size``); the few batches that would leave the processes unequal are dropped
for that epoch. The sampler subclasses Transformers' `BatchRebalanceSampler` only to be treated as
the rank-aware batch sampler it is: the Trainer passes it as ``batch_sampler``, stops accelerate from
sharding it a second time, and calls ``set_epoch`` on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from transformers.trainer_pt_utils import BatchRebalanceSampler


def token_batches(source_lengths: Sequence[int], target_lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped into batches of similar length whose padded size is at most ``max_tokens``.

    The padded size of a batch is its number of sentences times the longest source or target in it.
    Sentences are taken shortest first (ties in corpus order), so batches are deterministic.
    A sentence longer than ``max_tokens`` on its own gets a batch of its own.
    """
    if len(source_lengths) != len(target_lengths):
        raise ValueError(f"{len(source_lengths)} source lengths but {len(target_lengths)} target lengths.")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive number of tokens; got {max_tokens}.")
    longest = [max(s, t) for s, t in zip(source_lengths, target_lengths)]
    order = sorted(range(len(longest)), key=lambda i: (longest[i], i))
    batches: list[list[int]] = []
    batch: list[int] = []
    for index in order:
        # sorted ascending, so this sentence is the longest of the batch it joins
        if batch and (len(batch) + 1) * longest[index] > max_tokens:
            batches.append(batch)
            batch = []
        batch.append(index)
    if batch:
        batches.append(batch)
    return batches


class TokenBatchSampler(BatchRebalanceSampler):
    """Yields this process's token batches (lists of dataset indices), in an order shuffled per epoch."""

    def __init__(
        self,
        source_lengths: Sequence[int],
        target_lengths: Sequence[int],
        max_tokens: int,
        *,
        world_size: int = 1,
        rank: int = 0,
        seed: int = 42,
    ):
        # BatchRebalanceSampler.__init__ is not called: only its type and its set_epoch contract are used.
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}); got {rank}.")
        self.batches = token_batches(source_lengths, target_lengths, max_tokens)
        if len(self.batches) < world_size:
            raise ValueError(
                f"{len(self.batches)} batch(es) of {max_tokens} tokens cannot be shared by {world_size} processes: "
                "lower max_tokens_per_batch or use more training data."
            )
        self.max_tokens = max_tokens
        self.world_size, self.rank, self.seed = world_size, rank, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.batches) // self.world_size

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.batches), generator=generator).tolist()
        mine = order[self.rank :: self.world_size][: len(self)]
        for index in mine:
            yield list(self.batches[index])


__all__ = ["TokenBatchSampler", "token_batches"]
