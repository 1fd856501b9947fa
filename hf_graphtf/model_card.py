"""The model card (README.md) written next to a trained model and uploaded with it.

The card is rendered from the run's ``results.json`` content alone, with `huggingface_hub`'s
`ModelCard`: the YAML metadata (languages, license, datasets, metrics, tags and a ``model-index``
with the test BLEU and chrF) comes from `ModelCardData`, the text from the Jinja template
``model_card_template.md`` shipped inside the package (``model_cards/template.md`` in the repository
points to it).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .families import FAMILIES

TEMPLATE_PATH = Path(__file__).with_name("model_card_template.md")
CARD_FILE = "README.md"


def _family_title(family: str) -> str:
    return FAMILIES[family].display_name if family in FAMILIES else family


def describe_variant(options: dict[str, Any]) -> str:
    """One phrase naming what the options change, for the card's first paragraph."""
    parts = []
    if options.get("attention_link", "none") != "none":
        where = {"encoder": "the encoder", "decoder": "the decoder", "both": "the encoder and the decoder"}
        gate = ", learned per-head gate" if options.get("attention_link_gate", "none") == "learned" else ""
        parts.append(
            f"attention link in {where[options['attention_link']]} ({options['attention_link_mode']} scores{gate})"
        )
    if options.get("graph_attention"):
        extras = [name for name in ("graph_half_dim", "graph_shared_qkv") if options.get(name)]
        suffix = f", {', '.join(extras)}" if extras else ""
        parts.append(f"graph-group encoder attention with {options['graph_fusion']} fusion{suffix}")
    return "; ".join(parts) if parts else "the vanilla Transformer (no graph or link option)"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-").lower() or "corpus"


#: stands for the Hub user in the usage code of a card written before any upload
HUB_ID_PLACEHOLDER = "<your-hub-username>"


def build_card_data(results: dict[str, Any], model_id: str) -> ModelCardData:
    """The card's YAML metadata, with a ``model-index`` entry per test score."""
    model, data = results["model"], results["data"]
    options = model["options"]
    tags = ["translation", "hf_graphtf", model["model_type"]]
    if options.get("attention_link", "none") != "none":
        tags.append("attention-link")
    if options.get("graph_attention"):
        tags.append("graph-transformer")
    # `datasets:` links Hub datasets: only a corpus loaded from the Hub is named there
    dataset_id = data.get("hub_dataset") or _slug(os.path.basename(os.path.normpath(data["corpus"])))
    eval_results = []
    for key, suffix in (("test", ""), ("test_multi_reference", " (all references)")):
        if key not in results:
            continue
        for metric, name in (("bleu", "BLEU"), ("chrf", "chrF")):
            eval_results.append(
                EvalResult(
                    task_type="translation",
                    task_name=f"Translation {data['src_lang']}-{data['tgt_lang']}",
                    dataset_type=dataset_id,
                    dataset_name=data["name"],
                    dataset_config=data.get("corpus_config"),
                    dataset_split=data["splits"]["test"],
                    metric_type=metric,
                    metric_name=name + suffix,
                    metric_value=results[key][metric],
                    metric_config=results[key][f"{metric}_signature"],
                )
            )
    return ModelCardData(
        language=[data["src_lang"], data["tgt_lang"]],
        license=model.get("license"),
        library_name="transformers",
        pipeline_tag="translation",
        tags=tags,
        datasets=[data["hub_dataset"]] if data.get("hub_dataset") else None,
        metrics=["bleu", "chrf"],
        model_name=model_id.split("/")[-1],
        eval_results=eval_results or None,
    )


ATTENTION_LINK_BIBTEX = """@article{min2023attentionlink,
  title   = {Attention Link: An Efficient Attention-Based Low Resource Machine Translation Architecture},
  author  = {Min, Zeping},
  journal = {arXiv preprint arXiv:2302.00340},
  year    = {2023}
}"""
GRAPH_BIBTEX = """@article{duan2020graph,
  title   = {Graph-to-Sequence Neural Machine Translation},
  author  = {Duan, Sufeng and Zhao, Hai and Wang, Rui},
  journal = {arXiv preprint arXiv:2009.07489},
  year    = {2020}
}

@article{duan2021multiordergraph,
  title   = {To Understand Representation of Layer-aware Sequence Encoders as Multi-order-graph},
  author  = {Duan, Sufeng and Zhao, Hai},
  journal = {arXiv preprint arXiv:2101.06397},
  note    = {ICLR 2021 submission},
  year    = {2021}
}"""


def citations(options: dict[str, Any]) -> str:
    """BibTeX of the papers whose method the model uses (none for a vanilla model)."""
    entries = []
    if options.get("attention_link", "none") != "none":
        entries.append(ATTENTION_LINK_BIBTEX)
    if options.get("graph_attention"):
        entries.append(GRAPH_BIBTEX)
    return "\n\n".join(entries)


def limitations(results: dict[str, Any]) -> list[str]:
    """What a user must know about this particular run: how it stopped, whether it was still learning,
    evaluation sentences it had seen in training or cut, and the recipe's own notes (``card_limitations``)."""
    train, notes = results.get("train") or {}, []
    history = train.get("validation_bleu") or []
    still_rising = bool(history) and history[-1][1] >= max(bleu for _, bleu in history)
    reason = train.get("stop_reason")
    by_minutes = reason == "time budget" or bool(train.get("stopped_by_time_budget"))
    if by_minutes or reason in ("step cap", "epoch cap"):
        budget = "time budget (`max_train_minutes`)" if by_minutes else reason
        rising = ", with validation BLEU still rising at the last evaluation: the model is undertrained."
        notes.append(
            f"Training ended at its {budget} after {train.get('global_step')} steps" + (rising if still_rising else ".")
        )
        if by_minutes:
            notes.append(
                "A budget in minutes trains as many steps as the machine manages: the same recipe on another "
                "machine stops at another step, with another score."
            )
    elif reason == "validation plateau":
        notes.append(
            f"Training stopped when validation BLEU stopped improving; the best checkpoint (step "
            f"{train.get('best_step')}) is the one saved."
        )
    data = results.get("data") or {}
    for role, count in (data.get("sources_also_in_train") or {}).items():
        if count:
            notes.append(f"{count} {role} sources also occur in the training split: scores on them measure memory.")
    test_cut = (data.get("cut_to_max_length") or {}).get("test") or {}
    if test_cut.get("sources"):
        notes.append(
            f"{test_cut['sources']} of the {test_cut['pairs']} test sources were longer than the run's maximum source "
            "length and were cut: their translations, scored against whole references, miss the rest."
        )
    notes += list(data.get("card_limitations") or [])
    return notes


def _shown_training_args(training: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters that applied: token-based batches replace the sentence batch size."""
    if training.get("max_tokens_per_batch"):
        return {name: value for name, value in training.items() if name != "per_device_train_batch_size"}
    return training


def render_model_card(results: dict[str, Any], *, model_id: str) -> str:
    """The card's full text for the run described by ``results`` (the content of results.json)."""
    model, data = results["model"], results["data"]
    samples = results.get("samples", [])
    example = min((sample["source"] for sample in samples), key=len, default="...")
    card = ModelCard.from_template(
        build_card_data(results, model_id),
        template_path=str(TEMPLATE_PATH),
        model_id=model_id,
        model_id_is_placeholder=model_id.startswith(HUB_ID_PLACEHOLDER),
        model_name=model_id.split("/")[-1],
        family=model["family"],
        family_title=_family_title(model["family"]),
        variant_summary=describe_variant(model["options"]),
        parameters_millions=round(model["parameters"] / 1e6, 1),
        model=model,
        data=data,
        src_lang=data["src_lang"],
        tgt_lang=data["tgt_lang"],
        training=_shown_training_args(results["training"]),
        train=results.get("train"),
        test=results.get("test"),
        test_multi_reference=results.get("test_multi_reference"),
        samples=samples,
        example_python=repr(example),
        example_shell=shlex.quote(example),
        limitations=limitations(results),
        citations=citations(model["options"]),
    )
    return str(card)


def write_model_card(output_dir: str | os.PathLike[str], results: dict[str, Any], *, model_id: str) -> Path:
    """Write README.md into ``output_dir``; returns its path."""
    path = Path(output_dir) / CARD_FILE
    path.write_text(render_model_card(results, model_id=model_id), encoding="utf-8")
    return path


#: the marks around the card's section on exported packages, which `note_exported_packages` rewrites
_EXPORTED_MARKS = ("<!-- hf_graphtf: exported packages -->", "<!-- /hf_graphtf: exported packages -->")


def note_exported_packages(target: str | os.PathLike[str]) -> Path | None:
    """Say in a model folder's card that the folder carries exported packages, where ``target``
    (``MODEL/exported/<dtype>``, written by ``export --output MODEL/exported``) lies in one: they are native
    code, which a folder otherwise is not, and whoever receives the folder must know before trusting them.
    The section lists every format the folder carries and is rewritten, not added again, by a later export.
    Returns the card's path; None where ``target`` is not inside a model folder."""
    from .translation.packages import EXPORT_DIR, MANIFEST, ExportManifest

    exported = Path(target).parent
    model = exported.parent
    if exported.name != EXPORT_DIR or not (model / "config.json").is_file():
        return None
    lines = []
    for folder in sorted(path for path in exported.iterdir() if (path / MANIFEST).is_file()):
        manifest = ExportManifest.read(folder)
        lines.append(
            f"- `{EXPORT_DIR}/{folder.name}/`: built {manifest.built} with torch {manifest.torch} for a CPU with "
            f"{manifest.cpu_instruction_set} ({manifest.cpu})"
        )
    section = "\n".join(
        [
            _EXPORTED_MARKS[0],
            "## Exported packages (native code)",
            "",
            "This folder carries AOTInductor packages (`hf-graphtf export --output`): compiled shared objects that "
            "run when they load. `hf-graphtf translate` opens them only with `--trust-exported` (or "
            "`HF_GRAPHTF_TRUST_EXPORTED=1`): pass it only if you trust whoever built them. Without it, "
            "translation is eager and the same; `hf-graphtf export --model DIR` builds your own.",
            "",
            *lines,
            _EXPORTED_MARKS[1],
        ]
    )
    card = model / CARD_FILE
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    start, end = text.find(_EXPORTED_MARKS[0]), text.find(_EXPORTED_MARKS[1])
    if start >= 0 and end > start:
        text = text[:start] + section + text[end + len(_EXPORTED_MARKS[1]) :]
    else:
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + section + "\n"
    card.write_text(text, encoding="utf-8")
    return card
