"""What a run leaves behind for people: results.json, the test translations, the printed summary."""

from __future__ import annotations

import json
import os
from enum import Enum
from pathlib import Path
from typing import Any

from transformers import (
    PreTrainedModel,
)

from ..data import HUB_CORPORA
from ..families import FAMILY_OF_MODEL_TYPE
from .adapters import is_adapter_model, trainable_count
from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments

RESULTS_FILE = "results.json"


PREDICTIONS_FILE = "test_predictions.txt"


#: training hyperparameters recorded in results.json and shown in the model card
RECORDED_TRAINING_ARGS = (
    "learning_rate",
    "lr_scheduler_type",
    "lr_cooldown_fraction",
    "warmup_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "world_size",
    "label_smoothing_factor",
    "optim",
    "adam_beta1",
    "adam_beta2",
    "weight_decay",
    "max_grad_norm",
    "max_steps",
    "num_train_epochs",
    "eval_steps",
    "early_stopping_patience",
    "early_stopping_watch_loss",
    "max_tokens_per_batch",
    "max_train_minutes",
    "precision",
    "generation_num_beams",
    "test_num_beams",
    "seed",
)


def _plain(value: Any) -> Any:
    """Enum-valued arguments (``lr_scheduler_type``, ``optim``) as their plain string values."""
    return value.value if isinstance(value, Enum) else value


def hub_dataset_id(corpus: str) -> str | None:
    """The Hub id of a corpus loaded from the Hub (short names resolved), None for local data."""
    if os.path.exists(corpus):
        return None
    return HUB_CORPORA[corpus][0] if corpus in HUB_CORPORA else corpus


def built_corpus_record(corpus: str) -> dict[str, Any]:
    """For a corpus folder written by ``hf-graphtf build-corpus`` (its ``meta.json``): the command that
    rebuilds it, and its further test references, for the model card. Empty for any other corpus."""
    try:
        with open(os.path.join(corpus, "meta.json"), encoding="utf-8") as handle:
            meta = json.load(handle)
    except (OSError, ValueError):
        return {}
    if meta.get("name") != "bible-es-en" or "format_version" not in meta:
        return {}
    extra = [name.upper() for name in meta.get("sources") or {} if name not in ("es", "web")]
    return {
        "rebuild": f"hf-graphtf build-corpus --output-dir {corpus}",
        "extra_references": ", ".join(f"the {name}" for name in extra) or None,
    }


#: the folder holding the package: the top of its git checkout when it runs from one, a site-packages folder
#: when it was installed from a wheel (which may itself lie inside the user's own repository)
PACKAGE_PARENT = Path(__file__).resolve().parents[2]


def software_record(code_paths: tuple[str, ...] = ("hf_graphtf",), root: Path = PACKAGE_PARENT) -> dict[str, Any]:
    """The package's commit (when run from a git checkout), which files under ``code_paths`` (relative to
    the checkout) differ from it, and the versions of the libraries that compute. The experiment runner
    adds the training script to ``code_paths``: it too decides what a run computes.

    The commit is recorded only when ``root`` is the top of a checkout: an install into a virtualenv inside
    the user's own repository would otherwise record that repository's commit as the package's, silently
    (its version is in ``packages`` either way)."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, timeout=10)
        return done.stdout

    commit, changed = None, []
    try:
        if Path(git("rev-parse", "--show-toplevel").strip()).resolve() == root.resolve():
            commit = git("rev-parse", "HEAD").strip()
            changed = git("status", "--porcelain", "--untracked-files=no", "--", *code_paths).splitlines()
    except (OSError, subprocess.SubprocessError):
        commit, changed = None, []
    packages = {}
    for name in ("hf_graphtf", "torch", "transformers", "tokenizers", "accelerate", "datasets", "sacrebleu"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "commit": commit or None,
        "code_changed_from_commit": sorted(line[3:] for line in changed),
        "packages": packages,
    }


def run_record(
    model: PreTrainedModel,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
) -> dict[str, Any]:
    """What was trained on what, and how: the part of results.json that the model card describes."""
    lora = model_args.lora_options()
    return {
        "model": {
            "family": FAMILY_OF_MODEL_TYPE[model.config.model_type].name,
            "model_type": model.config.model_type,
            "parameters": model.num_parameters(),
            "options": {name: getattr(model.config, name) for name in model_args.graph_options()},
            "sizes": {name: getattr(model.config, name) for name in model_args.size_options()},
            "vocab_size": model.config.vocab_size,
            "license": model_args.license,
            "base_model": model_args.model_name_or_path,
            # LoRA's settings, and how many parameters train (adapters, what the options add) while it trains
            "lora": lora if not is_adapter_model(model) else {**lora, "trainable_parameters": trainable_count(model)},
        },
        "data": {
            "corpus": data_args.corpus,
            "corpus_config": data_args.corpus_config,
            "hub_dataset": hub_dataset_id(data_args.corpus),
            "name": data_args.display_name,
            "src_lang": data_args.src_lang,
            "tgt_lang": data_args.tgt_lang,
            "splits": {
                "train": data_args.train_split,
                "validation": data_args.validation_split,
                "test": data_args.test_split,
            },
            **built_corpus_record(data_args.corpus),
            "card_limitations": list(data_args.card_limitations),
        },
        "software": software_record(),
        "training": {name: _plain(getattr(training_args, name)) for name in RECORDED_TRAINING_ARGS},
    }


def write_outputs(output_dir: str, results: dict[str, Any], hypotheses: list[str] | None) -> None:
    """results.json and the test translations, one per line in test-split order."""
    with open(os.path.join(output_dir, RESULTS_FILE), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    if hypotheses is not None:
        with open(os.path.join(output_dir, PREDICTIONS_FILE), "w", encoding="utf-8") as handle:
            handle.writelines(hypothesis + "\n" for hypothesis in hypotheses)


def format_summary(results: dict[str, Any], output_dir: str) -> str:
    """The end-of-run report printed by the recipe script and ``hf-graphtf train``."""
    lines = [f"Model, tokenizer, card and {RESULTS_FILE} saved in {output_dir}"]
    if "eval" in results:
        lines.append(f"Validation: BLEU {results['eval'].get('eval_bleu')}  chrF {results['eval'].get('eval_chrf')}")
    for key, title in (("test", "Test"), ("test_multi_reference", "Test, all references")):
        if key in results:
            report = results[key]
            lines.append(
                f"{title}: BLEU {report['bleu']}  chrF {report['chrf']}  "
                f"({report['sentences']} sentences, {report['references_per_sentence']} reference(s) per sentence)"
            )
    if "test" in results:
        share = results["test"]["repeated_token_outputs"]
        lines.append(f"Translations with a word repeated 4+ times in a row: {share:.1%}")
    if "test" in results:
        buckets = results["test"]["bleu_by_length"]
        lines.append(
            "BLEU by source length (words): "
            + "  ".join(f"{label}: {row['bleu']} ({row['sentences']})" for label, row in buckets.items())
        )
        lines.append(f"sacreBLEU: {results['test']['bleu_signature']}")
    for sample in results.get("samples", []):
        lines += [
            f"[{sample['id']}]",
            f"  source:      {sample['source']}",
            f"  reference:   {sample['reference']}",
            f"  translation: {sample['translation']}",
        ]
    return "\n".join(lines)
