"""What the benchmark scripts share: model shapes, the variants, models built from config, batches, CLI flags.

Every script compares a variant with vanilla Marian (or BART, or M2M100) of the same shape on the same batch, so
the shapes and the variant list live here, once. Models are built from config with random weights:
throughput and memory do not depend on the values of the weights, and nothing has to be downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import torch

try:
    import hf_graphtf  # noqa: F401  (registers the Auto classes)
except ImportError:  # a checkout without `pip install -e .`: the package is two levels up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import hf_graphtf  # noqa: F401

from hf_graphtf import attention_link, graph_attention
from hf_graphtf.families import FAMILIES
from hf_graphtf.translation.dtype_choice import TRANSLATION_DTYPES, canonical_dtype, check_compilable
from hf_graphtf.translation.dtypes import DTYPE_RECORDS, float_dtype_names
from hf_graphtf.variants import variant_options

PAD, EOS, BOS = 0, 1, 2
FIRST_WORD = 3  # ids below are special tokens


@dataclass(frozen=True)
class Shape:
    """Model and batch size of one benchmark setting."""

    d_model: int
    ffn_dim: int
    heads: int
    encoder_layers: int
    decoder_layers: int
    vocab: int
    batch_size: int
    length: int  # mean sentence length in tokens, source and target

    def describe(self) -> str:
        return (
            f"d {self.d_model}, FFN {self.ffn_dim}, {self.heads} heads, "
            f"{self.encoder_layers}+{self.decoder_layers} layers, vocab {self.vocab}"
        )


#: `paper`: the Transformer-small shape both papers train on IWSLT; `cpu`: a shape that trains quickly on a
#: laptop CPU; `tiny`: for the smoke test only (the numbers mean nothing); `opus-mt`: a pretrained checkpoint's.
SHAPES: dict[str, Shape] = {
    "paper": Shape(512, 1024, 4, 6, 6, vocab=8000, batch_size=32, length=25),
    "cpu": Shape(256, 1024, 4, 3, 3, vocab=8000, batch_size=32, length=25),
    "tiny": Shape(32, 64, 4, 2, 2, vocab=128, batch_size=4, length=8),
    # Helsinki-NLP/opus-mt-es-en's shape (its config.json): the checkpoint a fine-tuning user starts from
    "opus-mt": Shape(512, 2048, 8, 6, 6, vocab=65001, batch_size=32, length=25),
}

#: Paper's measured training speed relative to the Transformer (IWSLT De-En column of its Table 2).
PAPER_RATIOS = {"graph-sum": 0.84, "graph-gate": 0.78, "graph-self_gate": 0.60, "graph-shared+gate": 0.80}
PAPER_RATIOS["graph-half+gate"] = 0.70


@dataclass(frozen=True)
class Variant:
    """One option setting of the graph configs, compared against vanilla of the same shape."""

    name: str
    kind: str  # "al" (attention link), "graph" (graph-group encoder) or "aa" (all options off: noise floor)
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def paper_ratio(self) -> float | None:
        return PAPER_RATIOS.get(self.name)


def _al(mode: str, stacks: str) -> Variant:
    short = {"previous": "prev", "cumulative": "cum"}[mode]
    return _registered(f"al-{short}-{stacks}", "al")


def _registered(name: str, kind: str) -> Variant:
    """A variant under this table's name, with its options from the registry (`hf_graphtf.variants`)."""
    return Variant(name, kind, variant_options(name))


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        _registered("aa", "aa"),
        *(_al(mode, stacks) for mode in ("previous", "cumulative") for stacks in ("encoder", "decoder", "both")),
        _registered("al-prev-both-gate", "al"),
        *(
            _registered(name, "graph")
            for name in ("graph-sum", "graph-gate", "graph-self_gate", "graph-half+gate", "graph-shared+gate")
        ),
    )
}


#: the family every script compares in unless told otherwise
DEFAULT_FAMILY = "marian"


def select_variants(spec: str, family: str = DEFAULT_FAMILY) -> list[Variant]:
    """``all``, ``al``, ``graph``, ``aa`` or a comma-separated list of names (groups may be mixed in).

    For a family without graph-group attention (M2M100: pre-LN), ``all`` means every other variant, and
    naming a graph variant or group is an error that says why.
    """
    graph_ok = FAMILIES[family].supports_graph_attention
    chosen: list[Variant] = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        if item == "all":
            group = [v for v in VARIANTS.values() if graph_ok or v.kind != "graph"]
        elif item in ("al", "graph"):
            group = [v for v in VARIANTS.values() if v.kind == item]
        elif item in VARIANTS:
            group = [VARIANTS[item]]
        else:
            raise SystemExit(f"unknown variant {item!r}; choose from all, al, graph, {', '.join(VARIANTS)}")
        if not graph_ok and any(v.kind == "graph" for v in group):
            raise SystemExit(f"{item!r}: graph-group attention is defined for post-LN families only, not {family!r}")
        chosen += [v for v in group if v not in chosen]
    return chosen


#: the float formats a benchmark builds its models in, from the package's records (`hf_graphtf.translation.dtypes`)
DTYPES = {name: DTYPE_RECORDS[name].torch() for name in float_dtype_names()}


def config_kwargs(shape: Shape, family: str, attn_implementation: str, max_length: int) -> dict[str, Any]:
    """The config fields a vanilla model and its variants share."""
    return dict(
        vocab_size=shape.vocab,
        d_model=shape.d_model,
        encoder_layers=shape.encoder_layers,
        decoder_layers=shape.decoder_layers,
        encoder_attention_heads=shape.heads,
        decoder_attention_heads=shape.heads,
        encoder_ffn_dim=shape.ffn_dim,
        decoder_ffn_dim=shape.ffn_dim,
        max_position_embeddings=max(1024, max_length + 2),
        forced_eos_token_id=None,
        attn_implementation=attn_implementation,
        **FAMILIES[family].special_token_ids(pad=PAD, eos=EOS, bos=BOS),
    )


def build_model(
    variant: Variant | None,
    shape: Shape,
    *,
    family: str = DEFAULT_FAMILY,
    attn_implementation: str = "sdpa",
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    max_length: int = 1024,
    link_kernel: str | None = None,
) -> torch.nn.Module:
    """Vanilla (``variant=None``: the Transformers class itself, the baseline users compare with) or a variant.

    The ``aa`` variant is the graph class with every option off: against vanilla it measures the
    wrapper's overhead and, since it computes the same thing, the noise floor of the measurement.
    `link_kernel` sets ``attention_link_kernel`` of linked variants (None: the package default).
    """
    family_entry = FAMILIES[family]
    kwargs = config_kwargs(shape, family, attn_implementation, max_length)
    torch.manual_seed(seed)
    if variant is None:
        model = family_entry.vanilla_seq2seq_class(family_entry.vanilla_config_class(**kwargs))
    else:
        options = dict(variant.options)
        if link_kernel is not None and variant.kind == "al":
            options["attention_link_kernel"] = link_kernel
        model = family_entry.seq2seq_class(family_entry.config_class(**kwargs, **options))
    return model.to(device=device, dtype=dtype)


def random_batch(
    shape: Shape,
    *,
    batch_size: int | None = None,
    length: int | None = None,
    jitter: float = 0.4,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, torch.Tensor]:
    """Random sentences of realistic, varying lengths (mean `length`, +-`jitter` of it), right-padded.

    Each sentence ends in EOS; padded label positions are -100, so loss and token counts see real
    tokens only. ``jitter=0`` gives every sentence exactly `length` tokens (length-scaling runs).
    """
    batch_size = batch_size or shape.batch_size
    length = length or shape.length
    generator = torch.Generator().manual_seed(seed)

    def side() -> tuple[torch.Tensor, torch.Tensor]:
        low, high = max(2, round(length * (1 - jitter))), max(2, round(length * (1 + jitter)))
        lengths = torch.randint(low, high + 1, (batch_size,), generator=generator)
        ids = torch.randint(FIRST_WORD, shape.vocab, (batch_size, int(lengths.max())), generator=generator)
        positions = torch.arange(ids.shape[1])
        ids[positions == (lengths[:, None] - 1)] = EOS
        mask = positions < lengths[:, None]
        return ids.masked_fill(~mask, PAD), mask.long()

    input_ids, attention_mask = side()
    labels, label_mask = side()
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels.masked_fill(label_mask == 0, -100),
    }
    return {k: v.to(device) for k, v in batch.items()}


def target_tokens(batch: dict[str, torch.Tensor]) -> int:
    """Real (non-pad) target tokens: the unit of training throughput."""
    return int((batch["labels"] != -100).sum())


def add_test_split_args(parser: argparse.ArgumentParser) -> None:
    """The saved model and the split it translates, as the scripts that score a trained model read them."""
    parser.add_argument("--model", default="outputs/quickstart", help="saved model (default: the main job's)")
    parser.add_argument("--corpus", default="data/bible-es-en")
    parser.add_argument("--split", default="test")
    parser.add_argument("--src-lang", default="es")
    parser.add_argument("--tgt-lang", default="en")
    parser.add_argument("--max-sentences", type=int, default=None, help="the first N of the split (default: all)")


def test_split(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The sources and references of `add_test_split_args`' split."""
    from hf_graphtf.data import load_parallel_corpus

    split = load_parallel_corpus(args.corpus, src_lang=args.src_lang, tgt_lang=args.tgt_lang, split=args.split)
    pairs = split["translation"][: args.max_sentences]
    return [pair[args.src_lang] for pair in pairs], [pair[args.tgt_lang] for pair in pairs]


def test_split_text(args: argparse.Namespace, sentences: int, decoding: str) -> str:
    """The page header's line on `add_test_split_args`' split: corpus, size, direction, ``decoding`` (beam,
    length, batches) and the scorer."""
    import sacrebleu

    return (
        f"{args.corpus} {args.split} split, {sentences:,} sentences, {args.src_lang}->{args.tgt_lang}, {decoding}, "
        f"sacreBLEU {sacrebleu.__version__} (BLEU 13a, chrF) against the target side"
    )


def copy_of_model(model: str, prefix: str) -> Path:
    """A copy of a saved model's folder in a new temporary folder (without its checkpoints and packages), for
    building packages without touching the original; the caller removes ``copy.parent``."""
    import shutil
    import tempfile

    copy = Path(tempfile.mkdtemp(prefix=prefix)) / "model"
    shutil.copytree(model, copy, ignore=shutil.ignore_patterns("checkpoint-*", "exported"))
    return copy


def positive_ints(spec: str) -> list[int]:
    """A comma-separated list of positive integers (``"16,32,64"``: beams, threads, lengths, token budgets),
    for argparse's ``type``: anything else is refused by name when the arguments are read."""
    try:
        values = [int(item) for item in spec.split(",") if item.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {spec!r}")
    return values


def translation_dtypes(spec: str) -> list[str]:
    """A comma-separated list of translation formats (``"fp32,int8"``) in the package's spelling, for
    argparse's ``type``: a format the package does not translate in is refused by name when the arguments
    are read, before a model loads."""
    try:
        return [canonical_dtype(mode, TRANSLATION_DTYPES[1:]) for mode in spec.split(",") if mode]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def compiled_formats(spec: str) -> list[str]:
    """``--compiled``'s formats (`translation_dtypes`): int8, whose quantized linears do not compile, is
    refused too."""
    formats = translation_dtypes(spec)
    try:
        for mode in formats:
            check_compilable(mode)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return formats


def exported_formats(spec: str) -> list[str]:
    """``--exported``'s formats (`translation_dtypes`): only those ``hf-graphtf export`` builds."""
    from hf_graphtf.translation.aoti import exportable_dtypes

    formats = translation_dtypes(spec)
    refused = [mode for mode in formats if mode not in exportable_dtypes()]
    if refused:
        raise argparse.ArgumentTypeError(
            f"{', '.join(refused)} does not export; exported formats: {', '.join(exportable_dtypes())}"
        )
    return formats


def add_common_args(parser: argparse.ArgumentParser, *, default_size: str, default_steps: int, default_warmup: int):
    """Flags every script takes."""
    parser.add_argument(
        "--size", choices=sorted(SHAPES), default=default_size, help="model shape (default: %(default)s)"
    )
    parser.add_argument("--family", choices=sorted(FAMILIES), default=DEFAULT_FAMILY)
    parser.add_argument("--variants", default="all", help="all, al, graph, aa, or comma-separated names")
    parser.add_argument("--steps", type=int, default=default_steps, help="measured steps per model (after warm-up)")
    parser.add_argument("--warmup", type=int, default=default_warmup, help="discarded steps per model")
    parser.add_argument("--batch-size", type=int, default=None, help="sentences per batch (default: the size's)")
    parser.add_argument("--length", type=int, default=None, help="mean sentence length (default: the size's)")
    parser.add_argument("--vocab", type=int, default=None, help="vocabulary size (default: the size's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: process CPU time (with --threads 1 on a shared machine)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no tqdm bar on stderr")


def add_kernel_args(parser: argparse.ArgumentParser) -> None:
    """Flags of the scripts that build one model per variant: attention implementation and link kernel."""
    parser.add_argument("--attn-implementation", choices=["sdpa", "eager"], default="sdpa")
    parser.add_argument(
        "--link-kernel", choices=["auto", "scores", "concat"], default=None, help="attention_link_kernel of AL variants"
    )
    parser.add_argument(
        "--graph-path",
        choices=["auto", "fused", "modules"],
        default="auto",
        help="graph layers' group path: the per-device table's choice, fused, or one call per module",
    )
    parser.add_argument(
        "--link-saves",
        choices=["auto", "joins"],
        default="auto",
        help="what a previous-mode link on the concat kernel saves for backward: halves where they help, or joins",
    )


@contextlib.contextmanager
def link_saves(choice: str) -> Iterator[None]:
    """A linked step saves its joins as halves where `saved_joins.saves_halves` says so (``auto``), or keeps the
    joins (``joins``): the measurement of what making them again in backward costs on a device."""
    if choice == "auto":
        yield
        return
    with mock.patch.object(attention_link, "saves_halves", lambda *tensors: False):
        yield


@contextlib.contextmanager
def graph_path(choice: str, device: str) -> Iterator[None]:
    """Graph layers on `device` take the fused group path (``fused``), one call per module (``modules``) or
    what `graph_attention.FUSED_PATH_MEASURED` says (``auto``), so a run can measure the table's entries."""
    if choice == "auto":
        yield
        return
    device_type = torch.device(device).type
    forced = {(device_type, shared): choice == "fused" for shared in (False, True)}
    with mock.patch.dict(graph_attention.FUSED_PATH_MEASURED, forced):
        yield


def resolve_shape(args: argparse.Namespace) -> Shape:
    """The named shape with the batch/length/vocab flags applied."""
    shape = SHAPES[args.size]
    updates = {"batch_size": args.batch_size, "length": args.length, "vocab": args.vocab}
    return Shape(**{**shape.__dict__, **{k: v for k, v in updates.items() if v is not None}})


def set_threads(threads: int | None) -> int:
    """Use all cores unless told otherwise; the count goes in the report header."""
    torch.set_num_threads(threads or os.cpu_count() or 1)
    return torch.get_num_threads()


def synchronizer(device: str):
    """A function that waits for queued kernels, so a timer measures the work and not its launch."""
    if device.startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None
