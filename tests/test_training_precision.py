"""Which precision and attention kernel a run trains in (`precision: auto`, `attn_implementation: auto`), and
that bf16 runs give finite losses and the fp32 checkpoint format."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from experiment_fixtures import (
    plateau_run,
)
from recipe_fixtures import (
    one_thread,  # noqa: F401  (autouse fixture)
    tiny_recipe,
    write_recipe,
    write_tiny_corpus,
)
from safetensors.torch import load_file

from hf_graphtf.training import parse_recipe_args
from hf_graphtf.training.precision import (
    BF16_CPU_ATTENTION,
    EmulatedPrecisionWarning,
    cpu_has_bf16,
    resolve_attention,
    resolve_precision,
)


def test_bf16_training_gives_finite_losses_and_the_fp32_checkpoint_format(tmp_path):
    last = {"early_stopping_patience": None, "load_best_model_at_end": False, "max_steps": 3}
    plateau_run(tmp_path, "fp32", precision="fp32", **last)
    bf16 = plateau_run(tmp_path, "bf16", precision="bf16", **last)
    assert bf16["train"]["precision"] == "bf16" and bf16["training"]["precision"] == "bf16"
    assert torch.isfinite(torch.tensor(bf16["train"]["train_loss"]))
    assert torch.isfinite(torch.tensor(bf16["eval"]["eval_loss"]))
    a = load_file(tmp_path / "fp32" / "model.safetensors")
    b = load_file(tmp_path / "bf16" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(b[key].dtype == a[key].dtype == torch.float32 and b[key].shape == a[key].shape for key in a)
    assert not all(torch.equal(a[key], b[key]) for key in a)  # bf16 autocast did run


@pytest.mark.slow
def test_torch_compile_training_gives_finite_losses_and_the_same_checkpoint_format(tmp_path):
    last = {"early_stopping_patience": None, "load_best_model_at_end": False, "max_steps": 2}
    plateau_run(tmp_path, "plain", **last)
    compiled = plateau_run(tmp_path, "compiled", torch_compile=True, **last)
    assert torch.isfinite(torch.tensor(compiled["train"]["train_loss"]))
    a = load_file(tmp_path / "plain" / "model.safetensors")
    b = load_file(tmp_path / "compiled" / "model.safetensors")
    assert a.keys() == b.keys()


def _cpuinfo(tmp_path: Path, flags: str) -> Path:
    path = tmp_path / f"cpuinfo-{len(list(tmp_path.glob('cpuinfo-*')))}"  # one file per CPU, all kept
    path.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse2 {flags}\n", encoding="utf-8")
    return path


def test_auto_precision_takes_bf16_only_on_a_cpu_with_bf16_instructions(tmp_path):
    with_bf16 = _cpuinfo(tmp_path, "avx2 avx512f avx512_bf16")
    assert cpu_has_bf16(with_bf16) and resolve_precision("auto", use_cpu=True, cpuinfo=with_bf16) == "bf16"
    avx2 = _cpuinfo(tmp_path, "avx2 fma")
    assert not cpu_has_bf16(avx2) and resolve_precision("auto", use_cpu=True, cpuinfo=avx2) == "fp32"
    with pytest.warns(EmulatedPrecisionWarning, match="many times slower than fp32"):
        assert resolve_precision("bf16", use_cpu=True, cpuinfo=avx2) == "bf16"  # asked for: kept, and warned
    assert not cpu_has_bf16(tmp_path / "absent")  # not Linux: no flags, fp32
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing said where bf16 is native, on a GPU, or where flags are unknown
        assert resolve_precision("bf16", use_cpu=True, cpuinfo=with_bf16) == "bf16"
        assert resolve_precision("bf16", use_cpu=False, cpuinfo=avx2) == "bf16"
        assert resolve_precision("bf16", use_cpu=True, cpuinfo=tmp_path / "absent") == "bf16"
        assert resolve_precision("fp32", use_cpu=True, cpuinfo=avx2) == "fp32"
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp8", use_cpu=True)


def test_auto_attention_takes_the_measured_kernel_for_bf16_on_each_cpu_kind(tmp_path):
    """bf16 on a CPU with AMX or with avx512_bf16 alone trains with eager attention (SDPA's CPU flash backward
    was the slow part on both); sdpa for fp32, on a GPU, and where asked."""
    amx = _cpuinfo(tmp_path, "avx512f avx512_bf16 amx_bf16 amx_tile")
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=amx) == "eager" == BF16_CPU_ATTENTION["amx_bf16"]
    avx512 = _cpuinfo(tmp_path, "avx512f avx512_bf16")
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512) == "eager"
    assert BF16_CPU_ATTENTION["avx512_bf16"] == "eager"
    assert resolve_attention("auto", "fp32", on_cpu=True, cpuinfo=amx) == "sdpa"
    assert resolve_attention("auto", "bf16", on_cpu=False, cpuinfo=amx) == "sdpa"
    assert resolve_attention("sdpa", "bf16", on_cpu=True, cpuinfo=amx) == "sdpa"  # asked for: kept
    with pytest.raises(ValueError, match="attn_implementation must be one of"):
        resolve_attention("flash", "bf16", on_cpu=True)
    corpus = write_tiny_corpus(tmp_path / "corpus")
    model_args, _, _ = parse_recipe_args([str(write_recipe(tmp_path / "r.yaml", tiny_recipe(corpus, tmp_path / "o")))])
    assert model_args.attn_implementation == "sdpa"  # fp32: resolved when the recipe is read, recorded by the run


def test_auto_attention_keeps_sdpa_for_a_linked_model(tmp_path, monkeypatch):
    """A linked model's sdpa path on a CPU sums materialised scores and does not reach the flash backward
    eager avoids: eager measured no faster for it (1.63x fp32 against sdpa's 1.61x), so ``auto`` keeps sdpa,
    the kernel the link's earlier converged runs trained with; the recipe reader passes the option on."""
    avx512 = _cpuinfo(tmp_path, "avx512f avx512_bf16")
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="both") == "sdpa"
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="decoder") == "sdpa"
    assert resolve_attention("auto", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="none") == "eager"
    assert resolve_attention("eager", "bf16", on_cpu=True, cpuinfo=avx512, attention_link="both") == "eager"
    from hf_graphtf.training import precision

    monkeypatch.setattr(precision, "cpu_kind", lambda cpuinfo=None: "avx512_bf16")
    corpus = write_tiny_corpus(tmp_path / "corpus")
    for link, kernel in (("both", "sdpa"), ("none", "eager")):
        recipe = tiny_recipe(corpus, tmp_path / link, precision="bf16", use_cpu=True, attention_link=link)
        model_args, _, _ = parse_recipe_args([str(write_recipe(tmp_path / f"{link}.yaml", recipe))])
        assert (model_args.attn_implementation, model_args.attn_implementation_from_auto) == (kernel, True), link


def test_precision_and_the_trainers_own_flags_agree(tmp_path):
    corpus = write_tiny_corpus(tmp_path / "corpus")
    base = tiny_recipe(corpus, tmp_path / "out")
    _, _, args = parse_recipe_args([str(write_recipe(tmp_path / "a.yaml", {**base, "bf16": True}))])
    assert args.precision == "bf16"  # a Transformers recipe's bf16: true is recorded as such
    _, _, args = parse_recipe_args([str(write_recipe(tmp_path / "b.yaml", base))])
    assert args.precision == "fp32" and not args.bf16
    with pytest.raises(ValueError, match="precision 'fp32' and bf16: true"):
        parse_recipe_args([str(write_recipe(tmp_path / "c.yaml", {**base, "bf16": True, "precision": "fp32"}))])
