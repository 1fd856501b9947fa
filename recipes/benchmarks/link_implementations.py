"""Attention link kernels against vanilla: score sum and head-dim concat, under eager and sdpa.

    python recipes/benchmarks/link_implementations.py                    # cpu shape, all six AL variants
    python recipes/benchmarks/link_implementations.py --size paper --variants al-prev-both --device cuda

Per variant these models run interleaved on the same batch: vanilla eager, vanilla sdpa, the linked
model under eager (score sum), under sdpa with ``attention_link_kernel="scores"`` and with
``"concat"`` (SDPA on queries and keys concatenated along the head dimension), and, off CPU, with
``"auto"`` (the default; on CPU "auto" is the score sum, so that column repeats it). Each is compared
with vanilla of the same implementation (its own cost) and with vanilla sdpa (the Transformers
default, what a user would otherwise run), so the fastest kernel can be the default per device.
Metrics: training throughput (forward + backward + AdamW), peak training memory (lower is better)
and greedy generation throughput with the KV cache. Targets for the default (``auto``) against
vanilla sdpa: >= 0.97x training, >= 0.95x generation, <= 1.05x memory.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from benchmark_page import header, megabytes, ratio, run_start, table, verdict
from common import (
    DTYPES,
    Variant,
    add_common_args,
    build_model,
    random_batch,
    resolve_shape,
    select_variants,
    set_threads,
    synchronizer,
    target_tokens,
)
from generation_throughput import generator
from measure import CLOCK_TEXT, Timing, interleaved, peak_memory_bytes
from tqdm import tqdm
from train_throughput import TrainStep

TARGETS = {"train tok/s": 0.97, "greedy sent/s": 0.95, "peak memory": 1.05}


@dataclass(frozen=True)
class Setup:
    """One way to run a model: attention implementation and, for linked models, the link kernel."""

    label: str
    implementation: str
    kernel: str | None  # None: vanilla


VANILLA = (Setup("van eager", "eager", None), Setup("van sdpa", "sdpa", None))
LINKED = (
    Setup("AL eager", "eager", "auto"),
    Setup("AL sdpa scores", "sdpa", "scores"),
    Setup("AL sdpa concat", "sdpa", "concat"),
    Setup("AL sdpa auto", "sdpa", "auto"),
)
#: (model, reference) label pairs of the ratio columns
COLUMNS = (
    ("van eager", "van sdpa"),
    ("AL eager", "van eager"),
    ("AL sdpa scores", "van sdpa"),
    ("AL sdpa concat", "van sdpa"),
    ("AL eager", "van sdpa"),
    ("AL sdpa auto", "van sdpa"),
)


def linked_setups(device: str) -> tuple[Setup, ...]:
    """On CPU "auto" is the score sum: measuring it again would only add time."""
    return LINKED[:3] if device.startswith("cpu") else LINKED


def measure_variant(variant: Variant, vanillas: dict, vanilla_memory: dict, args, shape, batch, bar):
    """Interleaved timings (training, greedy) and training peak memory of every setup of one variant.

    `vanilla_memory` is filled on the first call, after the vanilla models' first (warm) timing.
    """
    build = dict(family=args.family, device=args.device, dtype=DTYPES[args.dtype], seed=args.seed)
    steps = dict(vanillas)
    for s in linked_setups(args.device):
        model = build_model(variant, shape, attn_implementation=s.implementation, link_kernel=s.kernel, **build)
        steps[s.label] = TrainStep(model, batch)
    labels = list(steps)
    sync = synchronizer(args.device)
    options = dict(steps=args.steps, warmup=args.warmup, sync=sync, clock=args.clock, progress=bar.update)
    timings = {"train tok/s": interleaved([steps[label] for label in labels], **options)}
    memory = {}
    for label, step in steps.items():
        known = vanilla_memory.get(label)
        if known is None:
            known = peak_memory_bytes(step, device=args.device, method=args.memory, live=[step.model, step.optimizer])
            if label in vanillas:
                vanilla_memory[label] = known
        memory[label] = known
    for step in steps.values():
        step.model.eval()
    new_tokens = args.new_tokens or shape.length
    timings["greedy sent/s"] = interleaved([generator(steps[x].model, batch, 1, new_tokens) for x in labels], **options)
    for step in steps.values():
        step.model.train()
    return {metric: (labels, timing) for metric, timing in timings.items()}, memory


def rows_for(variant: Variant, measured: dict, memory: dict, units: dict, device: str) -> list[list[str]]:
    """Three table rows (training, greedy, memory) of one variant."""
    auto = "AL sdpa auto" if not device.startswith("cpu") else "AL sdpa scores"
    rows = []
    for metric, (labels, timing) in measured.items():
        index = {label: i for i, label in enumerate(labels)}
        index.setdefault("AL sdpa auto", index[auto])
        values = [units[metric] / timing.median(index[label]) for label in labels]
        cells = [_speed(timing, index, a, b) for a, b in COLUMNS]
        best = max(("AL eager", "AL sdpa scores", "AL sdpa concat"), key=lambda s: _ratio(timing, index, s))
        auto_ratio = _ratio(timing, index, "AL sdpa auto")
        rows.append(
            [variant.name, metric, " / ".join(f"{v:,.0f}" if v >= 100 else f"{v:.1f}" for v in values), *cells]
            + [f"{best} {ratio(_ratio(timing, index, best))}", verdict(auto_ratio >= TARGETS[metric])]
        )
    memory.setdefault("AL sdpa auto", memory[auto])
    cells = [ratio(memory[a] / memory[b]) for a, b in COLUMNS]
    best = min(("AL eager", "AL sdpa scores", "AL sdpa concat"), key=lambda s: memory[s])
    rows.append(
        [variant.name, "peak memory", " / ".join(megabytes(memory[label]) for label in labels), *cells]
        + [f"{best} {ratio(memory[best] / memory['van sdpa'])}"]
        + [verdict(memory["AL sdpa auto"] / memory["van sdpa"] <= TARGETS["peak memory"])]
    )
    return rows


def _ratio(timing: Timing, index: dict, label: str, reference: str = "van sdpa") -> float:
    return timing.speed_ratio(index[label], index[reference])[0]


def _speed(timing: Timing, index: dict, label: str, reference: str) -> str:
    return ratio(*timing.speed_ratio(index[label], index[reference]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, default_size="cpu", default_steps=8, default_warmup=1)
    parser.set_defaults(variants="al")
    parser.add_argument("--new-tokens", type=int, default=None, help="greedy tokens per sentence (default: length)")
    parser.add_argument("--memory", choices=["profiler", "rss"], default="profiler", help="CPU peak method")
    args = parser.parse_args(argv)
    start = run_start()

    threads = set_threads(args.threads)
    shape = resolve_shape(args)
    variants = [v for v in select_variants(args.variants, args.family) if v.kind == "al"]
    batch = random_batch(shape, seed=args.seed, device=args.device)
    units = {"train tok/s": target_tokens(batch), "greedy sent/s": shape.batch_size}
    setups = (*VANILLA, *linked_setups(args.device))
    settings = {
        "model": f"{args.family}, size {args.size} ({shape.describe()}), {args.dtype}, device {args.device}, "
        f"threads {threads}",
        "batch": f"{shape.batch_size} sentences, source {batch['input_ids'].shape[1]} / target "
        f"{batch['labels'].shape[1]} positions padded; greedy generation of {args.new_tokens or shape.length} "
        "tokens, KV cache on",
        "models": ", ".join(s.label for s in setups)
        + (
            "; on CPU the default kernel 'auto' is the score sum, so 'AL sdpa auto' = 'AL sdpa scores'"
            if args.device.startswith("cpu")
            else ""
        ),  # fmt: skip
        "steps": f"{args.warmup} warm-up + {args.steps} measured rounds of the {len(setups)} models, interleaved; "
        "medians",
        "clock": CLOCK_TEXT[args.clock],
        "ratios": "speed ratios (higher is better) for throughput; memory ratios (lower is better) for memory",
    }

    build = dict(family=args.family, device=args.device, dtype=DTYPES[args.dtype], seed=args.seed)
    vanillas = {s.label: TrainStep(build_model(None, shape, attn_implementation=s.implementation, **build), batch)
                for s in VANILLA}  # fmt: skip
    total = len(variants) * 2 * len(setups) * (args.warmup + args.steps)
    bar = tqdm(total=total, file=sys.stderr, disable=args.no_progress)
    rows, vanilla_memory = [], {}
    for variant in variants:
        bar.set_description(variant.name)
        measured, memory = measure_variant(variant, vanillas, vanilla_memory, args, shape, batch, bar)
        rows += rows_for(variant, measured, memory, units, args.device)
    bar.close()

    columns = ["variant", "metric", " / ".join(s.label for s in setups)]
    columns += [f"{a} : {b}" for a, b in COLUMNS] + ["best vs van sdpa", "verdict (auto)"]
    print(header("Attention link kernels: score sum vs head-dim concat", settings, args.device, start))
    print()
    print(table(columns, rows))


if __name__ == "__main__":
    main()
