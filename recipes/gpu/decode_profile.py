"""Where a `generate` call spends its time on a GPU: the model's kernels, or the host launching them.

    python recipes/gpu/decode_profile.py                        # on CUDA: opus-mt's shape, bf16, batch 64
    python recipes/gpu/decode_profile.py --device cpu --dtype fp32 --size tiny --vocab 64 --batch-size 8

The translation benchmark measured decoding on a GPU as launch-bound at batch 64: compiled decoding barely
beat eager decoding there. This profiles one call of each system (vanilla and the linked model, eager and
compiled as `hf-graphtf translate --compile on` compiles them) and prints, per call: its wall time, the GPU
time its kernels took (their sum, one stream), the kernels and CUDA graphs it launched, and whether
Transformers' own `generate` compiled the model's call (it does on CUDA for a static cache, with CUDA
graphs: ``generation_config.compile_config``, mode ``reduce-overhead``). A call whose kernels fill a small
share of its wall time waits on the host: on the Python loop of `generate` and on launches, which is what
an exported engine (the beam work inside the graph) removes and a faster kernel does not.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from common import SHAPES, Shape, positive_ints, synchronizer  # noqa: E402
from translation_speed import hf_runner, source_batch, write_models  # noqa: E402

from hf_graphtf.translation.inference import load_model  # noqa: E402

LABELS = {"vanilla": "Transformers MarianMTModel", "linked": "linked (attention_link=both)"}
#: how each system decodes: eager; compiled as ``translate --compile on`` compiles; and that compiling asked to
#: replay each step as a CUDA graph (`with_cuda_graphs`)
SYSTEMS = ("eager", "compiled", "cuda-graphs")


def with_cuda_graphs(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` compiled as `translation_modes.compile_decoding` compiles it (static cache, whole forward),
    in ``mode="reduce-overhead"`` (each step replayed as a CUDA graph) and with `generate`'s own compiling of
    the call turned off, so that each step is compiled once. The first step of each `generate` runs eagerly:
    the static cache creates its tensors there, and marks them static only outside the compiler. On an H200
    with Transformers 5.23, compiling that first step too made the compiler skip the CUDA graphs ("mutated
    inputs", at the cache's length counter) and the process crash (RESULTS.md, the H200's second lease)."""
    model.generation_config.cache_implementation = "static"
    model.generation_config.disable_compile = True
    eager = model.forward
    compiled = torch.compile(eager, fullgraph=True, mode="reduce-overhead")

    @functools.wraps(eager)
    def forward(*args, **kwargs):
        cache = kwargs.get("past_key_values", kwargs.get("cache"))
        return (compiled if _cache_made(cache) else eager)(*args, **kwargs)

    model.forward = forward
    return model


def _cache_made(cache) -> bool:
    """Whether every layer of an encoder-decoder cache has made its tensors (after the first decoding step)."""
    parts = (getattr(cache, "self_attention_cache", None), getattr(cache, "cross_attention_cache", None))
    layers = [layer for part in parts if part is not None for layer in getattr(part, "layers", [])]
    return bool(layers) and all(getattr(layer, "is_initialized", False) for layer in layers)


def profiled(run, device: str) -> tuple[dict[str, float], torch.Tensor]:
    """One call of ``run`` under the profiler: wall ms, summed kernel ms, kernels and graph launches; and what
    the call returned."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sync = synchronizer(device)
    with torch.profiler.profile(activities=activities) as profile:
        sync()
        began = time.perf_counter()
        output = run()
        sync()
        wall = time.perf_counter() - began
    kernels = [e for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names = [e.name for e in profile.events()]
    return {
        "wall_ms": wall * 1e3,
        "kernel_ms": sum(e.device_time for e in kernels) / 1e3,
        "kernels": len(kernels),
        "graph_launches": sum(name == "cudaGraphLaunch" for name in names),
        "kernel_launches": sum(name in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC") for name in names),
    }, output


def _against(output: torch.Tensor, eager: torch.Tensor | None) -> str:
    """How many sentences' tokens differ from the eager system's (bf16 kernels may round apart)."""
    if eager is None:
        return "–"
    differ = int((output.cpu() != eager.cpu()).any(dim=-1).sum())
    return "the same" if not differ else f"{differ} of {len(output)} sentences differ"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--size", choices=sorted(SHAPES), default="opus-mt")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--beams", type=positive_ints, default="4,1")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--systems", default="eager,compiled", help=f"comma-separated, of {', '.join(SYSTEMS)}")
    args = parser.parse_args(argv)
    systems = args.systems.split(",")
    if not set(systems) <= set(SYSTEMS):
        parser.error(f"--systems takes {', '.join(SYSTEMS)}; got {args.systems}")
    torch.set_num_threads(1)
    shape = Shape(**{**SHAPES[args.size].__dict__, "vocab": args.vocab})
    folders = write_models(shape, Path(tempfile.mkdtemp(prefix="decode-profile-")), args.seed)
    ids = source_batch(shape, args.batch_size, args.length, args.seed)
    print(
        f"torch {torch.__version__}, {args.device}, {args.dtype}, {shape.describe()}, batch {args.batch_size}, "
        f"{args.new_tokens} new tokens (min = max), 1 CPU thread",
        flush=True,
    )
    columns = "search | system | wall ms | kernel ms | kernels busy | kernels | kernel launches | graph launches | "
    print(columns + "generate compiled the call | tokens against eager")
    eager_tokens: dict[tuple[str, int], torch.Tensor] = {}  # (family, beams) -> the eager system's output
    for system in systems:
        for family in ("vanilla", "linked"):
            compile = "on" if system == "compiled" else "off"
            _, model = load_model(str(folders[family]), args.device, args.dtype, compile=compile)
            if system == "cuda-graphs":
                model = with_cuda_graphs(model)
            name = f"{LABELS[family]} {args.dtype}" + ("" if system == "eager" else f", {system}")
            for beams in args.beams:
                run = hf_runner(model, ids, beams, args.new_tokens)
                began = time.perf_counter()
                for _ in range(args.warmup):
                    run()
                warm = time.perf_counter() - began
                row, output = profiled(run, args.device)
                search = "greedy" if beams == 1 else f"beam {beams}"
                busy = row["kernel_ms"] / row["wall_ms"]
                reference = eager_tokens.get((family, beams))
                against = "(the reference)" if system == "eager" else _against(output, reference)
                if system == "eager":
                    eager_tokens[family, beams] = output
                print(
                    f"{search} | {name} | {row['wall_ms']:.1f} | {row['kernel_ms']:.1f} | {busy:.0%} | "
                    f"{row['kernels']} | {row['kernel_launches']} | {row['graph_launches']} | "
                    f"{hasattr(model, '_compiled_call')} (warm-up {warm:.0f} s) | {against}",
                    flush=True,
                )
            del model
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
