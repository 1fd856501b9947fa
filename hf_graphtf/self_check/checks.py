"""The checks of `hf-graphtf check`, one function each, on one `Case` (a family and option set on a device and
dtype): vanilla equivalence, the method re-computation, cached against uncached generation, the save/load
round trip, and the refusal of an option set a family does not define. Each returns the detail line it
prints, or raises `CheckFailed`; `runner` runs them and prints the lines."""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass

import torch

from ..families import FAMILIES as MODEL_FAMILIES
from ..transformers_seam import cache_kwargs, output_cache
from ..translation.dtypes import DTYPE_RECORDS, LiveMapping, self_checked_names
from . import reference
from .matrix import OPTION_MATRIX, source_batch, target_batch, tiny_config, tiny_model
from .tolerance import tolerance

#: torch's name -> dtype of each format the self-check runs in (`TranslationDtype.self_checked`)
DTYPES = LiveMapping(
    lambda: {DTYPE_RECORDS[name].torch_dtype: DTYPE_RECORDS[name].torch() for name in self_checked_names()}
)
_MAX_NEW_TOKENS = 8


class CheckFailed(AssertionError):
    """A check found the model computing something else than it should."""


@dataclass(frozen=True)
class Case:
    """One family and option set on one device and dtype."""

    family: str
    options: str
    device: str
    dtype: torch.dtype

    def model(self, **overrides) -> torch.nn.Module:
        return tiny_model(
            self.family, OPTION_MATRIX[self.options], device=self.device, dtype=self.dtype,
            attn_implementation="sdpa", **overrides,
        )  # fmt: skip


def _logits(model, device) -> torch.Tensor:
    input_ids, attention_mask = source_batch(device)
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch(device)).logits


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str) -> str:
    try:
        torch.testing.assert_close(got.to(torch.float64), want.to(torch.float64), **tolerance(dtype))
    except AssertionError as error:
        raise CheckFailed(f"{what}: {str(error).splitlines()[0]}") from None
    return f"max |diff| {(got.to(torch.float64) - want.to(torch.float64)).abs().max().item():.1e}"


def check_vanilla(case: Case) -> str:
    """Options off: the same logits and the same beam search as the vanilla class with the same weights."""
    graph = case.model()
    vanilla_class = MODEL_FAMILIES[case.family].vanilla_seq2seq_class
    vanilla = vanilla_class(graph.config).to(case.device, case.dtype).eval()
    vanilla.generation_config = graph.generation_config  # (M2M100: the forced target-language token)
    vanilla.load_state_dict(graph.state_dict())
    if not torch.equal(_logits(graph, case.device), _logits(vanilla, case.device)):
        raise CheckFailed(f"logits differ from {vanilla_class.__name__}'s with the same weights")
    input_ids, attention_mask = source_batch(case.device)
    gen = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=_MAX_NEW_TOKENS, num_beams=3)
    if not torch.equal(graph.generate(**gen), vanilla.generate(**gen)):
        raise CheckFailed(f"beam search differs from {vanilla_class.__name__}'s")
    return f"identical to {vanilla_class.__name__}"


def spec_pairs(model, input_ids, attention_mask, decoder_input_ids) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(what, the model's output, the re-computation of docs/method.md) for the encoder states (real
    tokens), each graph gate and the logits; the re-computation in float64 on a copy of the same weights."""
    exact = model if next(model.parameters()).dtype == torch.float64 else copy.deepcopy(model).to(torch.float64)
    with torch.no_grad():
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            output_graph_gates=True,
        )
        x, y = reference.embeddings(exact, input_ids, decoder_input_ids)
        encoder_out, _, gates = reference.encoder(exact, x, attention_mask)
        logits, _, _ = reference.decoder_logits(exact, y, encoder_out, attention_mask)
    keep = attention_mask.bool()
    expected_gates = [gate for gate in gates if gate is not None]
    if len(out.encoder_graph_gates) != len(expected_gates):
        raise CheckFailed(f"{len(out.encoder_graph_gates)} graph gates, docs/method.md gives {len(expected_gates)}")
    return [
        ("encoder states", out.encoder_last_hidden_state[keep], encoder_out[keep]),
        *(("graph gates", got[keep], want[keep]) for got, want in zip(out.encoder_graph_gates, expected_gates)),
        ("logits", out.logits, logits),
    ]


def check_spec(case: Case) -> str:
    """Encoder states, logits and graph gates against docs/method.md's formulas, re-computed in float64."""
    input_ids, attention_mask = source_batch(case.device)
    pairs = spec_pairs(case.model(), input_ids, attention_mask, target_batch(case.device))
    return [_close(got, want, case.dtype, what) for what, got, want in pairs][-1]


def _uncached_logits(model, input_ids, attention_mask, sequences) -> torch.Tensor:
    """The logits of one uncached forward over ``sequences`` (all but the last token fed)."""
    with torch.no_grad():
        return model(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=sequences[:, :-1], use_cache=False
        ).logits


def _stepwise_logits(model, input_ids, attention_mask, sequences) -> torch.Tensor:
    """The logits of feeding ``sequences`` one token at a time through the KV cache, as generation does, the
    cache passed and read under the installed release's name (the old one warns from 5.24.0 on)."""
    with torch.no_grad():
        encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
        past, steps = None, []
        for position in range(sequences.shape[1] - 1):
            out = model(
                encoder_outputs=encoder_outputs,
                attention_mask=attention_mask,
                decoder_input_ids=sequences[:, position : position + 1],
                **cache_kwargs(past),
                use_cache=True,
            )
            past = output_cache(out)
            steps.append(out.logits[:, -1])
    return torch.stack(steps, dim=1)


def _first_divergence_gap(cached_logits: torch.Tensor, cached: torch.Tensor, uncached: torch.Tensor) -> float:
    """Greedy decodes that part: the largest gap, over the rows that part, between the log-probabilities of the
    two tokens chosen at the first position where they differ, from ``cached_logits`` (one uncached forward
    over ``cached``: a causal decoder's logits there see only the prefix both decodes share). Rounding can
    only decide a near-tie, so a gap beyond the dtype's tolerance is a real difference."""
    gap = 0.0
    for row in range(cached.shape[0]):
        differs = (cached[row] != uncached[row]).nonzero()
        if len(differs) == 0:
            continue
        position = int(differs[0])
        log_probs = torch.log_softmax(cached_logits[row, position - 1].to(torch.float64), dim=-1)
        gap = max(gap, (log_probs[cached[row, position]] - log_probs[uncached[row, position]]).abs().item())
    return gap


def check_cached(case: Case, num_beams: int) -> str:
    """Generation with the KV cache against generation without it.

    In every dtype, the cache must compute what an uncached forward computes: fed one token at a time through
    the cache, each generated sequence gets the logits of one uncached forward over it, to the dtype's
    tolerance (with greedy search, also the step logits `generate` reports). In float32/float64 the sequences
    must then be equal. In bfloat16 two decodes may part where rounding decides a near-tie, after which their
    continuations are different sentences that score differently; there the logits check above is what tells
    a cache fault from rounding, and with greedy search the two tokens where the decodes first part must be
    a near-tie (their log-probabilities within the tolerance under one uncached forward)."""
    model = case.model()
    input_ids, attention_mask = source_batch(case.device)
    gen = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=_MAX_NEW_TOKENS, num_beams=num_beams)
    cached = model.generate(**gen, use_cache=True, return_dict_in_generate=True, output_logits=True)
    uncached = model.generate(**gen, use_cache=False)
    if cached.sequences.shape[1] <= 3:
        raise CheckFailed("generation stopped too early to compare")
    if cached.sequences.shape != uncached.shape:  # one decode ended (every row at EOS) before the other
        pad = model.generation_config.pad_token_id
        if pad is None:
            pad = model.config.pad_token_id
        length = max(cached.sequences.shape[1], uncached.shape[1])
        cached.sequences, uncached = (
            torch.nn.functional.pad(s, (0, length - s.shape[1]), value=pad) for s in (cached.sequences, uncached)
        )
    sequences = [cached.sequences]
    if not torch.equal(cached.sequences, uncached):
        if case.dtype != torch.bfloat16:
            raise CheckFailed(f"cached {cached.sequences.tolist()} != uncached {uncached.tolist()}")
        sequences.append(uncached)
    # generate() hands its step logits on in float32 whatever the model's dtype
    precision = torch.float32 if case.dtype == torch.float64 else case.dtype
    full_logits = [_uncached_logits(model, input_ids, attention_mask, sequence) for sequence in sequences]
    for sequence, full in zip(sequences, full_logits):
        detail = _close(
            _stepwise_logits(model, input_ids, attention_mask, sequence), full, case.dtype,
            "logits fed through the cache vs one uncached forward",
        )  # fmt: skip
        if num_beams == 1 and sequence is cached.sequences:
            step_logits = torch.stack(cached.logits, dim=1)  # (the steps generate took, before any padding above)
            detail = _close(
                step_logits, full[:, : step_logits.shape[1]], precision, "cached step logits vs uncached logits"
            )
    if len(sequences) == 1:
        return f"same sequences, step logits {detail}"
    if num_beams == 1:
        gap = _first_divergence_gap(full_logits[0], cached.sequences, uncached)
        if gap > tolerance(case.dtype)["atol"]:
            raise CheckFailed(
                f"greedy decodes part where the chosen tokens' log-probabilities differ by {gap:.2f}, beyond "
                f"{case.dtype}'s {tolerance(case.dtype)['atol']}: not a near-tie"
            )
        return f"sequences part at a bfloat16 near-tie (gap {gap:.2f}); logits through the cache {detail}"
    return f"sequences part (bfloat16 rounding); logits through the cache equal uncached ones, {detail}"


def check_save_load(case: Case) -> str:
    """`save_pretrained`, then `AutoModelForSeq2SeqLM.from_pretrained`: same class, same logits."""
    from transformers import AutoModelForSeq2SeqLM

    model = case.model()
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        loaded = AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=case.dtype).to(case.device).eval()
    if type(loaded) is not type(model):
        raise CheckFailed(f"reloaded as {type(loaded).__name__}, saved as {type(model).__name__}")
    return _close(_logits(loaded, case.device), _logits(model, case.device), case.dtype, "reloaded logits")


def check_refused(case: Case) -> str:
    """An option set the family does not define (graph-group attention on a pre-LN family) is refused when
    the config is made, naming the field, rather than built into a model nobody defined."""
    try:
        tiny_config(case.family, OPTION_MATRIX[case.options])
    except ValueError as error:
        if "graph_attention" not in str(error):
            raise CheckFailed(f"refused for another reason: {error}") from error
        return "refused at config time, naming graph_attention"
    raise CheckFailed("built, though the family does not define it")


__all__ = [
    "DTYPES", "Case", "CheckFailed", "check_cached", "check_refused", "check_save_load", "check_spec",
    "check_vanilla", "spec_pairs",
]  # fmt: skip
