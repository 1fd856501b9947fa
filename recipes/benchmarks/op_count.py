"""Dispatched-op counts: what a step costs where the GPU waits on launches, counted on a CPU.

At the batch sizes where a GPU mostly waits (recipes/benchmarks/RESULTS.md, "Op counts"), a variant's speed
ratio to vanilla follows the number of kernels a step launches, and that number is the same on any device.
This counts the aten ops a step dispatches (forward, backward and the optimizer's step) with a
`TorchDispatchMode`, counting each scaled-dot-product attention as one op forward and one backward
whatever kernel the CPU would pick (its flash kernel refuses the link's wider queries and keys, and its math
fallback would count as a dozen ops a GPU runs as one). It also measures the bytes a training forward leaves
alive for backward, the activation memory a training step holds at its peak.

    python recipes/benchmarks/op_count.py                  # the table, 6+6 layers, batch 4
    python recipes/benchmarks/op_count.py --variants al-prev-both
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from unittest import mock

import torch
from benchmark_page import header, run_start, table
from common import DEFAULT_FAMILY, VARIANTS, Shape, build_model, random_batch, select_variants
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from hf_graphtf import graph_attention
from hf_graphtf.families import FAMILIES

#: the shape the counts are taken at: opus-mt's depth and heads, small widths (counts do not depend on them)
COUNT_SHAPE = Shape(64, 128, 8, 6, 6, vocab=256, batch_size=4, length=12)
#: ops that only describe a tensor (views, metadata) and launch no kernel on any device
_NO_KERNEL = {
    "aten.view",
    "aten._unsafe_view",
    "aten.t",
    "aten.transpose",
    "aten.permute",
    "aten.expand",
    "aten.unsqueeze",
    "aten.squeeze",
    "aten.slice",
    "aten.select",
    "aten.split",
    "aten.split_with_sizes",
    "aten.unbind",
    "aten.alias",
    "aten.detach",
    "aten.as_strided",
    "aten._reshape_alias",
    "aten.reshape",
    "aten.is_same_size",
    "aten.sym_size",
    "aten.sym_stride",
    "aten.sym_numel",
    "aten.sym_storage_offset",
    "aten.lift_fresh",
    "aten._local_scalar_dense",
    "aten.empty",
    "aten.empty_like",
    "aten.empty_strided",
    "aten.new_empty",
    "aten.new_empty_strided",
    "aten.zeros_like",
    "aten.ones_like",
    "aten.new_zeros",
    "aten.new_ones",
    "aten.zeros",
    "aten.ones",
}


class _OpCounter(TorchDispatchMode):
    """Counts the aten ops that launch a kernel, by name; while `quiet`, counts nothing (one SDPA's inside)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.quiet = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if not self.quiet and name not in _NO_KERNEL:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


class _OneSdpa(torch.autograd.Function):
    """SDPA as one counted op forward and one backward: the kernels inside run quietly (the backward
    recomputes the forward under autograd, quietly, and takes its gradients)."""

    @staticmethod
    def forward(ctx, counter: _OpCounter, sdpa: Callable, kwargs: dict, query, key, value):
        ctx.counter, ctx.sdpa, ctx.kwargs = counter, sdpa, kwargs
        ctx.save_for_backward(query, key, value)
        counter.ops["sdpa"] += 1
        counter.quiet += 1
        try:
            return _in_fused_layout(sdpa(query, key, value, **kwargs))
        finally:
            counter.quiet -= 1

    @staticmethod
    def backward(ctx, grad_output):
        counter = ctx.counter
        saved = ctx.saved_tensors  # counted: a kernel's saved inputs may be made again here (`saved_joins`)
        counter.ops["sdpa_backward"] += 1
        counter.quiet += 1
        try:
            inputs = [tensor.detach().requires_grad_(tensor.requires_grad) for tensor in saved]
            with torch.enable_grad():
                output = ctx.sdpa(*inputs, **ctx.kwargs)
            wanted = [tensor for tensor in inputs if tensor.requires_grad]
            grads = iter(torch.autograd.grad(output, wanted, grad_output))
            # a GPU's fused backward writes each gradient in its input's layout (`empty_strided` of the
            # input's strides in the memory-efficient kernel, `empty_like` in flash): the math kernel's
            # contiguous ones are laid out so here, inside the one counted op
            return (
                None,
                None,
                None,
                *(_laid_out_like(next(grads), tensor) if tensor.requires_grad else None for tensor in inputs),
            )
        finally:
            counter.quiet -= 1


def _in_fused_layout(output: torch.Tensor) -> torch.Tensor:
    """SDPA's output ``(batch, heads, len, head_dim)`` laid out as a GPU's fused kernels write it (flash,
    memory-efficient and cuDNN alike: ``(batch, len, heads, head_dim)`` in memory), so that Transformers'
    ``transpose(1, 2).contiguous()`` after it copies nothing, as on a GPU; the CPU's math kernel, which
    serves queries wider than values, writes the other layout."""
    if output.dim() != 4 or output.transpose(1, 2).is_contiguous():
        return output
    return output.transpose(1, 2).contiguous().transpose(1, 2)


def _laid_out_like(grad: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """`grad` copied into a tensor with `tensor`'s strides (where they differ)."""
    if grad.stride() == tensor.stride():
        return grad
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=grad.dtype, device=grad.device).copy_(grad)


class _SdpaAsOneOp(TorchFunctionMode):
    def __init__(self, counter: _OpCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            query, key, value, *rest = args
            names = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
            kwargs = {**dict(zip(names, rest, strict=False)), **kwargs}
            if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
                return _OneSdpa.apply(self.counter, func, kwargs, query, key, value)
            self.counter.ops["sdpa"] += 1
            self.counter.quiet += 1
            try:
                return _in_fused_layout(func(query, key, value, **kwargs))
            finally:
                self.counter.quiet -= 1
        return func(*args, **kwargs)


def count_ops(step: Callable[[], object]) -> Counter[str]:
    """The kernel-launching ops `step()` dispatches, by name, SDPA counted as one op each way."""
    counter = _OpCounter()
    with _SdpaAsOneOp(counter), counter:
        step()
    return counter.ops


def saved_bytes(forward: Callable[[], torch.Tensor], parameters: Iterable[torch.Tensor]) -> int:
    """Bytes of the storages `forward()` makes that are still alive when it has returned its loss: what autograd
    keeps for backward, the activation memory a training step holds at its peak. Storages of `parameters` (the
    weights, and views of them such as a transposed weight), saved too but alive anyway, and the loss itself are
    left out. SDPA saves its inputs, as a GPU's fused kernels do (the CPU's math kernel, which serves the link's
    wider queries and keys, would save its score matrices).

    Counted from the storages alive, not from what autograd's saved-tensor hooks are handed, so that a saved
    tensor kept in another form (the link's joins kept as their halves, `hf_graphtf.saved_joins`, which steps
    aside under other hooks) is counted as what it really holds."""
    weights = {parameter.untyped_storage().data_ptr() for parameter in parameters}
    made = _StoragesMade()
    with _SdpaAsOneOp(_OpCounter()), made:  # SDPA saves its inputs, as a GPU's fused kernels do
        loss = forward()
    gc.collect()
    alive = {id(storage): storage for storage in (ref() for ref in made.storages.values()) if storage is not None}
    left_out = weights | {loss.untyped_storage().data_ptr()}
    total = sum(storage.nbytes() for storage in alive.values() if storage.data_ptr() not in left_out)
    del loss
    return total


class _StoragesMade(TorchDispatchMode):
    """Keeps a weak reference to the storage of every tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.storages: dict[int, weakref.ref] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for tensor in torch.utils._pytree.tree_leaves(result):
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                self.storages[id(storage)] = weakref.ref(storage)
        return result


@dataclass(frozen=True)
class StepCounts:
    """One variant's counts: ops per training step (forward, backward, AdamW), by name, and per greedy decoding
    step, and the activation bytes a training step saves."""

    training_by_op: Counter[str]
    decode_ops: int
    saved_bytes: int

    @property
    def training_ops(self) -> int:
        return sum(self.training_by_op.values())


def variant_counts(
    variant: str, family: str = DEFAULT_FAMILY, shape: Shape = COUNT_SHAPE, link_kernel: str = "concat"
) -> StepCounts:
    """Counts for one variant at `shape`, in float32 with SDPA, the link on `link_kernel` (the concat kernel,
    which ``attention_link_kernel="auto"`` picks on a GPU, where the counts matter)."""
    chosen = None if variant == "vanilla" else VARIANTS[variant]
    with as_on_a_gpu():
        return _counts(build_model(chosen, shape, family=family, link_kernel=link_kernel).train(), shape)


@contextlib.contextmanager
def as_on_a_gpu():
    """Graph layers take the path a GPU takes (the fused one, `graph_attention.FUSED_PATH_MEASURED`)."""
    on_gpu = {
        (device, shared): graph_attention.fused_path_pays("cuda", shared)
        for device, shared in graph_attention.FUSED_PATH_MEASURED
    }
    with mock.patch.dict(graph_attention.FUSED_PATH_MEASURED, on_gpu):
        yield


def _counts(model: torch.nn.Module, shape: Shape) -> StepCounts:
    for module in model.modules():  # dropout's draws and masks add ops the comparison is not about
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            if isinstance(getattr(module, name, None), float):
                setattr(module, name, 0.0)
    batch = random_batch(shape)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def training_step() -> None:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    training_step()  # optimizer state exists from here on, as in every later step
    training_by_op = count_ops(training_step)
    activations = saved_bytes(lambda: model(**batch).loss, model.parameters())
    model.eval()
    with torch.no_grad():
        encoder_outputs = model.get_encoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        start = torch.full((shape.batch_size, 1), model.config.decoder_start_token_id)
        first = model(
            encoder_outputs=encoder_outputs,
            attention_mask=batch["attention_mask"],
            decoder_input_ids=start,
            use_cache=True,
        )
        step_ids = first.logits[:, -1:].argmax(-1)

        def decode_step() -> None:
            model(
                encoder_outputs=encoder_outputs,
                attention_mask=batch["attention_mask"],
                decoder_input_ids=step_ids,
                past_key_values=copy.deepcopy(first.past_key_values),  # the counted step appends to its own
                use_cache=True,
            )

        decode = sum(count_ops(decode_step).values())
    return StepCounts(training_by_op, decode, activations)


DEFAULT_VARIANTS = "al-prev-both,al-cum-both,graph-half+gate,graph-self_gate,graph-shared+gate"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--variants", default="al-prev-both,al-cum-both,graph-half+gate,graph-self_gate,graph-shared+gate"
    )
    parser.add_argument("--family", choices=sorted(FAMILIES), default=DEFAULT_FAMILY)
    args = parser.parse_args()
    start = run_start()
    variants = ["vanilla", *(variant.name for variant in select_variants(args.variants, args.family))]
    rows = {variant: variant_counts(variant, args.family) for variant in variants}
    base = rows["vanilla"]
    settings = {
        "model": f"{args.family}, {COUNT_SHAPE.describe()}, batch {COUNT_SHAPE.batch_size}, float32, sdpa",
        "counted": "aten ops that launch a kernel (views left out), SDPA as one op each way (its output and "
        "gradients laid out as a GPU's fused kernels write them); a training step is "
        "forward, backward and AdamW (foreach); a decode step is one greedy token with a filled KV cache; "
        "the link on its concat kernel (what `auto` picks on a GPU); saved activations: the bytes of the storages a "
        "training forward leaves alive for backward (SDPA saving its inputs, as fused kernels do), weights left out",
    }
    print(header("Dispatched ops per step and saved activations: variant / vanilla", settings, "cpu", start))
    print()
    print(
        table(
            ["variant", "ops / training step", "vs vanilla", "ops / decode step", "vs vanilla", "saved activations"],
            [
                [
                    variant,
                    f"{counts.training_ops:,}",
                    f"{counts.training_ops / base.training_ops:.2f}x",
                    f"{counts.decode_ops:,}",
                    f"{counts.decode_ops / base.decode_ops:.2f}x",
                    f"{counts.saved_bytes / base.saved_bytes:.2f}x",
                ]
                for variant, counts in rows.items()
            ],
        )
    )


if __name__ == "__main__":
    main()
