"""Decoding with a static cache, and compiled: the ground compiled translation stands on.

A static cache (``generate(cache_implementation="static")``) must decode what the dynamic cache decodes,
and one decoding step over it must compile as one graph (``torch.compile(fullgraph=True)``: a graph break
is an error) and compute what the eager step computes. The compile here uses the ``eager`` backend: it
traces and checks for graph breaks in seconds, without generating kernels. The default run checks the
decoder link in its most involved form per family; ``-m slow`` the whole matrix.
"""

from __future__ import annotations

import pytest
import torch
from transformers import EncoderDecoderCache, StaticCache

from hf_graphtf.self_check import matrix
from hf_graphtf.transformers_seam import cache_kwargs, compiled_decoding_refusal

#: the default run's cases: the decoder link in its most involved form (cumulative, gated), alone and beside the
#: graph encoder
FAST_CASES = ("al-dec-cum-gate", "graph-gate+al-dec-cum")


def _cases(fast: bool) -> list[tuple[str, str]]:
    return [
        (family, name)
        for family in matrix.FAMILIES
        for name, options in matrix.OPTION_MATRIX.items()
        if matrix.supports(family, options) and ((name in FAST_CASES) == fast)
    ]


def _static_cache(model, decoder_length: int, encoder_length: int) -> EncoderDecoderCache:
    """Self- and cross-attention static caches (each takes the batch size from its first update)."""
    return EncoderDecoderCache(
        StaticCache(config=model.config, max_cache_len=decoder_length),
        StaticCache(config=model.config, max_cache_len=encoder_length),
    )


def _check(family: str, name: str, kernel: str = "auto") -> None:
    model = matrix.tiny_model(family, matrix.OPTION_MATRIX[name], dtype=torch.float32, attention_link_kernel=kernel)
    refusal = compiled_decoding_refusal(model.config.model_type)
    if refusal is not None:  # vanilla Transformers cannot compile this family's decoding on this release
        pytest.skip(refusal)
    input_ids, attention_mask = matrix.source_batch()
    with torch.inference_mode():
        dynamic = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=5)
        static = model.generate(
            input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=5, cache_implementation="static"
        )
    torch.testing.assert_close(static, dynamic, rtol=0, atol=0)

    torch._dynamo.reset()
    encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
    start = torch.full((input_ids.shape[0], 1), model.config.decoder_start_token_id)
    steps = [start, dynamic[:, 1:2], dynamic[:, 2:3]]  # three decoding steps through the cache

    def decode(forward) -> list[torch.Tensor]:
        cache = _static_cache(model, 8, input_ids.shape[1])
        logits = []
        for position, token in enumerate(steps):
            out = forward(
                encoder_outputs=encoder_outputs,
                attention_mask=attention_mask,
                decoder_input_ids=token,
                **cache_kwargs(cache),  # under the installed release's name (5.24 renamed it)
                use_cache=True,
                cache_position=torch.tensor([position]),
            )
            logits.append(out.logits)
        return logits

    with torch.no_grad():
        eager = decode(model.forward)
        compiled = decode(torch.compile(model.forward, fullgraph=True, backend="eager"))  # a graph break raises
    for a, b in zip(compiled, eager, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("family", "name"), _cases(fast=True))
def test_a_static_cache_decodes_as_the_dynamic_one_and_a_step_compiles_whole(family, name):
    _check(family, name)


@pytest.mark.slow
@pytest.mark.parametrize(("family", "name"), _cases(fast=False))
def test_every_option_set_decodes_compiled_as_eager(family, name):
    _check(family, name)


@pytest.mark.parametrize("family", matrix.FAMILIES)
def test_the_concat_kernel_decodes_statically_and_compiles_with_its_cached_linked_keys(family):
    """The concat kernel (a GPU's choice) stores cross-attention keys concatenated with the carried ones in
    the cache (`attention_link.stores_linked_keys`); the static cache must take the wider keys too."""
    _check(family, "al-both-gate", kernel="concat")
