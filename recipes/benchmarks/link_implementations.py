"""Attention link implementations against vanilla: eager (score sum) and sdpa (head-dim concat).

    python recipes/benchmarks/link_implementations.py                    # cpu shape, all six AL variants
    python recipes/benchmarks/link_implementations.py --size paper --variants al-prev-both --device cuda

Four models per variant run interleaved on the same batch: vanilla eager, vanilla sdpa, AL eager and
AL sdpa. Each AL implementation is compared with vanilla of the same implementation (its own cost)
and with vanilla sdpa (the Transformers default, what a user would otherwise run), so the faster
implementation can be made the default on this device. Metrics: training throughput (forward +
backward + AdamW), peak training memory (lower is better) and greedy generation throughput with the
KV cache. Targets, against vanilla sdpa: >= 0.97x training, >= 0.95x generation, <= 1.05x memory.
"""

from __future__ import annotations

import argparse
import sys

from common import (
    DTYPES,
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
from measure import CLOCK_TEXT, interleaved, peak_memory_bytes
from report import header, megabytes, ratio, run_start, table, verdict
from tqdm import tqdm
from train_throughput import TrainStep

TARGETS = {"train tok/s": 0.97, "greedy sent/s": 0.95, "peak memory": 1.05}
IMPLEMENTATIONS = ("eager", "sdpa")


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
    variants = [v for v in select_variants(args.variants) if v.kind == "al"]
    new_tokens = args.new_tokens or shape.length
    sync = synchronizer(args.device)
    batch = random_batch(shape, seed=args.seed, device=args.device)
    tokens = target_tokens(batch)
    build = dict(family=args.family, device=args.device, dtype=DTYPES[args.dtype], seed=args.seed)
    settings = {
        "model": f"{args.family}, size {args.size} ({shape.describe()}), {args.dtype}, device {args.device}, "
        f"threads {threads}",
        "batch": f"{shape.batch_size} sentences, source {batch['input_ids'].shape[1]} / target "
        f"{batch['labels'].shape[1]} positions padded; greedy generation of {new_tokens} tokens, KV cache on",
        "steps": f"{args.warmup} warm-up + {args.steps} measured rounds of the four models, interleaved; medians",
        "clock": CLOCK_TEXT[args.clock],
        "ratios": "speed ratios (higher is better) for throughput; memory ratios (lower is better) for memory",
    }

    vanillas = {impl: build_model(None, shape, attn_implementation=impl, **build) for impl in IMPLEMENTATIONS}
    train = {impl: TrainStep(model, batch) for impl, model in vanillas.items()}
    vanilla_memory: dict[str, int] = {}  # measured once, after the first (warm) timing
    bar = tqdm(total=len(variants) * 2 * 4 * (args.warmup + args.steps), file=sys.stderr, disable=args.no_progress)
    rows = []
    for variant in variants:
        bar.set_description(variant.name)
        linked = {impl: build_model(variant, shape, attn_implementation=impl, **build) for impl in IMPLEMENTATIONS}
        # order of the four models in every measurement: vanilla eager, vanilla sdpa, AL eager, AL sdpa
        train_steps = [train["eager"], train["sdpa"], *(TrainStep(linked[i], batch) for i in IMPLEMENTATIONS)]
        models = [vanillas["eager"], vanillas["sdpa"], linked["eager"], linked["sdpa"]]
        measured = {}
        timing = interleaved(
            train_steps, steps=args.steps, warmup=args.warmup, sync=sync, clock=args.clock, progress=bar.update
        )
        measured["train tok/s"] = (timing, [tokens / timing.median(i) for i in range(4)])
        for impl, step in train.items():
            if impl not in vanilla_memory:
                live = [step.model, step.optimizer]
                vanilla_memory[impl] = peak_memory_bytes(step, device=args.device, method=args.memory, live=live)
        linked_memory = [
            peak_memory_bytes(step, device=args.device, method=args.memory, live=[step.model, step.optimizer])
            for step in train_steps[2:]
        ]
        for model in models:
            model.eval()
        greedy = [generator(m, batch, 1, new_tokens) for m in models]
        timing = interleaved(
            greedy, steps=args.steps, warmup=args.warmup, sync=sync, clock=args.clock, progress=bar.update
        )
        measured["greedy sent/s"] = (timing, [shape.batch_size / timing.median(i) for i in range(4)])
        for model in models:
            model.train()

        for metric, (timing, values) in measured.items():
            r = {(a, b): timing.speed_ratio(a, b) for a, b in ((0, 1), (2, 0), (3, 1), (2, 1))}
            best = 2 if r[(2, 1)][0] >= r[(3, 1)][0] else 3
            rows.append(
                [
                    variant.name,
                    metric,
                    " / ".join(f"{v:,.0f}" if v >= 100 else f"{v:.1f}" for v in values),
                    ratio(*r[(0, 1)]),
                    ratio(*r[(2, 0)]),
                    ratio(*r[(3, 1)]),
                    ratio(*r[(2, 1)]),
                    f"{IMPLEMENTATIONS[best - 2]} {ratio(r[(best, 1)][0])}",
                    verdict(r[(best, 1)][0] >= TARGETS[metric]),
                ]
            )
        peaks = [vanilla_memory["eager"], vanilla_memory["sdpa"], *linked_memory]
        m = {(a, b): peaks[a] / peaks[b] for a, b in ((0, 1), (2, 0), (3, 1), (2, 1))}
        best = 2 if m[(2, 1)] <= m[(3, 1)] else 3
        rows.append(
            [
                variant.name,
                "peak memory",
                " / ".join(megabytes(p) for p in peaks),
                ratio(m[(0, 1)]),
                ratio(m[(2, 0)]),
                ratio(m[(3, 1)]),
                ratio(m[(2, 1)]),
                f"{IMPLEMENTATIONS[best - 2]} {ratio(m[(best, 1)])}",
                verdict(m[(best, 1)] <= TARGETS["peak memory"]),
            ]
        )
        del linked, train_steps, models
    bar.close()

    columns = ["variant", "metric", "van eager / van sdpa / AL eager / AL sdpa", "van eager : van sdpa"]
    columns += ["AL eager : van eager", "AL sdpa : van sdpa", "AL eager : van sdpa", "best vs van sdpa", "verdict"]
    print(header("Attention link implementations: eager (score sum) vs sdpa (concat)", settings, args.device, start))
    print()
    print(table(columns, rows))


if __name__ == "__main__":
    main()
