"""Where a training epoch of the Bible recipe spends its time, per phase, on the real corpus.

Times, for sentence-count batches drawn at random (the Trainer's default) and for token-based batches
(``max_tokens_per_batch``): collation and padding, forward, backward, the optimizer step, and the real
and padded target tokens; then greedy validation with ``generate`` in corpus order and length-sorted,
and writing a checkpoint (weights and optimizer state). Numbers are wall-clock; keep the machine
otherwise idle.

    python recipes/benchmarks/profile_training.py --threads 1
    python recipes/benchmarks/profile_training.py --threads 2 --steps 20
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq
from transformers.trainer_pt_utils import LabelSmoother

import hf_graphtf  # noqa: F401  (registers the Auto classes)
from hf_graphtf.configuration import GraphMarianConfig
from hf_graphtf.data import load_parallel_corpus
from hf_graphtf.machine import cpu_model
from hf_graphtf.tokenization import train_joint_tokenizer
from hf_graphtf.training.tooling import token_batches


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="data/bible-es-en")
    parser.add_argument("--split", default="train_10k")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per batching (after 2 warm-up steps)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch, random batching")
    parser.add_argument("--max-tokens", type=int, default=3000, help="padded tokens per batch, token batching")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--attention-link", default="both")
    parser.add_argument("--eval-sentences", type=int, default=100)
    return parser.parse_args()


def timed(clock: dict[str, float], name: str, fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    clock[name] = clock.get(name, 0.0) + time.perf_counter() - start
    return result


def profile_batches(model, collator, features, batches, steps) -> dict[str, float]:
    """Seconds per phase over ``steps`` batches (after two warm-up batches), and token counts."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98))
    smoother = LabelSmoother(epsilon=0.1)
    clock: dict[str, float] = {}
    real = padded = 0
    for number, batch in enumerate(batches[: steps + 2]):
        if number == 2:
            clock, real, padded = {}, 0, 0
        inputs = timed(clock, "collate", collator, [features[i] for i in batch])
        labels = inputs["labels"]
        real += int((labels != -100).sum())
        padded += labels.numel()
        outputs = timed(clock, "forward", model, **inputs)
        loss = timed(clock, "forward", smoother, outputs, labels, shift_labels=False)
        timed(clock, "backward", loss.backward)
        timed(clock, "optimizer", lambda: (torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0), optimizer.step()))
        optimizer.zero_grad(set_to_none=True)
    clock["steps"] = min(steps, len(batches) - 2)
    clock["real_target_tokens"], clock["padded_target_tokens"] = real, padded
    return clock


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    train = load_parallel_corpus(args.corpus, src_lang="es", tgt_lang="en", split=args.split)
    valid = load_parallel_corpus(args.corpus, src_lang="es", tgt_lang="en", split="valid")
    start = time.perf_counter()
    tokenizer = train_joint_tokenizer(train, src_lang="es", tgt_lang="en", vocab_size=args.vocab, show_progress=False)
    tokenizer_seconds = time.perf_counter() - start
    pairs = train["translation"]
    start = time.perf_counter()
    sources = tokenizer([p["es"] for p in pairs], max_length=256, truncation=True)["input_ids"]
    targets = tokenizer(text_target=[p["en"] for p in pairs], max_length=256, truncation=True)["input_ids"]
    tokenize_seconds = time.perf_counter() - start
    features = [{"input_ids": s, "labels": t} for s, t in zip(sources, targets)]
    config = GraphMarianConfig(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, forced_eos_token_id=tokenizer.eos_token_id,
        d_model=256, encoder_layers=args.layers, decoder_layers=args.layers, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, dropout=0.1,
        activation_function="relu", attention_link=args.attention_link,
    )  # fmt: skip
    model = AutoModelForSeq2SeqLM.from_config(config).train()
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)

    rng = random.Random(0)
    order = list(range(len(features)))
    rng.shuffle(order)
    random_batches = [order[i : i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    sized = token_batches([len(s) for s in sources], [len(t) for t in targets], args.max_tokens)
    rng.shuffle(sized)
    profiles = {}
    for name, batches in (
        (f"random, {args.batch_size} sentences", random_batches),
        (f"tokens, {args.max_tokens} max", sized),
    ):
        profiles[name] = (profile_batches(model, collator, features, batches, args.steps), len(batches))

    model.eval()
    valid_pairs = valid["translation"][: args.eval_sentences]
    eval_times = {}
    for name, ordered in (
        ("corpus order", valid_pairs),
        ("length-sorted", sorted(valid_pairs, key=lambda p: len(p["es"]))),
    ):
        start = time.perf_counter()
        for i in range(0, len(ordered), 64):
            inputs = tokenizer([p["es"] for p in ordered[i : i + 64]], return_tensors="pt", padding=True)
            with torch.inference_mode():
                model.generate(**inputs, num_beams=1, max_length=128)
        eval_times[name] = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        optimizer = torch.optim.AdamW(model.parameters())
        for p in model.parameters():
            optimizer.state[p] = {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        start = time.perf_counter()
        model.save_pretrained(folder)
        torch.save(optimizer.state_dict(), Path(folder) / "optimizer.pt")
        save_seconds = time.perf_counter() - start

    print(f"## Profile of a training epoch: Bible es-en {args.split}, d 256, {args.layers}+{args.layers} layers, "
          f"link {args.attention_link}, vocab {len(tokenizer)}")  # fmt: skip
    print()
    machine = cpu_model()
    print(f"- date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; machine: {machine}, "
          f"{torch.get_num_threads()} torch thread(s); torch {torch.__version__}")  # fmt: skip
    print(f"- tokenizer training {tokenizer_seconds:.1f} s, tokenizing the split {tokenize_seconds:.1f} s")
    print()
    columns = "batching, collate ms, forward ms, backward ms, optimizer ms, step ms, padding, real target tok/s"
    print("| " + " | ".join(columns.split(", ") + ["batches/epoch", "epoch min"]) + " |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, (clock, batches_per_epoch) in profiles.items():
        steps = clock["steps"]
        phases = [1000 * clock[k] / steps for k in ("collate", "forward", "backward", "optimizer")]
        step = sum(phases)
        padding = 1 - clock["real_target_tokens"] / clock["padded_target_tokens"]
        rate = clock["real_target_tokens"] / (step * steps / 1000)
        cells = " | ".join(f"{v:.0f}" for v in phases)
        print(f"| {name} | {cells} | {step:.0f} | {padding:.0%} | {rate:.0f} | {batches_per_epoch} | "
              f"{step * batches_per_epoch / 60000:.1f} |")  # fmt: skip
    print()
    for name, seconds in eval_times.items():
        print(f"- validation, greedy, {len(valid_pairs)} sentences in batches of 64, {name}: {seconds:.1f} s")
    print(f"- writing a checkpoint (weights and AdamW state): {save_seconds:.2f} s")


if __name__ == "__main__":
    main()
