"""The link's concat kernel against the eager score sum, in bf16 on a GPU: the same model, the same batch.

    python recipes/gpu/link_kernels_bf16.py                 # on CUDA when there is one, else the CPU
    python recipes/gpu/link_kernels_bf16.py --device cpu --dtype fp32

``[Q_n | Q_(n-1)] [K_n | K_(n-1)]^T`` equals ``Q_n K_n^T + Q_(n-1) K_(n-1)^T``, so one fused SDPA call on
the concatenated queries and keys computes the linked scores without materialising them. In exact
arithmetic both kernels give the same logits; in bf16 they round differently. The tolerance: the
relative L2 distance between the two kernels' logits must stay below 2% (a bf16 mantissa holds about
0.4%, and six layers of rounding compound), and greedy decoding must agree on at least 95% of tokens.
It also lists which SDPA backends accept queries and keys wider than the values, on this torch, and checks
that a training step on the concat kernel keeps its joins for backward as their halves with the kernel this
device runs (`hf_graphtf.saved_joins`): joins are made again in backward, the gradients are those of a step
that keeps the joins, and the step's peak memory (above what was allocated when it began) is no higher.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from common import DTYPES, SHAPES, Variant, build_model, random_batch  # noqa: E402
from sdpa_backends import forced_answers  # noqa: E402  (beside this script)

from hf_graphtf import attention_link  # noqa: E402
from hf_graphtf.variants import variant_options  # noqa: E402

RELATIVE_L2, TOKEN_AGREEMENT = 0.02, 0.95
#: the gradients of a step keeping halves against one keeping joins: the same arithmetic, so only a backward
#: kernel's own run-to-run spread (atomics) separates them
GRADIENT_L2 = 1e-2
VARIANTS = {name: variant_options(name) for name in ("al-prev-both", "al-cum-both")}  # hf_graphtf.variants


def sdpa_backends_accepting_wider_keys(device: str, dtype: torch.dtype) -> dict[str, str]:
    """Each SDPA backend's answer to queries/keys of head dim 128 against values of 64, forward only
    (`sdpa_backends.py` gives every shape of the package, with gradients)."""
    q = torch.randn(2, 4, 16, 128, device=device, dtype=dtype)
    v = torch.randn(2, 4, 16, 64, device=device, dtype=dtype)
    return forced_answers(q, q, v)


def saved_joins_check(device: str, dtype: torch.dtype, shape) -> tuple[str, bool]:
    """One training step of the previous-mode link on the concat kernel, keeping its joins as halves and
    keeping the joins: (a table row, whether it passed). On a CPU the math kernel, which serves queries and
    keys wider than values, saves no join, so nothing is made again there."""
    model = build_model(
        Variant("al-prev-both", "al", VARIANTS["al-prev-both"]), shape, seed=0, attn_implementation="sdpa",
        device=device, dtype=dtype, link_kernel="concat",
    ).train()  # fmt: skip
    batch = random_batch(shape, seed=0, device=device)
    rejoins = []
    join_again = attention_link._join_again

    def counted(*halves):
        rejoins.append(1)
        return join_again(*halves)

    def step(keep_halves: bool) -> tuple[torch.Tensor, float | None]:
        """The step's gradients (on the CPU, so that one step's copy does not weigh on the next one's peak) and
        its peak above what was allocated when it began."""
        model.zero_grad(set_to_none=True)
        on_cuda = device.startswith("cuda")
        if on_cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            start = torch.cuda.memory_allocated(device)
        halves = mock.patch.object(attention_link, "_join_again", counted)
        joins = mock.patch.object(attention_link, "saves_halves", lambda *tensors: False)
        torch.manual_seed(0)  # the same dropout draws in both steps
        with halves if keep_halves else joins:
            model(**batch).loss.backward()
        peak = (torch.cuda.max_memory_allocated(device) - start) / 2**20 if on_cuda else None
        grads = torch.cat([p.grad.float().flatten().cpu() for p in model.parameters() if p.grad is not None])
        return grads, peak

    kept_joins, joins_peak = step(keep_halves=False)
    kept_halves, halves_peak = step(keep_halves=True)
    distance = (torch.linalg.vector_norm(kept_halves - kept_joins) / torch.linalg.vector_norm(kept_joins)).item()
    peaks = "-" if halves_peak is None else f"{halves_peak:,.0f} / {joins_peak:,.0f} MiB"
    if device.startswith("cuda"):
        passed = bool(rejoins) and distance < GRADIENT_L2 and halves_peak <= joins_peak
        verdict = "PASS" if passed else "MISS"
    else:
        passed, verdict = distance < GRADIENT_L2, "n/a (the CPU's math kernel saves no join)"
    row = f"| al-prev-both | {len(rejoins)} | {distance:.2e} (< {GRADIENT_L2}) | {peaks} | {verdict} |"
    return row, passed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--size", choices=sorted(SHAPES), default="paper")
    args = parser.parse_args(argv)
    dtype = DTYPES[args.dtype]
    shape = SHAPES[args.size]
    batch = random_batch(shape, seed=0, device=args.device)
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    print(f"## Link kernels in {args.dtype} on {name} (torch {torch.__version__}, size {args.size})\n")
    print("| variant | relative L2 of logits (concat vs scores) | greedy tokens agreeing | verdict |")
    print("|---|---|---|---|")
    failed = False
    for variant, options in VARIANTS.items():
        logits, tokens = {}, {}
        for kernel in ("scores", "concat"):
            model = build_model(
                Variant(variant, "al", options), shape, seed=0, attn_implementation="sdpa", device=args.device,
                dtype=dtype, link_kernel=kernel,
            )  # fmt: skip
            model.eval()
            with torch.no_grad():
                logits[kernel] = model(**batch).logits.float()
                tokens[kernel] = model.generate(
                    input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], max_new_tokens=16, num_beams=1
                )
        distance = (torch.linalg.vector_norm(logits["concat"] - logits["scores"]) / torch.linalg.vector_norm(
            logits["scores"])).item()  # fmt: skip
        width = min(tokens["concat"].shape[1], tokens["scores"].shape[1])
        agree = (tokens["concat"][:, :width] == tokens["scores"][:, :width]).float().mean().item()
        passed = distance < RELATIVE_L2 and agree >= TOKEN_AGREEMENT
        failed |= not passed
        print(f"| {variant} | {distance:.2e} (< {RELATIVE_L2}) | {agree:.1%} (>= {TOKEN_AGREEMENT:.0%}) | "
              f"{'PASS' if passed else 'MISS'} |")  # fmt: skip
    print("\nA training step keeping its joins as halves against one keeping the joins:\n")
    print("| variant | joins made again in backward | relative L2 of gradients | peak, halves / joins | verdict |")
    print("|---|---|---|---|---|")
    row, passed = saved_joins_check(args.device, dtype, shape)
    failed |= not passed
    print(row)
    print("\nSDPA backends, queries/keys of head dim 128 against values of 64:\n")
    for backend, answer in sdpa_backends_accepting_wider_keys(args.device, dtype).items():
        print(f"- {backend}: {answer}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
