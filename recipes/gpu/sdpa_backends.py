"""Which SDPA backend each attention shape of the package gets, forward and backward, on this device.

    python recipes/gpu/sdpa_backends.py                       # CUDA in bf16 when there is one
    python recipes/gpu/sdpa_backends.py --device cpu --dtype fp32

A variant's speed against vanilla depends on the kernel each runs, not only on its FLOPs. Vanilla's heads
have queries, keys and values of one width (64 at the papers' shape, 128 at a wider one); the link's concat
kernel has queries and keys twice as wide as the values (256/128 and 128/64), which some fused backends
refuse. For each shape, with gradients, this prints the backend the dispatcher picks (read from the ops a
profiled forward and backward run) and each backend's answer when forced, with the cuDNN version.
"""

from __future__ import annotations

import argparse
import warnings

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from hf_graphtf.translation.dtypes import DTYPE_RECORDS, float_dtype_names

#: the float formats, from the package's records
DTYPES = {name: DTYPE_RECORDS[name].torch() for name in float_dtype_names()}

#: (query/key head dim, value head dim, what has it)
SHAPES = (
    (64, 64, "vanilla, papers' shape (d 512, 8 heads)"),
    (128, 128, "vanilla, 128-wide heads"),
    (128, 64, "link concat kernel, papers' shape"),
    (256, 128, "link concat kernel, 128-wide heads"),
)
BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH)
#: the aten op name fragment each backend dispatches to
OP_NAMES = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}


def inputs(qk_dim: int, v_dim: int, device: str, dtype: torch.dtype, batch: int, length: int, heads: int):
    generator = torch.Generator(device=device).manual_seed(0)

    def tensor(dim: int) -> torch.Tensor:
        return torch.randn(batch, heads, length, dim, device=device, dtype=dtype, generator=generator)

    return [tensor(qk_dim).requires_grad_(), tensor(qk_dim).requires_grad_(), tensor(v_dim).requires_grad_()]


def step(query, key, value) -> None:
    """One SDPA call, and its backward where the inputs want gradients."""
    output = torch.nn.functional.scaled_dot_product_attention(query, key, value)
    if output.requires_grad:
        output.float().sum().backward()


def picked_backend(query, key, value, device: str) -> str:
    """The backend the dispatcher chose, from the SDPA ops of a profiled forward and backward."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        step(query, key, value)
    names = {event.key for event in prof.key_averages() if "scaled_dot_product" in event.key}
    for fragment, backend in OP_NAMES.items():
        if any(fragment in name for name in names):
            return backend
    return "MATH"  # no fused op ran: the math fallback, matmuls and a softmax


def forced_answers(query, key, value) -> dict[str, str]:
    """Each backend's answer when forced to run `step` on these inputs: ``accepts``, or ``refuses:`` with the
    first line of its reason."""
    answers = {}
    for backend in BACKENDS:
        try:
            with sdpa_kernel(backend):
                step(query, key, value)
            answers[backend.name] = "accepts"
        except RuntimeError as error:
            answers[backend.name] = "refuses: " + str(error).splitlines()[0][:80]
    return answers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16" if torch.cuda.is_available() else "fp32")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*(requires q,k,v|[Ff]lash|[Mm]emory efficient|cuDNN).*")
    dtype = DTYPES[args.dtype]
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    device_name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "CPU"
    print(f"## SDPA backends on {device_name}, {args.dtype}, with gradients")
    print()
    print(f"- torch {torch.__version__}, cuDNN {cudnn or 'none'}")
    print(f"- batch {args.batch}, {args.heads} heads, {args.length} positions")
    print()
    names = [backend.name for backend in BACKENDS]
    print("| q/k dim | v dim | shape of | picked | " + " | ".join(names) + " |")
    print("|---|---|---|---|" + "---|" * len(names))
    for qk_dim, v_dim, what in SHAPES:
        tensors = inputs(qk_dim, v_dim, args.device, dtype, args.batch, args.length, args.heads)
        picked = picked_backend(*tensors, args.device)
        answers = forced_answers(*tensors).values()
        print(f"| {qk_dim} | {v_dim} | {what} | {picked} | " + " | ".join(answers) + " |")


if __name__ == "__main__":
    main()
