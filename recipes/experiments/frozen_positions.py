"""What keeping Marian's computed position tables frozen after loading changes: a fine-tune with and without it.

    python recipes/experiments/frozen_positions.py --steps 200

A Marian stand-in for opus-mt (Transformers' `MarianMTModel`, random weights at half the CPU grid's width, a joint
tokenizer trained on the corpus's training split) is fine-tuned by the package's opus-mt recipe
(`recipes/configs/finetune_opus_mt_es_en_10k_al_both.yaml`) for ``--steps`` steps, twice: as the package does
now, and with the tables left as Transformers hands them back after `from_pretrained` (trainable; the
recipe's freeze of unsaved parameters off too). After each run the recipe runs again on its output folder,
which reloads the saved model and evaluates it again, so the test BLEU in the training process and after
reloading come from the same code on the same sentences. Prints a Markdown table with the host; the JSON
goes to ``--output``/results.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import MarianConfig, MarianMTModel  # noqa: E402

from hf_graphtf.data import load_parallel_corpus  # noqa: E402
from hf_graphtf.machine import cpu_record  # noqa: E402
from hf_graphtf.tokenization import train_joint_tokenizer  # noqa: E402
from hf_graphtf.training import parse_recipe_args, run_translation  # noqa: E402
from hf_graphtf.training.tooling import PREDICTIONS_FILE, positions_left_trainable  # noqa: E402

RECIPE = ROOT / "recipes" / "configs" / "finetune_opus_mt_es_en_10k_al_both.yaml"
#: half the CPU grid's width (recipes/experiments/grid_bible_cpu_converged.yaml: d 256), so that both runs take
#: minutes on two shared cores
SHAPE = dict(d_model=128, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=512, decoder_ffn_dim=512)  # fmt: skip


def write_stand_in(folder: Path, corpus: str, vocab_size: int, seed: int) -> None:
    """A vanilla Marian checkpoint with its tokenizer, as an opus-mt folder holds them (random weights)."""
    train = load_parallel_corpus(corpus, src_lang="es", tgt_lang="en", split="train_10k")
    tokenizer = train_joint_tokenizer(train, src_lang="es", tgt_lang="en", vocab_size=vocab_size, show_progress=False)
    torch.manual_seed(seed)
    config = MarianConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                          eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id,
                          forced_eos_token_id=tokenizer.eos_token_id, max_position_embeddings=512, **SHAPE)  # fmt: skip
    MarianMTModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def run(stand_in: Path, corpus: str, output: Path, steps: int) -> dict[str, object]:
    """Train and evaluate, then evaluate the saved model again: test scores and predictions of both."""
    overrides = {
        "model_name_or_path": stand_in, "corpus": corpus, "output_dir": output, "max_steps": steps,
        "warmup_steps": max(1, steps // 3), "learning_rate": 1e-3, "eval_steps": steps, "save_steps": steps,
        "max_eval_samples": 50, "max_test_samples": 200, "test_num_beams": 1, "generation_max_length": 96,
        "use_cpu": "true", "disable_tqdm": "true", "logging_steps": 50,
    }  # fmt: skip
    argv = [str(RECIPE)] + [item for name, value in overrides.items() for item in (f"--{name}", str(value))]
    trained = run_translation(*parse_recipe_args(argv))
    in_process = (output / PREDICTIONS_FILE).read_text(encoding="utf-8").splitlines()
    reloaded = run_translation(*parse_recipe_args(argv))  # finished: loads the saved model, evaluates again
    after = (output / PREDICTIONS_FILE).read_text(encoding="utf-8").splitlines()
    return {
        "steps": trained["train"]["global_step"],
        "bleu_in_process": trained["test"]["bleu"],
        "bleu_after_reload": reloaded["test"]["bleu"],
        "chrf_in_process": trained["test"]["chrf"],
        "chrf_after_reload": reloaded["test"]["chrf"],
        "predictions_changed": sum(a != b for a, b in zip(in_process, after)),
        "predictions": len(in_process),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(ROOT / "data" / "bible-es-en"))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "frozen_positions")
    args = parser.parse_args(argv)
    shutil.rmtree(args.output, ignore_errors=True)
    stand_in = args.output / "stand-in"
    write_stand_in(stand_in, args.corpus, args.vocab_size, args.seed)
    rows = {}
    for name, context in (("frozen (the package now)", contextlib.nullcontext()),
                          ("trainable (before)", positions_left_trainable())):  # fmt: skip
        with context:
            rows[name] = run(stand_in, args.corpus, args.output / name.split()[0], args.steps)
    record = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": cpu_record(), "rows": rows,
              "command": "python recipes/experiments/frozen_positions.py " + " ".join(sys.argv[1:])}  # fmt: skip
    (args.output / "results.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"- {record['date']}, host {record['host']}, `{record['command']}`\n")
    print("| positions after loading | steps | test BLEU in training | after reload | chrF in training | after reload "
          "| test predictions changed by the reload |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['steps']} | {row['bleu_in_process']} | {row['bleu_after_reload']} | "
              f"{row['chrf_in_process']} | {row['chrf_after_reload']} | "
              f"{row['predictions_changed']} of {row['predictions']} |")  # fmt: skip


if __name__ == "__main__":
    main()
