"""The machine a figure came from, as the benchmark reports and the experiment rows record it.

CPU float sums come out differently on different vector kernels, so a speed table or a training run
is comparable (or reproducible bit for bit) only on the same kind of CPU: both name it the same way.
The name is not enough for bit-identity: two hosts of one cloud that report the same model and vector
kernels have trained the same recipe and seed apart (docs/reproducibility.md, "The same seed"),
so ``float_fingerprint`` records how a machine actually sums.
"""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name from ``cpuinfo`` (Linux), else what `platform` knows."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


#: CPU flags (Linux ``/proc/cpuinfo``) under which oneDNN runs bf16 matrix products natively
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (empty where ``cpuinfo`` cannot be read: not Linux)."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (training's ``precision: auto`` and
    translation's ``--dtype auto`` both ask)."""
    return bool(cpu_flags(cpuinfo) & set(BF16_CPU_FLAGS))


def cpu_record() -> dict[str, str]:
    """This machine's CPU as a result records it: its model, the vector kernels torch picks on it and
    its ``float_fingerprint``. Two results are comparable bit for bit, and their speeds like with like,
    only where all three match."""
    import torch

    return {
        "model": cpu_model(),
        "kernels": torch.backends.cpu.get_cpu_capability(),
        "float_fingerprint": float_fingerprint(),
    }


def float_fingerprint() -> str:
    """16 hex digits naming how this machine computes a float32 training step: the SHA-256 of the loss
    and gradients of one fixed step of a small attention and feed-forward block, on one thread.

    Two machines that give the same digest sum this step's floats in the same order; ones that give
    different digests will not train a model bit for bit alike. Kernel libraries choose their blocking
    (and so their summation order) from the CPU's vector units and cache sizes, which a model name does
    not pin down. One thread, as each process of a CPU grid run uses; the caller's thread count and
    random state are left as they were. Comparable only under the same torch build.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        states = torch.randn(64, 256, generator=generator)
        w_in = (torch.randn(256, 1024, generator=generator) / 16).requires_grad_()
        w_out = (torch.randn(1024, 256, generator=generator) / 32).requires_grad_()
        mixed = torch.softmax(states @ states.T / 16, dim=-1) @ states
        hidden = torch.nn.functional.gelu(mixed @ w_in) @ w_out
        loss = torch.nn.functional.layer_norm(hidden, (256,)).square().mean()
        loss.backward()
        digest = hashlib.sha256()
        for tensor in (loss.detach(), w_in.grad, w_out.grad):
            digest.update(tensor.numpy().tobytes())
        return digest.hexdigest()[:16]
    finally:
        torch.set_num_threads(threads)
