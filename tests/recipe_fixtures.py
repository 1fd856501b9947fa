"""Tiny corpora, recipes and trained models for the training, CLI and model-card tests.

The corpus is a toy word-for-word Spanish/English "language" in the Bible corpus format, small
enough that a d_model=32 model trains for a few steps in seconds on a CPU.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
TRAIN_SCRIPT = REPO_ROOT / "recipes" / "train_translation.py"

# The start of a script run in a fresh interpreter, outside the repository: `import hf_graphtf` is made impossible.
BLOCK_PACKAGE = textwrap.dedent(
    """
    import importlib.abc, sys

    class BlockPackage(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_graphtf" or name.startswith("hf_graphtf."):
                raise ImportError("hf_graphtf is blocked in this test")
            return None

    sys.meta_path.insert(0, BlockPackage())
    """
)

_LEXICON = {
    "el": "the",
    "hombre": "man",
    "mujer": "woman",
    "rey": "king",
    "pueblo": "people",
    "dijo": "said",
    "vio": "saw",
    "tomó": "took",
    "pan": "bread",
    "agua": "water",
    "casa": "house",
    "tierra": "land",
    "y": "and",
    "grande": "great",
    "bueno": "good",
    "día": "day",
}


@pytest.fixture(autouse=True)
def one_thread():
    """Run each test on one intra-op thread, as the child processes do (``OMP_NUM_THREADS=1``).

    Tiny models spend their time in thread synchronisation: on a 2-core machine a d_model=32 layer
    ran about 20 times faster on one thread than on two.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def toy_pair(rng: random.Random) -> tuple[str, str]:
    """A Spanish sentence of 3-12 toy words and its word-for-word English translation."""
    words = rng.choices(sorted(_LEXICON), k=rng.randint(3, 12))
    return " ".join(words).capitalize() + ".", " ".join(_LEXICON[w] for w in words).capitalize() + "."


def write_tiny_corpus(directory: Path, sizes: dict[str, int] | None = None, seed: int = 0) -> Path:
    """``<split>.jsonl`` files in the Bible corpus format; test pairs carry a second reference."""
    sizes = sizes or {"train": 64, "valid": 8, "test": 8}
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, size in sizes.items():
        with open(directory / f"{split}.jsonl", "w", encoding="utf-8") as handle:
            for i in range(size):
                es, en = toy_pair(rng)
                record = {
                    "id": f"Toy.{split}.{i}",
                    "translation": {"es": es, "en": en},
                    "references": {"en": [en, en.replace("the", "that")]},
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return directory


#: what a recipe adds for a stand-in family whose tokenizer has language codes (the toy corpus is Spanish-English)
LANGUAGE_CODES = {"m2m_100": {"src_lang_code": "spa_Latn", "tgt_lang_code": "eng_Latn"}}


def tiny_recipe(corpus: Path, output_dir: Path, **overrides: Any) -> dict[str, Any]:
    """A recipe for a d_model=32 attention-link model that trains a few steps in seconds."""
    recipe: dict[str, Any] = {
        "model_family": "marian",
        "d_model": 32,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 2,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "attention_link": "both",
        "corpus": str(corpus),
        "src_lang": "es",
        "tgt_lang": "en",
        "train_split": "train",
        "vocab_size": 300,
        "max_source_length": 32,
        "max_target_length": 32,
        "length_buckets": [5, 10],
        "num_sample_translations": 2,
        "output_dir": str(output_dir),
        "do_train": True,
        "do_eval": True,
        "do_predict": True,
        "max_steps": 4,
        "per_device_train_batch_size": 16,
        "per_device_eval_batch_size": 16,
        "learning_rate": 0.003,
        "lr_scheduler_type": "inverse_sqrt",
        "warmup_steps": 2,
        "label_smoothing_factor": 0.1,
        "adam_beta2": 0.98,
        "optim": "adamw_torch",
        "eval_strategy": "steps",
        "eval_steps": 2,
        "save_strategy": "steps",
        "save_steps": 2,
        "logging_steps": 1,
        "generation_max_length": 16,
        "generation_num_beams": 1,
        "report_to": "none",
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
        "use_cpu": True,
        "seed": 0,
    }
    recipe.update(overrides)
    return recipe


def tiny_model_config(vocab_size: int, **options: Any):
    """A `GraphMarianConfig` of a 2-layer d_model=16 model (pad 0, eos 1) with the given options."""
    from hf_graphtf import GraphMarianConfig

    sizes = {"d_model": 16, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2}
    sizes |= {"decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "max_position_embeddings": 64}
    return GraphMarianConfig(
        vocab_size=vocab_size, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, **sizes, **options
    )


def write_recipe(path: Path, recipe: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return path


def subprocess_env() -> dict[str, str]:
    """Environment for child processes: the repository importable, no Hub access, quiet tokenizers."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    return env


def run_python(*args: str, cwd: Path | None = None, stdin: str | None = None, timeout: int = 300):
    """Run ``python *args`` in a child process; returns the CompletedProcess (text mode)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd or REPO_ROOT,
        env=subprocess_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class TrainedRun:
    """One run of the recipe script on the tiny corpus, shared by the tests that need a trained model."""

    output_dir: Path
    corpus: Path
    results: dict[str, Any]
    stdout: str
    command: list[str]


_TRAINED: dict[str, TrainedRun] = {}


def trained_tiny_model(tmp_path_factory) -> TrainedRun:
    """Train once per test session (recipe max_steps 2, overridden to 4 on the command line)."""
    if "run" not in _TRAINED:
        base = tmp_path_factory.mktemp("trained")
        corpus = write_tiny_corpus(base / "corpus")
        recipe = write_recipe(base / "recipe.yaml", tiny_recipe(corpus, base / "out", max_steps=2))
        command = [str(TRAIN_SCRIPT), str(recipe), "--max_steps", "4"]
        result = run_python(*command)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        results = json.loads((base / "out" / "results.json").read_text(encoding="utf-8"))
        _TRAINED["run"] = TrainedRun(base / "out", corpus, results, result.stdout, command)
    return _TRAINED["run"]


def write_opus_mt_stand_in(directory: Path, corpus: Path, family: str = "marian") -> Path:
    """A locally saved vanilla checkpoint standing in for a Hub model such as Helsinki-NLP/opus-mt-es-en.

    ``marian``: a `MarianMTModel` with a real `MarianTokenizer` (``source.spm``/``target.spm``/``vocab.json``)
    built from a SentencePiece model trained on the toy corpus, which is what an opus-mt folder holds.
    ``bart``: a `BartForConditionalGeneration` with a joint tokenizer of this package.
    ``m2m_100``: an `M2M100ForConditionalGeneration` (NLLB-200's class, tied LM head) with an `NllbTokenizer`
    carrying language codes (`NLLB_STAND_IN_CODES`), which is what facebook/nllb-200-distilled-600M holds.
    """
    import io

    import sentencepiece
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        M2M100Config,
        M2M100ForConditionalGeneration,
        MarianConfig,
        MarianMTModel,
        MarianTokenizer,
    )

    from hf_graphtf.tokenization import train_joint_tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    records = [json.loads(line) for line in (corpus / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    text = [r["translation"][side] for r in records for side in ("es", "en")]
    if family == "marian":
        model_file = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(text), model_writer=model_file, vocab_size=60, model_type="unigram",
            pad_id=-1, bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2,
        )  # fmt: skip
        for name in ("source.spm", "target.spm"):
            (directory / name).write_bytes(model_file.getvalue())
        processor = sentencepiece.SentencePieceProcessor(model_proto=model_file.getvalue())
        pieces = ["</s>", "<unk>"] + [processor.id_to_piece(i) for i in range(1, processor.get_piece_size())]
        vocab = {piece: index for index, piece in enumerate(pieces + ["<pad>"])}
        (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        tokenizer = MarianTokenizer(*(str(directory / name) for name in ("source.spm", "target.spm", "vocab.json")))
        config = MarianConfig(
            vocab_size=len(vocab), pad_token_id=vocab["<pad>"], eos_token_id=0, decoder_start_token_id=vocab["<pad>"]
        )
        model_class = MarianMTModel
    elif family == "m2m_100":
        tokenizer = nllb_stand_in_tokenizer(text)
        config = M2M100Config(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id,
            decoder_start_token_id=tokenizer.eos_token_id,
            encoder_layerdrop=0.0,  # as in NLLB-200's configs (M2M100Config's default is 0.05)
            decoder_layerdrop=0.0,
        )
        model_class = M2M100ForConditionalGeneration
    else:
        tokenizer = train_joint_tokenizer(text, src_lang="es", tgt_lang="en", vocab_size=300, show_progress=False)
        config = BartConfig(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.eos_token_id,
            decoder_start_token_id=tokenizer.eos_token_id,
        )
        model_class = BartForConditionalGeneration
    for name in ("encoder", "decoder"):
        setattr(config, f"{name}_layers", 2)
        setattr(config, f"{name}_attention_heads", 2)
        setattr(config, f"{name}_ffn_dim", 64)
    config.d_model, config.max_position_embeddings = 32, 64
    torch.manual_seed(0)
    model = model_class(config)
    if family == "m2m_100":
        model.generation_config.max_length = 200  # as NLLB-200's generation_config.json sets it
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


#: the language codes of the NLLB stand-in's tokenizer (the real one has 202)
NLLB_STAND_IN_CODES = ["eng_Latn", "nya_Latn", "spa_Latn"]


def nllb_stand_in_tokenizer(texts: list[str]):
    """An `NllbTokenizer` built as NLLB's is (a BPE vocabulary with <s>, <pad>, </s>, <unk> first and the
    language codes as special tokens after it), from a small BPE trained on `texts`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import NllbTokenizer

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=200, special_tokens=specials, show_progress=False))
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge) for merge in model["merges"]]
    return NllbTokenizer(
        vocab=model["vocab"], merges=merges, src_lang="eng_Latn", extra_special_tokens=list(NLLB_STAND_IN_CODES)
    )
