"""Timing and peak-memory helpers.

Timing: the models of one comparison run in the same process on the same batch, interleaved step by
step (vanilla, variant, variant, vanilla, ...: the order flips every round, so a linear drift such as
a CPU clock or a neighbour's load ramp hits both equally). A round's ratio compares the two steps
taken next to each other; the reported ratio is the median over rounds, after warm-up rounds that are
discarded. That paired median is what stays stable on a noisy machine; the spread printed beside it
is half the inter-quartile range of the per-round ratios. On a machine shared with other jobs, see
`CLOCKS`.

Peak memory: on CUDA, ``torch.cuda.max_memory_allocated`` over one step. On CPU torch has no allocator
statistics, and neither RSS (glibc keeps freed pages) nor tracemalloc (it does not see torch's
allocator) measures tensors. The ``profiler`` method therefore records one step with
``torch.profiler.profile(profile_memory=True)``: torch's CPU allocator reports every allocation and free
(with its size and time) to the profiler, so the running sum of those events is the bytes allocated by
torch during the step, and its maximum is the step's peak above what was live when it started. To that
we add what is live at the start (parameters, buffers, optimizer state: summed from the tensors), so the
number is comparable to ``max_memory_allocated`` on CUDA. The ``rss`` method (peak resident set size
during the step minus before, after resetting the kernel's high-water mark) is there to cross-check.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

#: ``wall``: elapsed time, what a user waits for. ``cpu``: CPU seconds of this process (all its threads).
#: With ``--threads 1`` CPU time is the work itself, unaffected by neighbours that time-slice the cores,
#: so ``--clock cpu --threads 1`` is the robust choice on a shared machine; with more threads it also
#: counts OpenMP spin-waiting and is not a throughput.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
CLOCK_TEXT = {"wall": "wall-clock time", "cpu": "process CPU time (time.process_time)"}


@dataclass
class Timing:
    """Per-round seconds of each model of an interleaved comparison (index 0 is the reference)."""

    seconds: list[list[float]]

    def median(self, index: int) -> float:
        return statistics.median(self.seconds[index])

    def speed_ratios(self, index: int, reference: int = 0) -> list[float]:
        """Per-round throughput ratio model/reference (same work, so reference time / model time)."""
        return [ref / run for ref, run in zip(self.seconds[reference], self.seconds[index])]

    def speed_ratio(self, index: int, reference: int = 0) -> tuple[float, float]:
        """(median, half inter-quartile range) of the per-round throughput ratios."""
        return median_and_spread(self.speed_ratios(index, reference))


def median_and_spread(values: Sequence[float]) -> tuple[float, float]:
    """Median and half the inter-quartile range (a robust +-)."""
    if len(values) < 2:
        return values[0], 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), (q3 - q1) / 2


def interleaved(
    runners: Sequence[Callable[[], object]],
    *,
    steps: int,
    warmup: int,
    sync: Callable[[], None],
    clock: str = "wall",
    progress: Callable[[int], None] | None = None,
) -> Timing:
    """Run each runner `warmup` + `steps` times, interleaved and in alternating order; time the last `steps`."""
    now = CLOCKS[clock]
    seconds: list[list[float]] = [[] for _ in runners]
    for round_index in range(warmup + steps):
        order: Iterable[int] = range(len(runners)) if round_index % 2 == 0 else reversed(range(len(runners)))
        for i in order:
            sync()
            start = now()
            runners[i]()
            sync()
            if round_index >= warmup:
                seconds[i].append(now() - start)
            if progress is not None:
                progress(1)
    return Timing(seconds)


def live_bytes(*objects: object) -> int:
    """Bytes of the distinct tensor storages reachable from modules, optimizers, tensors and containers."""
    seen: dict[int, int] = {}

    def visit(obj: object) -> None:
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
            if obj.grad is not None:
                visit(obj.grad)
        elif isinstance(obj, torch.nn.Module):
            for tensor in (*obj.parameters(), *obj.buffers()):
                visit(tensor)
        elif isinstance(obj, torch.optim.Optimizer):
            for state in obj.state.values():
                visit(state)
        elif isinstance(obj, dict):
            for value in obj.values():
                visit(value)
        elif isinstance(obj, list | tuple):
            for value in obj:
                visit(value)

    for obj in objects:
        visit(obj)
    return sum(seen.values())


def _profiled_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak of (allocated - freed) bytes that torch's CPU allocator reports during `fn`."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU
    )
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return peak


def _rss_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak resident set size during `fn` minus the resident size before it (Linux only)."""
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark VmHWM to the current RSS

    def field(name: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"{name} not in /proc/self/status")

    before = field("VmRSS")
    fn()
    return field("VmHWM") - before


def peak_memory_bytes(fn: Callable[[], object], *, device: str, method: str, live: Sequence[object] = ()) -> int:
    """Peak bytes held by torch while `fn` runs, including what `live` holds when it starts (see module doc)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()
    start = live_bytes(*live)
    if method == "rss":
        return start + _rss_peak_bytes(fn)
    return start + _profiled_peak_bytes(fn)


def device_kernel_times(fn: Callable[[], object], device: str) -> dict[str, float] | None:
    """Seconds the GPU spent in each kernel (by kernel name, memory copies included) during one call of `fn`;
    None off CUDA. Only the device's own events are summed, annotations left out: the profiler also charges
    each kernel to the CPU event that launched it (``self_device_time_total`` of ``cudaLaunchKernel`` and of
    aten ops) and to a GPU-side annotation around it, so a sum over every event counts a kernel two or three
    times."""
    if not device.startswith("cuda"):
        return None
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    times: dict[str, float] = {}
    for event in prof.events():
        # GPU-side user annotations (the optimizer's "Optimizer.step#AdamW.step") span the kernels they hold
        if event.device_type != torch.autograd.DeviceType.CPU and not getattr(event, "is_user_annotation", False):
            times[event.name] = times.get(event.name, 0.0) + event.self_device_time_total / 1e6
    return times


def device_kernel_seconds(fn: Callable[[], object], device: str) -> float | None:
    """Seconds the GPU spent in kernels during one call of `fn` (`device_kernel_times`, summed); None off
    CUDA. Over a step's wall time it is how busy the GPU was: near 1 where the work sets the pace, far below
    where the GPU waits on launches from Python."""
    times = device_kernel_times(fn, device)
    return None if times is None else sum(times.values())
