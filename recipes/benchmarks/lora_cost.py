"""What LoRA fine-tuning (the recipe's ``lora_r``) costs against fine-tuning every weight, per variant.

    python recipes/benchmarks/lora_cost.py                                  # opus-mt shape, rank 16
    python recipes/benchmarks/lora_cost.py --size paper --variants al --lora-r 8
    python recipes/benchmarks/lora_cost.py --device cuda --dtype bf16

Each variant is built twice with the same weights: once with every weight trainable, once with LoRA added
as the training recipe adds it (`hf_graphtf.training.add_lora`, with `ModelArguments`' LoRA defaults and
the rank given here: what the options add trains whole). A step is forward + backward + AdamW over the
trainable parameters, on the same batch; the ratio is LoRA / every weight, interleaved medians as in
`train_throughput.py`. Memory is the peak of one step (parameters, gradients, optimizer state and
activations; `measure.py`).
"""

from __future__ import annotations

import argparse
import sys

from benchmark_page import header, megabytes, ratio, run_start, table
from common import (
    DTYPES,
    add_common_args,
    add_kernel_args,
    build_model,
    random_batch,
    resolve_shape,
    select_variants,
    set_threads,
    synchronizer,
    target_tokens,
)
from measure import CLOCK_TEXT, interleaved, peak_memory_bytes
from tqdm import tqdm
from train_throughput import TrainStep

from hf_graphtf.training import ModelArguments, add_lora


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, default_size="opus-mt", default_steps=6, default_warmup=1)
    add_kernel_args(parser)
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank (default: %(default)s)")
    parser.add_argument("--memory", choices=["profiler", "rss", "none"], default="profiler", help="CPU peak method")
    parser.set_defaults(variants="aa,al-prev-both-gate,graph-gate")
    args = parser.parse_args(argv)
    start = run_start()

    threads = set_threads(args.threads)
    shape, variants = resolve_shape(args), select_variants(args.variants, args.family)
    dtype, sync = DTYPES[args.dtype], synchronizer(args.device)
    batch = random_batch(shape, seed=args.seed, device=args.device)
    tokens = target_tokens(batch)
    # the recipe's LoRA settings: ModelArguments' defaults, with this rank (the model is built here, not loaded)
    lora_args = ModelArguments(model_name_or_path="(random weights of the benchmark shape)", lora_r=args.lora_r)
    lora = lora_args.lora_options()
    build = dict(family=args.family, attn_implementation=args.attn_implementation, device=args.device, dtype=dtype)
    settings = {
        "model": f"{args.family}, size {args.size} ({shape.describe()}), {args.dtype}, "
        f"attn_implementation {args.attn_implementation}, device {args.device}, threads {threads}",
        "LoRA": f"rank {lora['r']}, alpha {lora['lora_alpha']:g}, dropout {lora['lora_dropout']:g}, on "
        f"{', '.join(lora['target_modules'])}; what the options add trains whole",
        "batch": f"{shape.batch_size} sentences, {tokens} real target tokens",
        "steps": f"{args.warmup} warm-up + {args.steps} measured rounds per pair, interleaved; medians",
        "clock": CLOCK_TEXT[args.clock],
        "memory": "torch.cuda.max_memory_allocated"
        if args.device.startswith("cuda")
        else f"{args.memory} (parameters + gradients + optimizer state + peak allocated during one step)",
    }

    rows = []
    bar = tqdm(total=len(variants) * 2 * (args.warmup + args.steps), file=sys.stderr, disable=args.no_progress)
    for variant in variants:
        bar.set_description(variant.name)
        full = TrainStep(build_model(variant, shape, seed=args.seed, **build), batch)
        adapted = TrainStep(add_lora(build_model(variant, shape, seed=args.seed, **build), lora_args), batch)
        timing = interleaved(
            [full, adapted], steps=args.steps, warmup=args.warmup, sync=sync, clock=args.clock, progress=bar.update
        )
        speed, spread = timing.speed_ratio(1)
        trained = sum(p.numel() for p in adapted.trainable)
        every = sum(p.numel() for p in full.trainable)
        memory_cells = ["-", "-"]
        if args.memory != "none" or args.device.startswith("cuda"):
            peaks = [
                peak_memory_bytes(s, device=args.device, method=args.memory, live=[s.model, s.optimizer])
                for s in (full, adapted)
            ]
            memory_cells = [megabytes(peaks[0]), f"{megabytes(peaks[1])} ({ratio(peaks[1] / peaks[0])})"]
        rows.append(
            [
                variant.name,
                f"{every:,}",
                f"{trained:,} ({trained / every:.1%})",
                f"{tokens / timing.median(0):,.0f}",
                f"{tokens / timing.median(1):,.0f}",
                ratio(speed, spread),
                *memory_cells,
            ]
        )
        del full, adapted
    bar.close()

    columns = ["variant", "parameters", "LoRA trains", "every weight tok/s", "LoRA tok/s", "speed ratio"]
    columns += ["peak memory, every weight", "peak memory, LoRA (ratio)"]
    print(header("LoRA fine-tuning: LoRA / every weight trained", settings, args.device, start))
    print()
    print(table(columns, rows))


if __name__ == "__main__":
    main()
