"""The (family x options) matrix that the model battery and `hf-graphtf check` run over, and tiny inputs.

Defined once, here: the tests (tests/model_matrix.py) and the self-check read the same families, the same
option sets and the same tiny models, so what a user checks on their install is what CI checks.
"""

from __future__ import annotations

import torch

from ..families import FAMILIES as MODEL_FAMILIES
from ..variants import variant_options

PAD, EOS, BOS, VOCAB = 0, 1, 2, 40
#: the token that stands for the target language's code in families that force one (M2M100/NLLB)
TARGET_LANGUAGE = 3

#: family name -> (config class, seq2seq class), from the package's family table
FAMILIES = {name: (family.config_class, family.seq2seq_class) for name, family in MODEL_FAMILIES.items()}

#: every option value of docs/method.md at least once; ids name the variant in test reports and check lines
OPTION_MATRIX = {
    name: variant_options(name)
    for name in (
        "vanilla",
        "al-enc",
        "al-dec",
        "al-both",
        "al-both-cum",
        "al-enc-cum",
        "al-both-gate",
        "al-dec-cum-gate",
        "graph-sum",
        "graph-gate",
        "graph-self_gate",
        "graph-half-gate",
        "graph-shared-gate",
        "graph-half-shared-self_gate",
        "graph-gate+al-dec-cum",
    )
}


#: per-family changes to the tiny shape: at d=16 a tied LM head makes M2M100 repeat one token from the
#: first step on, which would leave the generation checks nothing to tell apart (NLLB's own tied head is
#: checked by the fine-tuning tests' stand-in)
TINY_OVERRIDES = {"m2m_100": {"tie_word_embeddings": False}}


def supports(family: str, options: dict) -> bool:
    """Whether `family` defines the option set (graph-group attention needs a post-LN family)."""
    return MODEL_FAMILIES[family].supports_graph_attention or not options.get("graph_attention", False)


def options_for(family: str) -> dict[str, dict]:
    """The rows of `OPTION_MATRIX` that `family` defines."""
    return {name: options for name, options in OPTION_MATRIX.items() if supports(family, options)}


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
        **MODEL_FAMILIES[family].special_token_ids(pad=PAD, eos=EOS, bos=BOS),
        forced_eos_token_id=None,
        attn_implementation="eager",
    )
    kwargs.update(TINY_OVERRIDES.get(family, {}))
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
    if MODEL_FAMILIES[family].target_language_token:  # generation starts with the target language's code
        model.generation_config.forced_bos_token_id = TARGET_LANGUAGE
    return model


def randomize_biases(model: torch.nn.Module) -> None:
    """Zero-initialised biases, LayerNorms and learned link gates would hide wrong bias, norm or gate
    handling: perturb them (a gate at zero computes what no link computes)."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("bias", "link_gate")) or "layer_norm" in name or "layernorm" in name:
                param.add_(0.1 * torch.randn(param.shape, generator=generator, dtype=param.dtype).to(param.device))


def source_batch(device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources of different lengths, the second right-padded."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9, 10, EOS], [11, 12, 13, EOS, PAD, PAD, PAD]], device=device)
    return input_ids, (input_ids != PAD).long()


def target_batch(device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.tensor([[PAD, 14, 15, 16, 17], [PAD, 18, 19, 20, 21]], device=device)
