"""The papers' analyses of a trained model, on any corpus: graph-gate weights and attention entropy.

`graph_gate_profile` is the Graph-Transformer paper's Figure 5 (how the gate weighs the high-order
group per layer, against sentence length); `attention_entropy_profile` measures how peaked each
layer's attention is (the Attention Link paper argues that the link lets lower layers' attention
shape upper ones). Both return plain dicts (written as JSON), and `plot_*` draw them with matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .graph_fusions import FUSIONS, get_fusion
from .scoring import length_bucket_labels, source_length_bucket
from .translation.inference import length_sorted_batches

__all__ = ["attention_entropy_profile", "graph_gate_profile", "plot_attention_entropy", "plot_gate_profile"]

ATTENTION_KINDS = ("encoder", "decoder", "cross")
# Layers are numbered as Transformers indexes them (and as the config docs do: graph attention in
# layers 1..N-1), so that a number in a figure or JSON file is the module a user would inspect.
LAYER_INDEX = "i in model.model.encoder.layers[i] / decoder.layers[i], from 0"


def graph_gate_profile(
    tokenizer: Any, model: Any, texts: Sequence[str], edges: Sequence[int], batch_size: int = 32
) -> dict[str, Any]:
    """Mean graph-gate values per encoder layer and source-length bucket (the MoG papers' analysis).

    Layers are keyed by their index in ``model.model.encoder.layers`` ("1" .. "N-1"; layer 0 has no
    graph attention).

    ``gate`` fusion: the mean of the sigmoid gate w (weight of the high/middle-order groups against the
    low-order one) over positions and channels. ``self_gate``: the mean weight of each of the four groups.
    """
    fusion = getattr(model.config, "graph_fusion", None)
    gated = [name for name, entry in FUSIONS.items() if entry.gate_groups]
    if not getattr(model.config, "graph_attention", False) or not get_fusion(fusion).gate_groups:
        raise ValueError(f"this model has no graph gates (needs graph_attention with fusion {' or '.join(gated)})")
    groups = list(get_fusion(fusion).gate_groups)
    per_feature = get_fusion(fusion).gate_per_feature
    labels = length_bucket_labels(edges)
    sums: dict[tuple[int, int], torch.Tensor] = {}
    counts: dict[tuple[int, int], int] = {}
    for batch in length_sorted_batches(texts, batch_size):
        inputs = tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True).to(model.device)
        start = torch.full((len(batch), 1), model.config.decoder_start_token_id, device=model.device)
        with torch.inference_mode():
            gates = model(**inputs, decoder_input_ids=start, output_graph_gates=True).encoder_graph_gates
        mask = inputs["attention_mask"].unsqueeze(-1).to(torch.float32)
        # one gate per graph layer: encoder.layers[1:] (layer 0 keeps standard self-attention)
        for layer, gate in enumerate(gates, start=1):
            per_sentence = (gate.float() * mask).sum(1) / mask.sum(1)  # (batch, channels)
            if per_feature:  # one gate value per feature: its mean over the features
                per_sentence = per_sentence.mean(-1, keepdim=True)
            for row, i in zip(per_sentence.cpu(), batch):
                key = (layer, source_length_bucket(texts[i], edges))
                sums[key] = sums.get(key, 0) + row
                counts[key] = counts.get(key, 0) + 1
    layers = sorted({layer for layer, _ in sums})
    profile: dict[str, Any] = {"fusion": fusion, "groups": groups, "layer_index": LAYER_INDEX, "layers": {}}
    for layer in layers:
        profile["layers"][str(layer)] = {
            labels[b]: {
                "sentences": counts[(layer, b)],
                **{g: round(float(v), 4) for g, v in zip(groups, sums[(layer, b)] / counts[(layer, b)])},
            }
            for b in range(len(labels))
            if (layer, b) in counts
        }
    return profile


def _entropy(weights: torch.Tensor, query_mask: torch.Tensor) -> tuple[float, float]:
    """Sum over batch, heads and real query positions of the entropy (nats) of each attention row, and
    the number of rows summed. ``weights``: (batch, heads, queries, keys); ``query_mask``: (batch, queries)."""
    probabilities = weights.double().clamp_min(1e-30)
    entropy = -(weights.double() * probabilities.log()).sum(-1)  # (batch, heads, queries)
    mask = query_mask[:, None, :].to(entropy.dtype)
    return float((entropy * mask).sum()), float(mask.sum() * weights.shape[1])


def attention_entropy_profile(
    tokenizer: Any, model: Any, sources: Sequence[str], targets: Sequence[str], batch_size: int = 32
) -> dict[str, Any]:
    """Mean entropy (nats) of the attention distributions of each layer, by kind.

    Encoder self-attention over the sources; decoder self- and cross-attention with the reference
    translations fed to the decoder (teacher forcing), so every model is measured on the same inputs.
    The model must return attention weights (load it with ``attn_implementation="eager"``).
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    sums: dict[tuple[str, int], float] = {}
    counts: dict[tuple[str, int], float] = {}
    for batch in length_sorted_batches(sources, batch_size):
        features = tokenizer(
            [sources[i] for i in batch], text_target=[targets[i] for i in batch], return_tensors="pt", padding=True
        ).to(model.device)
        labels = features.pop("labels")
        decoder_mask = labels != tokenizer.pad_token_id
        decoder_inputs = model.prepare_decoder_input_ids_from_labels(labels=labels)
        with torch.inference_mode():
            output = model(
                **features,
                decoder_input_ids=decoder_inputs,
                decoder_attention_mask=decoder_mask.long(),
                output_attentions=True,
            )
        if not output.encoder_attentions or output.encoder_attentions[0] is None:
            raise ValueError("the model returned no attention weights: load it with attn_implementation='eager'")
        per_kind = {
            "encoder": (output.encoder_attentions, features["attention_mask"]),
            "decoder": (output.decoder_attentions, decoder_mask),
            "cross": (output.cross_attentions, decoder_mask),
        }
        for kind, (layers, mask) in per_kind.items():
            for layer, weights in enumerate(layers):
                total, rows = _entropy(weights, mask)
                sums[(kind, layer)] = sums.get((kind, layer), 0.0) + total
                counts[(kind, layer)] = counts.get((kind, layer), 0.0) + rows
    profile: dict[str, Any] = {"unit": "nats", "sentences": len(sources), "layer_index": LAYER_INDEX}
    for kind in ATTENTION_KINDS:
        layers = sorted(layer for k, layer in sums if k == kind)
        profile[kind] = [round(sums[(kind, layer)] / counts[(kind, layer)], 4) for layer in layers]
    return profile


def plot_gate_profile(profile: Mapping[str, Any], path: str | Path, title: str = "") -> Path:
    """Gate weight of the high-order group(s) per encoder layer against source length (one line per layer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    group = "w" if profile["fusion"] == "gate" else "high"
    figure, axes = plt.subplots(figsize=(6, 4))
    for layer, buckets in profile["layers"].items():
        labels = list(buckets)
        axes.plot(labels, [buckets[label][group] for label in labels], marker="o", label=f"encoder layer {layer}")
    axes.set_xlabel("source length (words)")
    axes.set_ylabel("gate weight of the high-order group" if group == "w" else "weight of the high-order group")
    axes.set_title(title or f"graph gates ({profile['fusion']})")
    axes.legend(fontsize="small")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_attention_entropy(profiles: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Attention entropy per layer, one panel per kind (encoder, decoder, cross), one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(ATTENTION_KINDS), figsize=(12, 3.6), sharey=True)
    for panel, kind in zip(axes, ATTENTION_KINDS):
        for name, profile in profiles.items():
            values = profile[kind]
            panel.plot(range(len(values)), values, marker="o", label=name)
        panel.set_title(f"{kind} attention")
        panel.set_xlabel("layer (index in encoder/decoder.layers)")
        panel.xaxis.get_major_locator().set_params(integer=True)
    axes[0].set_ylabel("mean entropy (nats)")
    axes[-1].legend(fontsize="small")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
