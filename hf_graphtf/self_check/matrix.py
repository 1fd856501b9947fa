"""The (family x options) matrix that the model battery and `hf-graphtf check` run over, and tiny inputs.

Defined once, here: the tests (tests/model_matrix.py) and the self-check read the same families, the same
option sets and the same tiny models, so what a user checks on their install is what CI checks.
"""

from __future__ import annotations

import torch

from ..families import FAMILIES as MODEL_FAMILIES

PAD, EOS, VOCAB = 0, 1, 40

#: family name -> (config class, seq2seq class), from the package's family table
FAMILIES = {name: (family.config_class, family.seq2seq_class) for name, family in MODEL_FAMILIES.items()}

#: every option value of SPEC.md at least once; ids name the variant in test reports and check lines
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


def tiny_model(
    family: str,
    options: dict | None = None,
    seed: int = 0,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float64,
    **overrides,
):
    """A tiny randomly initialised seq2seq model in eval mode on ``device`` in ``dtype``."""
    _, model_class = FAMILIES[family]
    torch.manual_seed(seed)
    model = model_class(tiny_config(family, options, **overrides)).to(device, dtype).eval()
    randomize_biases(model)
    return model


def randomize_biases(model: torch.nn.Module) -> None:
    """Zero-initialised biases and LayerNorms would hide wrong bias or norm handling: perturb them."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "layer_norm" in name or "layernorm" in name:
                param.add_(0.1 * torch.randn(param.shape, generator=generator, dtype=param.dtype).to(param.device))


def source_batch(device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources of different lengths, the second right-padded."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, 10, EOS], [11, 12, 13, EOS, PAD, PAD, PAD]], device=device)
    return input_ids, (input_ids != PAD).long()


def target_batch(device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.tensor([[PAD, 14, 15, 16, 17], [PAD, 18, 19, 20, 21]], device=device)
