"""The (family x options) matrix that the model test battery runs over, and tiny inputs.

The battery runs on the CPU in float64. ``HF_GRAPHTF_TEST_DEVICE=cuda`` runs the same tests on a GPU
(recipes/gpu/run_all.sh does, for the SPEC re-computation and the generation tests), and
``HF_GRAPHTF_TEST_DTYPE=float32`` in float32, where `TOLERANCE` widens to what float32 can hold.
"""

from __future__ import annotations

import os

import torch

from hf_graphtf import (
    GraphBartConfig,
    GraphBartForConditionalGeneration,
    GraphMarianConfig,
    GraphMarianMTModel,
)

PAD, EOS, VOCAB = 0, 1, 40
DEVICE = os.environ.get("HF_GRAPHTF_TEST_DEVICE", "cpu")
DTYPE = getattr(torch, os.environ.get("HF_GRAPHTF_TEST_DTYPE", "float64"))
#: equality to a plain re-computation: to float64 rounding, or what float32 keeps of it
TOLERANCE = {"rtol": 1e-10, "atol": 1e-10} if DTYPE == torch.float64 else {"rtol": 2e-4, "atol": 2e-5}

#: family name -> (config class, seq2seq class, vanilla config class name, vanilla model class name)
FAMILIES = {
    "marian": (GraphMarianConfig, GraphMarianMTModel),
    "bart": (GraphBartConfig, GraphBartForConditionalGeneration),
}

#: every option value of SPEC.md at least once; ids name the variant in test reports
OPTION_MATRIX = {
    "vanilla": {},
    "al-enc": {"attention_link": "encoder"},
    "al-dec": {"attention_link": "decoder"},
    "al-both": {"attention_link": "both"},
    "al-both-cum": {"attention_link": "both", "attention_link_mode": "cumulative"},
    "al-enc-cum": {"attention_link": "encoder", "attention_link_mode": "cumulative"},
    "graph-sum": {"graph_attention": True, "graph_fusion": "sum"},
    "graph-gate": {"graph_attention": True, "graph_fusion": "gate"},
    "graph-self_gate": {"graph_attention": True, "graph_fusion": "self_gate"},
    "graph-half-gate": {"graph_attention": True, "graph_half_dim": True},
    "graph-shared-gate": {"graph_attention": True, "graph_shared_qkv": True},
    "graph-half-shared-self_gate": {
        "graph_attention": True,
        "graph_half_dim": True,
        "graph_shared_qkv": True,
        "graph_fusion": "self_gate",
    },
    "graph-gate+al-dec-cum": {
        "graph_attention": True,
        "attention_link": "decoder",
        "attention_link_mode": "cumulative",
    },
}


def tiny_config(family: str, options: dict | None = None, **overrides):
    """A 3+3-layer, d=16 model config: small enough for float64 checks in milliseconds."""
    config_class, _ = FAMILIES[family]
    kwargs = dict(
        vocab_size=VOCAB,
        d_model=16,
        encoder_layers=3,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        init_std=0.3,  # peaked attention, so a wrong score term shows in the outputs
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=None if family == "marian" else 2,
        decoder_start_token_id=PAD if family == "marian" else EOS,
        forced_eos_token_id=None,
        attn_implementation="eager",
    )
    kwargs.update(options or {})
    kwargs.update(overrides)
    return config_class(**kwargs)


def tiny_model(family: str, options: dict | None = None, seed: int = 0, dtype=None, **overrides):
    """A tiny randomly initialised seq2seq model in eval mode on `DEVICE` (`DTYPE` unless asked otherwise)."""
    _, model_class = FAMILIES[family]
    torch.manual_seed(seed)
    model = model_class(tiny_config(family, options, **overrides)).to(DEVICE, dtype or DTYPE).eval()
    _randomize_biases(model)
    return model


def _randomize_biases(model: torch.nn.Module) -> None:
    """Zero-initialised biases and LayerNorms would hide wrong bias or norm handling: perturb them."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "layer_norm" in name or "layernorm" in name:
                param.add_(0.1 * torch.randn(param.shape, generator=generator, dtype=param.dtype).to(param.device))


def source_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources of different lengths, the second right-padded."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, 10, EOS], [11, 12, 13, EOS, PAD, PAD, PAD]], device=DEVICE)
    return input_ids, (input_ids != PAD).long()


def target_batch() -> torch.Tensor:
    return torch.tensor([[PAD, 14, 15, 16, 17], [PAD, 18, 19, 20, 21]], device=DEVICE)
