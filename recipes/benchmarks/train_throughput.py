"""Training throughput and peak memory of each variant relative to vanilla of the same shape.

    python recipes/benchmarks/train_throughput.py                       # paper shape, all variants
    python recipes/benchmarks/train_throughput.py --size cpu --variants al --steps 20
    python recipes/benchmarks/train_throughput.py --device cuda --dtype bf16
    python recipes/benchmarks/train_throughput.py --device cuda --dtype bf16 --tokens 4096,16384,32768 --profile

``--tokens`` sweeps the batch by target tokens a step (users train at 4K-32K; a GPU at a few hundred
sentences a step mostly waits on kernel launches, and a ratio taken there counts launches). ``--profile``
adds the ops a step dispatches (`op_count.py`) and, on CUDA, how busy the GPU was (kernel time over step
time), and on CUDA the kernels where each variant's GPU time differs most from vanilla's, as a share of
the variant's step: what says whether the link's joins in backward or its gradient sums are worth a kernel
of their own. ``--compile`` compiles each layer (regional ``torch.compile``), vanilla and variants alike.
``--graph-path`` forces graph layers' fused group path or the per-module one, to measure
`graph_attention.FUSED_PATH_MEASURED` on a device; ``--link-saves joins`` keeps the link's joins for backward
instead of their halves (`hf_graphtf.saved_joins`), to measure what making them again costs.

A step is forward + backward + AdamW step on one batch of random sentences (the same batch for
vanilla and variant). Throughput is target tokens per second; the ratio is variant / vanilla, the
median over interleaved rounds after warm-up (see `measure.py`). Beside it: the FLOP-count bound
(`flops.py`) and the targets: attention link >= 0.97x throughput and <= 1.05x peak memory; graph
variants above the paper's ratio (IWSLT De-En, Table 2) and at least 90% of their FLOP-count bound.
"""

from __future__ import annotations

import argparse
import sys

import torch
from benchmark_page import header, megabytes, ratio, run_start, table, verdict
from common import (
    DTYPES,
    Shape,
    Variant,
    add_common_args,
    add_kernel_args,
    build_model,
    graph_path,
    link_saves,
    positive_ints,
    random_batch,
    resolve_shape,
    select_variants,
    set_threads,
    synchronizer,
    target_tokens,
)
from flops import training_flops
from measure import CLOCK_TEXT, device_kernel_times, interleaved, peak_memory_bytes
from op_count import count_ops
from tqdm import tqdm

AL_SPEED, AL_MEMORY, BOUND_SHARE = 0.97, 1.05, 0.90


class TrainStep:
    """One optimisation step of `model` on `batch` (AdamW over the trainable parameters, as the Trainer builds
    it; gradients freed after the step as in training)."""

    def __init__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]):
        self.model = model.train()
        self.batch = batch
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.trainable, lr=1e-5)

    def __call__(self) -> None:
        self.model(**self.batch).loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def targets(variant: Variant, speed: float, memory: float | None, bound: float) -> tuple[str, bool | None]:
    """The target text of a row and whether the measurement meets it (None: no target, the A/A row)."""
    if variant.kind == "al":
        met = speed >= AL_SPEED and (memory is None or memory <= AL_MEMORY)
        return f">= {AL_SPEED}x, mem <= {AL_MEMORY}x", met
    if variant.kind == "graph":
        paper, floor = variant.paper_ratio, BOUND_SHARE * bound
        return f"> {paper:.2f}x (paper), >= {floor:.2f}x (90% bound)", speed > paper and speed >= floor
    return "noise floor", None


def compile_layers(model: torch.nn.Module, backend: str = "inductor") -> torch.nn.Module:
    """Regional compilation: each encoder and decoder layer compiled on its own (``Module.compile``), so a
    layer class compiles once and is reused by every layer of its kind, for vanilla and variants alike."""
    for stack in (model.get_encoder(), model.get_decoder()):
        for layer in stack.layers:
            layer.compile(backend=backend)
    return model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, default_size="paper", default_steps=6, default_warmup=1)
    add_kernel_args(parser)
    parser.add_argument("--memory", choices=["profiler", "rss", "none"], default="profiler", help="CPU peak method")
    parser.add_argument(
        "--tokens",
        type=positive_ints,
        default=None,
        help="comma-separated target tokens a step to sweep (the batch set from each)",
    )
    parser.add_argument("--profile", action="store_true", help="add ops per step and, on CUDA, GPU busy")
    parser.add_argument(
        "--compile",
        nargs="?",
        const="inductor",
        default=None,
        metavar="BACKEND",
        help="compile each layer (regional torch.compile; backend default inductor)",
    )
    args = parser.parse_args(argv)
    with graph_path(args.graph_path, args.device), link_saves(args.link_saves):
        for budget in args.tokens or [None]:
            run_budget(args, budget)
            print()


def run_budget(args: argparse.Namespace, budget: int | None) -> None:
    """One table: every variant against vanilla at one batch (the size's, or ``budget`` target tokens)."""
    start = run_start()
    threads = set_threads(args.threads)
    shape, variants = resolve_shape(args), select_variants(args.variants, args.family)
    if budget is not None:
        shape = Shape(**{**shape.__dict__, "batch_size": max(1, round(budget / shape.length))})
    dtype, sync = DTYPES[args.dtype], synchronizer(args.device)
    batch = random_batch(shape, seed=args.seed, device=args.device)
    src_len, tgt_len = batch["input_ids"].shape[1], batch["labels"].shape[1]
    tokens = target_tokens(batch)
    build = dict(family=args.family, attn_implementation=args.attn_implementation, device=args.device, dtype=dtype)
    settings = {
        "model": f"{args.family}, size {args.size} ({shape.describe()}), {args.dtype}, "
        f"attn_implementation {args.attn_implementation}, link kernel {args.link_kernel or 'default'}, "
        f"graph path {args.graph_path}, link saves {args.link_saves}, device {args.device}, threads {threads}",
        "batch": f"{shape.batch_size} sentences, source {src_len} / target {tgt_len} positions padded, "
        f"{tokens} real target tokens",
        "steps": f"{args.warmup} warm-up + {args.steps} measured rounds per pair, interleaved; medians"
        + (f", every layer compiled (regional torch.compile, {args.compile})" if args.compile else ""),
        "clock": CLOCK_TEXT[args.clock],
        "memory": "torch.cuda.max_memory_allocated"
        if args.device.startswith("cuda")
        else f"{args.memory} (parameters + optimizer state + peak allocated during one step; see measure.py)",
    }

    prepare = (lambda model: compile_layers(model, args.compile)) if args.compile else (lambda model: model)
    vanilla = TrainStep(prepare(build_model(None, shape, seed=args.seed, **build)), batch)
    vanilla_profile = profile_step(vanilla, args) if args.profile else None
    rows, kernel_tables = [], []
    bar = tqdm(total=len(variants) * 2 * (args.warmup + args.steps), file=sys.stderr, disable=args.no_progress)
    vanilla_memory = None
    for variant in variants:
        bar.set_description(variant.name)
        model = build_model(variant, shape, seed=args.seed, link_kernel=args.link_kernel, **build)
        step = TrainStep(prepare(model), batch)
        timing = interleaved(
            [vanilla, step], steps=args.steps, warmup=args.warmup, sync=sync, clock=args.clock, progress=bar.update
        )
        speed, spread = timing.speed_ratio(1)
        bound = training_flops(vanilla.model.config, shape.batch_size, src_len, tgt_len) / training_flops(
            step.model.config, shape.batch_size, src_len, tgt_len, args.device
        )
        memory_ratio, memory_text = None, "-"
        if args.memory != "none" or args.device.startswith("cuda"):
            if vanilla_memory is None:
                vanilla_memory = peak_memory_bytes(
                    vanilla, device=args.device, method=args.memory, live=[vanilla.model, vanilla.optimizer]
                )
            memory = peak_memory_bytes(step, device=args.device, method=args.memory, live=[step.model, step.optimizer])
            memory_ratio = memory / vanilla_memory
            memory_text = f"{megabytes(memory)} ({ratio(memory_ratio)})"
        target_text, met = targets(variant, speed, memory_ratio, bound)
        profiled = []
        if vanilla_profile is not None:
            ops, kernels = profile_step(step, args)
            profiled = [f"{ops:,} ({ops / vanilla_profile[0]:.2f}x)"]
            if kernels is not None:
                busy = (sum(vanilla_profile[1].values()) / timing.median(0), sum(kernels.values()) / timing.median(1))
                profiled.append(f"{busy[0]:.0%} / {busy[1]:.0%}")
                kernel_tables.append((variant.name, kernel_differences(vanilla_profile[1], kernels, timing.median(1))))
        rows.append(
            [
                variant.name,
                f"{tokens:,}",
                f"{tokens / timing.median(0):,.0f}",
                f"{tokens / timing.median(1):,.0f}",
                ratio(speed, spread),
                ratio(bound),
                f"{speed / bound:.0%}",
                memory_text,
                *profiled,
                target_text,
                verdict(met),
            ]
        )
        del step
    bar.close()

    columns = ["variant", "target tokens/step", "vanilla tok/s", "variant tok/s", "speed ratio", "FLOP bound"]
    columns += ["of bound", "peak memory (ratio)"]
    if args.profile:
        columns.append("ops/step (ratio)")
        if args.device.startswith("cuda"):
            columns.append("GPU busy vanilla / variant")
    columns += ["target", "verdict"]
    settings["vanilla peak memory"] = megabytes(vanilla_memory) if vanilla_memory else "-"
    print(header("Training throughput: variant / vanilla", settings, args.device, start))
    print()
    print(table(columns, rows))
    for name, kernel_rows in kernel_tables:
        print()
        print(
            f"GPU kernels where {name} differs most from vanilla, {tokens:,} target tokens a step (one profiled step):"
        )
        print()
        print(table(["kernel", "vanilla ms", f"{name} ms", "difference ms", "of the variant's step"], kernel_rows))


def profile_step(step: TrainStep, args: argparse.Namespace) -> tuple[int, dict[str, float] | None]:
    """Ops one training step dispatches (SDPA counted once each way) and, on CUDA, its seconds per kernel."""
    ops = sum(count_ops(step).values())
    return ops, device_kernel_times(step, args.device)


def kernel_differences(
    vanilla: dict[str, float], variant: dict[str, float], step_seconds: float, top: int = 15
) -> list[list[str]]:
    """Rows of the `top` kernels by |variant - vanilla| GPU time, with the difference as a share of the
    variant's measured step time, and a last row for the rest."""
    names = sorted(set(vanilla) | set(variant), key=lambda k: -abs(variant.get(k, 0.0) - vanilla.get(k, 0.0)))
    rows = []
    for name in names[:top]:
        before, after = vanilla.get(name, 0.0), variant.get(name, 0.0)
        short = name.removeprefix("void ").replace("at::native::", "").replace("(anonymous namespace)::", "")
        rows.append(
            [
                short[:110],
                f"{before * 1e3:.3f}",
                f"{after * 1e3:.3f}",
                f"{(after - before) * 1e3:+.3f}",
                f"{(after - before) / step_seconds:+.1%}",
            ]
        )
    rest = sum(variant.get(k, 0.0) - vanilla.get(k, 0.0) for k in names[top:])
    rows.append(
        [f"the other {max(0, len(names) - top)} kernels", "", "", f"{rest * 1e3:+.3f}", f"{rest / step_seconds:+.1%}"]
    )
    return rows


if __name__ == "__main__":
    main()
