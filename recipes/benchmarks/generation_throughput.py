"""Generation throughput (greedy and beam search, KV cache on) and time to first token, variant / vanilla.

    python recipes/benchmarks/generation_throughput.py                  # cpu shape, all variants
    python recipes/benchmarks/generation_throughput.py --size paper --variants graph --steps 5

Every call generates exactly `--new-tokens` tokens per sentence (``min_new_tokens = max_new_tokens``),
so a random-weight model does the same work as a trained one and vanilla and variant decode the same
number of steps. Sentences per second is batch size / seconds per ``generate`` call; time to first
token is one ``generate(max_new_tokens=1)`` call on the same batch (encoder + first decoder step).
Ratios are variant speed / vanilla speed (for time to first token: vanilla time / variant time), so
higher is better everywhere. Target: >= 0.95x for greedy and beam throughput (for the graph variants
only the encoder changes, and it runs once per sentence).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import torch
from benchmark_page import header, ratio, run_start, table, verdict
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
)
from measure import CLOCK_TEXT, interleaved
from tqdm import tqdm

GENERATION_TARGET = 0.95


def generator(model: torch.nn.Module, batch: dict[str, torch.Tensor], beams: int, new_tokens: int) -> Callable:
    """A no-argument ``generate`` call that always decodes exactly `new_tokens` steps."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    options = dict(do_sample=False, num_beams=beams, max_new_tokens=new_tokens, min_new_tokens=new_tokens)

    def run() -> torch.Tensor:
        output = model.generate(**inputs, **options, use_cache=True)
        if output.shape[1] != new_tokens + 1:  # + the decoder start token
            raise RuntimeError(f"expected {new_tokens} new tokens, got {output.shape[1] - 1}")
        return output

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, default_size="cpu", default_steps=5, default_warmup=1)
    add_kernel_args(parser)
    parser.add_argument("--beams", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens generated per sentence (default: length)")
    args = parser.parse_args(argv)
    start = run_start()

    threads = set_threads(args.threads)
    shape, variants = resolve_shape(args), select_variants(args.variants, args.family)
    new_tokens = args.new_tokens or shape.length
    sync = synchronizer(args.device)
    batch = random_batch(shape, seed=args.seed, device=args.device)
    build = dict(
        family=args.family,
        attn_implementation=args.attn_implementation,
        device=args.device,
        dtype=DTYPES[args.dtype],
    )
    settings = {
        "model": f"{args.family}, size {args.size} ({shape.describe()}), {args.dtype}, "
        f"attn_implementation {args.attn_implementation}, link kernel {args.link_kernel or 'default'}, "
        f"device {args.device}, threads {threads}",
        "batch": f"{shape.batch_size} sentences, source {batch['input_ids'].shape[1]} positions padded; "
        f"{new_tokens} new tokens each; greedy and beam {args.beams}, KV cache on",
        "steps": f"{args.warmup} warm-up + {args.steps} measured generate calls per model and mode, interleaved; "
        "medians",
        "clock": CLOCK_TEXT[args.clock],
        "ratios": "variant speed / vanilla speed (higher is better); TTFT: vanilla time / variant time",
    }

    vanilla = build_model(None, shape, seed=args.seed, **build).eval()
    modes = {"greedy": (1, new_tokens), f"beam{args.beams}": (args.beams, new_tokens), "ttft": (1, 1)}
    for beams, tokens in modes.values():  # vanilla's first calls allocate its caches: keep them out of row one
        generator(vanilla, batch, beams, tokens)()
    rows = []
    total = len(variants) * len(modes) * 2 * (args.warmup + args.steps)
    bar = tqdm(total=total, file=sys.stderr, disable=args.no_progress)
    for variant in variants:
        bar.set_description(variant.name)
        model = build_model(variant, shape, seed=args.seed, link_kernel=args.link_kernel, **build).eval()
        cells, met = [], variant.kind != "aa"
        for mode, (beams, tokens) in modes.items():
            runners = [generator(m, batch, beams, tokens) for m in (vanilla, model)]
            timing = interleaved(
                runners, steps=args.steps, warmup=args.warmup, sync=sync, clock=args.clock, progress=bar.update
            )
            speed, spread = timing.speed_ratio(1)
            if mode == "ttft":
                cells += [f"{1000 * timing.median(0):.0f} / {1000 * timing.median(1):.0f}", ratio(speed, spread)]
            else:
                per_second = [shape.batch_size / timing.median(i) for i in (0, 1)]
                cells += [f"{per_second[0]:.1f} / {per_second[1]:.1f}", ratio(speed, spread)]
                met = met and speed >= GENERATION_TARGET
        rows.append([variant.name, *cells, verdict(met if variant.kind != "aa" else None)])
        del model
    bar.close()

    beam = f"beam{args.beams}"
    columns = ["variant", "greedy sent/s (van / var)", "greedy ratio", f"{beam} sent/s (van / var)", f"{beam} ratio"]
    columns += ["TTFT ms (van / var)", "TTFT ratio", f"verdict (>= {GENERATION_TARGET}x)"]
    print(header("Generation throughput: variant / vanilla", settings, args.device, start))
    print()
    print(table(columns, rows))


if __name__ == "__main__":
    main()
