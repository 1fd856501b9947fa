"""Which speed flags make a CPU grid run cheaper at equal quality: fp32 eager, bf16 autocast, torch.compile.

    python recipes/benchmarks/speed_flags.py                                  # the grid's shape, 400 steps
    python recipes/benchmarks/speed_flags.py --modes fp32,bf16 --steps 200 --threads 1
    python recipes/benchmarks/speed_flags.py --modes fp32,bf16,bf16-eager --dropout 0.4   # the attention path
    python recipes/benchmarks/speed_flags.py --json recipes/benchmarks/speed_flags.json   # also as JSON
    python recipes/benchmarks/speed_flags.py --modes fp32,bf16 --profile-steps 20         # where a step goes
    python recipes/benchmarks/speed_flags.py --modes fp32,bf16,bf16-eager --attention-link both  # the link
    python recipes/benchmarks/speed_flags.py --modes fp32,bf16,bf16-eager --recipe RECIPE.yaml   # a variant's model

One process trains one model per mode from the same initial weights on the same real batches (Bible
es-en ``train_10k``, token batches of 1,200 as one process of a grid run gets them, the grid's
optimizer and schedule), interleaved step by step, so that every mode sees the same machine load. It
reports each mode's training throughput (median seconds per step over the measured steps, and the
ratio to fp32 of each step's pair), the validation BLEU of each model every ``--eval-every`` steps
(greedy, on a fixed validation subset, length-sorted batches), and what one evaluation costs next to
the training steps between two evaluations. The first steps of a compiled mode include its
compilation: they are reported apart ("compile seconds") and left out of the medians.

bf16 is autocast on the CPU (weights and optimizer in fp32): fast only where the CPU has bf16
instructions (``avx512_bf16``/AMX); the header records whether this one has them.

``--profile-steps N`` then trains N more steps of every mode under ``torch.profiler`` and says which share
of a step's operator time goes to dropout's mask draw (``aten::bernoulli_``), to the attention kernels'
backward and to the matrix products: on CPUs that are not Intel's, torch draws dropout masks one element at
a time (its vectorised MKL draw is taken on Intel CPUs only), which makes the mask draw a visible part of a
small model's step at the grids' dropout.

``--recipe`` takes the model's options (attention link, graph attention: the fields of
``hf_graphtf.configuration.GRAPH_OPTIONS``) from a recipe, the grid variant's own file; the shape stays the
CPU grids'.

``--json`` also writes the ratios with the host they were measured on: the experiment report reads
``recipes/benchmarks/speed_flags.json`` to say what a converged run costs without the speed flags.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
from benchmark_page import header, ratio, run_start, table
from common import set_threads
from tqdm import tqdm
from transformers import AutoModelForSeq2SeqLM, get_inverse_sqrt_schedule

from hf_graphtf import GraphMarianConfig
from hf_graphtf.configuration import ATTENTION_LINK_CHOICES, GRAPH_OPTION_DEFAULTS
from hf_graphtf.data import load_parallel_corpus
from hf_graphtf.machine import float_fingerprint
from hf_graphtf.scoring import corpus_scores
from hf_graphtf.tokenization import train_joint_tokenizer
from hf_graphtf.training import load_recipe
from hf_graphtf.training.tooling import cpu_has_bf16, token_batches

REPO_ROOT = Path(__file__).resolve().parents[2]
#: "-eager" runs the model with eager attention instead of SDPA (CPU flash attention's bf16 backward is slow
#: on some hosts)
MODES = ("fp32", "bf16", "bf16-eager", "fp32-eager", "compile", "compile+bf16")


@dataclass
class Mode:
    """One way of running the same model: its own copy, optimizer, schedule and timings."""

    name: str
    model: torch.nn.Module
    step_module: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    seconds: list[float] = field(default_factory=list)
    bleu: dict[int, float] = field(default_factory=dict)
    eval_seconds: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)

    @property
    def bf16(self) -> bool:
        return "bf16" in self.name

    def autocast(self):
        return torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else nullcontext()


def build_modes(names: list[str], config: GraphMarianConfig, seed: int, lr: float, warmup: int) -> list[Mode]:
    modes = []
    for name in names:
        torch.manual_seed(seed)
        attention = "eager" if name.endswith("-eager") else "sdpa"
        # a copy each: from_config keeps the config it is given, and the kernel is set on it, so one shared
        # config would run every mode with the last mode's kernel
        model = AutoModelForSeq2SeqLM.from_config(copy.deepcopy(config), attn_implementation=attention).train()
        step_module = torch.compile(model, dynamic=True) if name.startswith("compile") else model
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
        modes.append(Mode(name, model, step_module, optimizer, get_inverse_sqrt_schedule(optimizer, warmup)))
    return modes


def train_step(mode: Mode, batch: dict[str, torch.Tensor], label_smoothing: float) -> float:
    """One optimisation step as the Trainer takes it: label-smoothed loss, clipping at 1.0, AdamW."""
    started = time.perf_counter()
    with mode.autocast():
        logits = mode.step_module(**batch).logits
    loss = torch.nn.functional.cross_entropy(
        logits.float().view(-1, logits.size(-1)),
        batch["labels"].view(-1),
        ignore_index=-100,
        label_smoothing=label_smoothing,
    )
    loss.backward()
    torch.nn.utils.clip_grad_norm_(mode.model.parameters(), 1.0)
    mode.optimizer.step()
    mode.scheduler.step()
    mode.optimizer.zero_grad(set_to_none=True)
    mode.losses.append(loss.item())
    return time.perf_counter() - started


#: operator name -> what it is part of, for the profile's shares; self time of every other operator is "other"
PROFILE_GROUPS = {
    "dropout mask draw": ("aten::bernoulli_",),
    "attention backward": (
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
        "aten::_flash_attention_backward",
        "SoftmaxBackward",
        "aten::_softmax_backward_data",
    ),
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear"),
}


def profile_shares(mode: Mode, batches: list[dict[str, torch.Tensor]], seed: int) -> dict[str, float]:
    """Milliseconds per step and each ``PROFILE_GROUPS`` share of the operators' self CPU time, over ``batches``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for step, batch in enumerate(batches):
            torch.manual_seed(seed * 100_003 + 1_000_000 + step)
            train_step(mode, batch, label_smoothing=0.1)
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    shares = {}
    for group, names in PROFILE_GROUPS.items():
        own = sum(event.self_cpu_time_total for event in events if event.key.startswith(names))
        shares[group] = round(own / total, 4) if total else 0.0
    shares["other"] = round(1 - sum(shares.values()), 4)
    shares["ms_per_step"] = round(total / 1000 / max(len(batches), 1), 1)
    return shares


def collate(pairs: list[tuple[list[int], list[int]]], pad: int, decoder_start: int) -> dict[str, torch.Tensor]:
    """Right-padded source ids, mask, labels (-100 in padding) and the shifted decoder inputs."""
    src_len = max(len(s) for s, _ in pairs)
    tgt_len = max(len(t) for _, t in pairs)
    input_ids = torch.full((len(pairs), src_len), pad)
    labels = torch.full((len(pairs), tgt_len), -100)
    for row, (source, target) in enumerate(pairs):
        input_ids[row, : len(source)] = torch.tensor(source)
        labels[row, : len(target)] = torch.tensor(target)
    decoder_input_ids = torch.full_like(labels, pad)
    decoder_input_ids[:, 0] = decoder_start
    decoder_input_ids[:, 1:] = labels[:, :-1].masked_fill(labels[:, :-1] == -100, pad)
    return {
        "input_ids": input_ids,
        "attention_mask": (input_ids != pad).long(),
        "decoder_input_ids": decoder_input_ids,
        "labels": labels,
    }


def validation_bleu(mode: Mode, tokenizer, sources: list[str], references: list[str], batch_size: int) -> float:
    """Greedy translations of the validation subset (sorted by length, put back in order), corpus BLEU."""
    started = time.perf_counter()
    model = mode.model.eval()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    hypotheses = [""] * len(sources)
    with torch.no_grad(), mode.autocast():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            encoded = tokenizer([sources[i] for i in chunk], return_tensors="pt", padding=True)
            output = model.generate(**encoded, num_beams=1, max_new_tokens=128)
            for i, text in zip(chunk, tokenizer.batch_decode(output, skip_special_tokens=True)):
                hypotheses[i] = text.strip()
    model.train()
    mode.eval_seconds.append(time.perf_counter() - started)
    return corpus_scores(hypotheses, [[reference] for reference in references])["bleu"]


def describe(options: dict) -> str:
    """The options that differ from vanilla, as ``name value`` pairs (``attention_link none`` for vanilla)."""
    changed = {name: value for name, value in options.items() if GRAPH_OPTION_DEFAULTS.get(name) != value}
    return ", ".join(f"{name} {value}" for name, value in changed.items()) or "attention_link none"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(REPO_ROOT / "data" / "bible-es-en"))
    parser.add_argument("--train-split", default="train_10k")
    parser.add_argument("--modes", default="fp32,bf16,compile", help=f"comma-separated, from {MODES}")
    parser.add_argument("--steps", type=int, default=400, help="training steps of every mode")
    parser.add_argument("--compile-steps", type=int, default=3, help="first steps of a compiled mode not timed")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--eval-samples", type=int, default=500, help="validation sentences, spread over the split")
    parser.add_argument("--max-tokens", type=int, default=1200, help="padded tokens per batch (one process's)")
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a grid run: 1 per process)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.1, help="residual dropout (the converged grid's: 0.4)")
    parser.add_argument(
        "--attention-link",
        default="none",
        choices=ATTENTION_LINK_CHOICES,
        help="the model's attention_link (the converged grid's al_both: both); vanilla by default",
    )
    parser.add_argument(
        "--recipe", type=Path, help="take the model's options from this recipe (a grid variant's); vanilla by default"
    )
    parser.add_argument("--profile-steps", type=int, default=0, help="then profile this many steps of every mode")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the measurements to this JSON file")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.modes.split(",")]
    unknown = [name for name in names if name not in MODES]
    if unknown or "fp32" not in names:
        parser.error(f"--modes takes names from {MODES} and must include fp32 (the reference); got {unknown or names}")
    options = {"attention_link": args.attention_link}
    if args.recipe is not None:
        if args.attention_link != "none":
            parser.error("--attention-link and --recipe both set the model's options: give one")
        options = {name: value for name, value in load_recipe(args.recipe).items() if name in GRAPH_OPTION_DEFAULTS}
    start = run_start()
    threads = set_threads(args.threads)

    train = load_parallel_corpus(args.corpus, src_lang="es", tgt_lang="en", split=args.train_split)
    valid = load_parallel_corpus(args.corpus, src_lang="es", tgt_lang="en", split="valid")
    tokenizer = train_joint_tokenizer(train, src_lang="es", tgt_lang="en", vocab_size=args.vocab, show_progress=False)
    sources = [pair["es"] for pair in train["translation"]]
    targets = [pair["en"] for pair in train["translation"]]
    source_ids = tokenizer(sources, max_length=256, truncation=True)["input_ids"]
    target_ids = tokenizer(text_target=targets, max_length=256, truncation=True)["input_ids"]
    batches = token_batches([len(s) for s in source_ids], [len(t) for t in target_ids], args.max_tokens)
    order = torch.randperm(len(batches), generator=torch.Generator().manual_seed(args.seed)).tolist()
    spread = [i * len(valid) // args.eval_samples for i in range(min(args.eval_samples, len(valid)))]
    valid_sources = [valid[i]["translation"]["es"] for i in spread]
    valid_references = [valid[i]["translation"]["en"] for i in spread]

    config = GraphMarianConfig(
        vocab_size=len(tokenizer),
        d_model=256,
        encoder_layers=3,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=1024,
        decoder_ffn_dim=1024,
        dropout=args.dropout,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
        scale_embedding=True,
        **options,
    )
    modes = build_modes(names, config, args.seed, lr=1e-3, warmup=200)
    compile_seconds: dict[str, float] = {}
    tokens = []
    bar = tqdm(total=args.steps, file=sys.stderr, disable=args.no_progress, desc="steps")
    for step in range(1, args.steps + 1):
        indices = batches[order[(step - 1) % len(order)]]
        batch = collate(
            [(source_ids[i], target_ids[i]) for i in indices], tokenizer.pad_token_id, tokenizer.pad_token_id
        )
        tokens.append(int((batch["labels"] != -100).sum()))
        ordered = modes if step % 2 else modes[::-1]  # alternate the order: a load ramp hits every mode alike
        for mode in ordered:
            torch.manual_seed(args.seed * 100_003 + step)  # the same dropout masks draw for every mode
            seconds = train_step(mode, batch, label_smoothing=0.1)
            if mode.name.startswith("compile") and step <= args.compile_steps:
                compile_seconds[mode.name] = compile_seconds.get(mode.name, 0.0) + seconds
                seconds = math.nan
            mode.seconds.append(seconds)
        if step % args.eval_every == 0 or step == args.steps:
            for mode in modes:
                mode.bleu[step] = validation_bleu(mode, tokenizer, valid_sources, valid_references, batch_size=64)
        bar.update()
    bar.close()

    reference = modes[0]
    measured = [i for i in range(args.steps) if all(not math.isnan(mode.seconds[i]) for mode in modes)]
    eval_steps = sorted(reference.bleu)
    rows = []
    measurements = {}
    for mode in modes:
        median = statistics.median(mode.seconds[i] for i in measured)
        ratios = [reference.seconds[i] / mode.seconds[i] for i in measured]
        quartiles = statistics.quantiles(ratios, n=4)
        train_between_evals = median * args.eval_every
        eval_share = statistics.median(mode.eval_seconds) / (statistics.median(mode.eval_seconds) + train_between_evals)
        measurements[mode.name] = {
            "speed_vs_fp32": round(statistics.median(ratios), 4),
            "speed_vs_fp32_half_iqr": round((quartiles[2] - quartiles[0]) / 2, 4),
            "compile_seconds": round(compile_seconds.get(mode.name, 0.0), 1),
            "valid_bleu": {str(step): mode.bleu[step] for step in eval_steps},
            "train_loss_last_50": round(statistics.mean(mode.losses[-50:]), 4),
            "evaluation_seconds": round(statistics.median(mode.eval_seconds), 2),
            "attn_implementation": mode.model.config._attn_implementation,  # as the model ran it, at the end
        }
        rows.append(
            [
                mode.name,
                f"{statistics.median(tokens[i] for i in measured) / median:,.0f}",
                ratio(statistics.median(ratios), (quartiles[2] - quartiles[0]) / 2),
                f"{compile_seconds.get(mode.name, 0.0):.0f}",
                " / ".join(f"{mode.bleu[s]:.2f}" for s in eval_steps),
                f"{statistics.mean(mode.losses[-50:]):.3f}",
                f"{statistics.median(mode.eval_seconds):.1f} s ({eval_share:.0%})",
            ]
        )
    settings = {
        "model": "Marian, d 256, FFN 1024, 4 heads, 3+3 layers, vocab "
        f"{len(tokenizer)}, dropout {args.dropout}, {describe(options)}, sdpa unless the mode says "
        "eager (the CPU grids' shape)",
        "CPU bf16 instructions": "yes (avx512_bf16/amx)" if cpu_has_bf16() else "no (AVX2/AVX-512 without bf16)",
        "float fingerprint": float_fingerprint(),
        "training": f"{args.train_split}, token batches of {args.max_tokens}, AdamW (0.9, 0.98) lr 1e-3, inverse-sqrt "
        f"after 200 warm-up steps, label smoothing 0.1, clipping 1.0, seed {args.seed}, {args.steps} steps per mode, "
        f"interleaved; threads {threads}",
        "validation": f"{len(valid_sources)} sentences spread over the split, greedy, batches of 64 sorted by length",
        "speed": f"median over the {len(measured)} steps every mode timed (compiled modes' first {args.compile_steps} "
        "left out); ratio: fp32 seconds / mode seconds of the same step, median ± half the IQR",
    }
    print(header("Speed flags on the CPU grid's shape", settings, "cpu", start))
    print()
    columns = ["mode", "target tok/s", "speed vs fp32", "compile s", f"valid BLEU at {'/'.join(map(str, eval_steps))}"]
    columns += ["train loss (last 50)", f"one evaluation (share of {args.eval_every} steps)"]
    print(table(columns, rows))
    profiles = {}
    if args.profile_steps:
        extra = [order[(args.steps + i) % len(order)] for i in range(args.profile_steps)]
        profile_batches = [
            collate(
                [(source_ids[i], target_ids[i]) for i in batches[b]], tokenizer.pad_token_id, tokenizer.pad_token_id
            )
            for b in extra
        ]
        profiles = {mode.name: profile_shares(mode, profile_batches, args.seed) for mode in modes}
        groups = [*PROFILE_GROUPS, "other"]
        print()
        print(
            f"Where a step's operator time goes ({args.profile_steps} more steps of each mode, torch.profiler, "
            "self CPU time):"
        )
        print()
        profile_rows = [
            [name, f"{shares['ms_per_step']:,.0f}", *(f"{shares[group]:.1%}" for group in groups)]
            for name, shares in profiles.items()
        ]
        print(table(["mode", "operator ms a step", *groups], profile_rows))
    if args.json:
        arguments = argv if argv is not None else sys.argv[1:]
        record = {
            "command": "python recipes/benchmarks/speed_flags.py " + " ".join(arguments),
            "date": f"{start.time:%Y-%m-%d %H:%M} UTC",
            "package": start.revision,
            "cpu_bf16": cpu_has_bf16(),
            "float_fingerprint": float_fingerprint(),
            "threads": threads,
            "attention_link": config.attention_link,
            "options": {name: getattr(config, name) for name in GRAPH_OPTION_DEFAULTS},
            "steps": args.steps,
            "modes": measurements,
        }
        if profiles:
            record["profile"] = profiles
        args.json.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
