"""How a variant's training cost grows with sentence length, relative to vanilla: 16 to 512 tokens.

    python recipes/benchmarks/length_scaling.py                          # cpu shape, 4 variants
    python recipes/benchmarks/length_scaling.py --variants al --attn-implementation eager

For each length L every sentence has exactly L source and L target tokens and the batch holds
``--tokens`` / L sentences, so the token count stays fixed while the attention share of the work grows
with L. A ratio (variant / vanilla training throughput) that stays flat across lengths shows no extra
asymptotic cost; one that falls shows extra work that grows faster than the tokens (a larger share of
O(L^2) attention). The FLOP-count bound at each length is printed beside the measurement.
"""

from __future__ import annotations

import argparse
import sys

from benchmark_page import header, ratio, run_start, table
from common import (
    DTYPES,
    add_common_args,
    add_kernel_args,
    build_model,
    positive_ints,
    random_batch,
    resolve_shape,
    select_variants,
    set_threads,
    synchronizer,
)
from flops import training_flops
from measure import CLOCK_TEXT, interleaved
from tqdm import tqdm
from train_throughput import TrainStep

DEFAULT_VARIANTS = "al-prev-both,al-cum-both,graph-gate,graph-half+gate"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, default_size="cpu", default_steps=5, default_warmup=1)
    parser.set_defaults(variants=DEFAULT_VARIANTS)
    add_kernel_args(parser)
    parser.add_argument(
        "--lengths", type=positive_ints, default="16,32,64,128,256,512", help="comma-separated sentence lengths"
    )
    parser.add_argument("--tokens", type=int, default=1024, help="source tokens per batch at every length")
    args = parser.parse_args(argv)
    start = run_start()

    threads = set_threads(args.threads)
    shape, variants = resolve_shape(args), select_variants(args.variants, args.family)
    lengths = args.lengths
    sync = synchronizer(args.device)
    build = dict(
        family=args.family,
        attn_implementation=args.attn_implementation,
        device=args.device,
        dtype=DTYPES[args.dtype],
        max_length=max(lengths),
    )
    settings = {
        "model": f"{args.family}, size {args.size} ({shape.describe()}), {args.dtype}, "
        f"attn_implementation {args.attn_implementation}, link kernel {args.link_kernel or 'default'}, "
        f"device {args.device}, threads {threads}",
        "batch": f"{args.tokens} tokens per batch: max(1, {args.tokens} // L) sentences of exactly L source and "
        "L target tokens",
        "steps": f"{args.warmup} warm-up + {args.steps} measured training steps per model and length, interleaved; "
        "medians",
        "clock": CLOCK_TEXT[args.clock],
        "cells": "measured training-throughput ratio variant / vanilla ± half IQR (FLOP-count bound)",
    }

    vanilla_model = build_model(None, shape, seed=args.seed, **build)
    total = len(variants) * len(lengths) * 2 * (args.warmup + args.steps)
    bar = tqdm(total=total, file=sys.stderr, disable=args.no_progress)
    rows = []
    for variant in variants:
        bar.set_description(variant.name)
        model = build_model(variant, shape, seed=args.seed, link_kernel=args.link_kernel, **build)
        speeds = []
        for length in lengths:
            sentences = max(1, args.tokens // length)
            batch = random_batch(
                shape, batch_size=sentences, length=length, jitter=0, seed=args.seed, device=args.device
            )
            runners = [TrainStep(vanilla_model, batch), TrainStep(model, batch)]
            timing = interleaved(
                runners, steps=args.steps, warmup=args.warmup, sync=sync, clock=args.clock, progress=bar.update
            )
            speed, spread = timing.speed_ratio(1)
            bound = training_flops(vanilla_model.config, sentences, length, length) / training_flops(
                model.config, sentences, length, length, args.device
            )
            speeds.append((speed, spread, bound))
        last_over_first = speeds[-1][0] / speeds[0][0]
        cells = (f"{ratio(s, sp)} ({ratio(b)})" for s, sp, b in speeds)
        rows.append([variant.name, *cells, f"{last_over_first:.2f}"])
        del model
    bar.close()

    print(header("Length scaling: training throughput ratio variant / vanilla", settings, args.device, start))
    print()
    print(table(["variant", *(f"L={n}" for n in lengths), f"L={lengths[-1]} / L={lengths[0]}"], rows))


if __name__ == "__main__":
    main()
