"""Switching the attention link on in a pretrained model: the paper's link against the learned gate.

The paper's link (no parameters) changes what every layer of a pretrained model computes before a single
step is trained; ``attention_link_gate="learned"`` starts its per-head weights at zero, so the model starts
exactly where it was. This measures what that is worth:

1. pretrain a vanilla model with this package (the quickstart's shape, d 256, 3+3 layers) on the Bible
   es-en 10K subset, for a fixed number of minutes;
2. fine-tune it on the full training split (28.5K pairs, the 10K among them) three ways, the same steps,
   learning rate and data order: no link, the paper's link (both stacks, previous), the gated link;
3. record the validation loss and BLEU before the first step and every ``--eval-every`` steps.

    python recipes/experiments/gentle_start.py                      # about 40 minutes on 2 CPU cores
    python recipes/experiments/gentle_start.py --pretrain-minutes 1 --steps 20 --eval-every 10 \\
        --output-root /tmp/gentle --page /tmp/gentle.md             # a smoke run

Writes ``docs/gentle_start.json`` (every evaluation, the host's fingerprint, the command) and the page
``docs/gentle_start.md`` generated from it. One process, one thread: the numbers compare the three
fine-tunings with each other, not with other machines.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from hf_graphtf.configuration import GRAPH_OPTION_DEFAULTS  # noqa: E402
from hf_graphtf.machine import cpu_record  # noqa: E402
from hf_graphtf.training import parse_recipe_args, run_translation  # noqa: E402
from hf_graphtf.variants import variant_options  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "recipes" / "quickstart.yaml"
#: name -> (what the page calls it, the options switched on in the pretrained model)
#: name -> (what the page calls it, every option of the pretrained model: the quickstart recipe it starts from
#: links both stacks, so "no link" must switch the link off); options from the registry (`hf_graphtf.variants`)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    name: (label, {**GRAPH_OPTION_DEFAULTS, **variant_options(name)})
    for name, label in (
        ("no-link", "no link (vanilla fine-tuning)"),
        ("paper-link", "the paper's link (both, previous)"),
        ("gated-link", "gated link (both, previous, learned gate)"),
    )
}


#: the arguments the record keeps
SETTINGS = ("pretrain_minutes", "steps", "learning_rate", "warmup_steps", "eval_samples", "seed")


class EvaluationLog(TrainerCallback):
    """Every evaluation's step, validation loss and BLEU (on the main process)."""

    def __init__(self) -> None:
        self.points: list[dict[str, float]] = []

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if state.is_world_process_zero and metrics and "eval_loss" in metrics:
            self.points.append(
                {"step": state.global_step, "loss": metrics["eval_loss"], "bleu": metrics.get("eval_bleu")}
            )


def _run(recipe: dict[str, Any], path: Path, callbacks=()) -> dict[str, Any]:
    """Write `recipe` as YAML beside its run (so the run can be repeated as it was) and train it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return run_translation(*parse_recipe_args([str(path)]), callbacks=callbacks)


def _quickstart(**changes: Any) -> dict[str, Any]:
    """The quickstart recipe with `changes` (a value of None removes the field)."""
    recipe = {**yaml.safe_load(QUICKSTART.read_text(encoding="utf-8")), **changes}
    return {name: value for name, value in recipe.items() if value is not None}


def pretrain(args: argparse.Namespace) -> Path:
    """A vanilla model of the quickstart's shape, trained for ``--pretrain-minutes`` on the 10K subset."""
    folder = Path(args.output_root) / "pretrained-vanilla"
    if (folder / "results.json").is_file():
        return folder
    recipe = _quickstart(
        attention_link="none", corpus=args.corpus, train_split="train_10k", output_dir=str(folder),
        max_train_minutes=args.pretrain_minutes, do_predict=False, max_eval_samples=args.eval_samples,
        spread_eval_samples=True, seed=args.seed,
    )  # fmt: skip
    _run(recipe, Path(args.output_root) / "pretrained-vanilla.yaml")
    return folder


def fine_tune(args: argparse.Namespace, pretrained: Path, options: dict[str, str], name: str) -> list[dict]:
    """Fine-tune the pretrained model with `options` on; the evaluations from step 0 on."""
    log = EvaluationLog()
    recipe = _quickstart(
        **options, model_name_or_path=str(pretrained), corpus=args.corpus, train_split="train",
        output_dir=str(Path(args.output_root) / name), overwrite_output_dir=True, max_train_minutes=None,
        max_steps=args.steps, eval_on_start=True, eval_steps=args.eval_every, save_steps=args.eval_every,
        learning_rate=args.learning_rate, warmup_steps=args.warmup_steps, do_predict=False,
        max_eval_samples=args.eval_samples, spread_eval_samples=True, early_stopping_patience=None,
        load_best_model_at_end=False, seed=args.seed,
    )  # fmt: skip
    _run(recipe, Path(args.output_root) / f"{name}.yaml", callbacks=[log])
    return log.points


def _table(record: dict[str, Any], steps: list[int], key: str, digits: int) -> list[str]:
    lines = ["| setting | " + " | ".join(f"step {step}" for step in steps) + " |", "|---|" + "---:|" * len(steps)]
    for name, run in record["runs"].items():
        by_step = {point["step"]: point.get(key) for point in run}
        cells = [f"{by_step[s]:.{digits}f}" if by_step.get(s) is not None else "" for s in steps]
        lines.append(f"| {VARIANTS[name][0]} | " + " | ".join(cells) + " |")
    return lines


def _reading(record: dict[str, Any]) -> str:
    """One sentence read off the record: each start against no link, and the spread at the last step."""
    runs = {name: {point["step"]: point["loss"] for point in run} for name, run in record["runs"].items()}
    first, last = min(runs["no-link"]), max(runs["no-link"])
    deltas = {name: losses[first] - runs["no-link"][first] for name, losses in runs.items() if name != "no-link"}
    spread = max(losses[last] for losses in runs.values()) - min(losses[last] for losses in runs.values())
    starts = "; ".join(f"{VARIANTS[name][0]} {delta:+.4f}" for name, delta in deltas.items())
    return (
        f"Read off the table: validation loss at step {first} against no link: {starts}. At step {last} the "
        f"three settings lie within {spread:.4f} of each other. The pretrained model is weak (a short budget on "
        "two shared cores), so a stronger one may lose more to the paper's link at the start."
    )


def render(record: dict[str, Any]) -> str:
    """The page: what was run, on what, and the validation loss and BLEU of each setting by step."""
    settings, host = record["settings"], record["host"]
    steps = sorted({point["step"] for run in record["runs"].values() for point in run})
    return (
        "\n".join(
            [
                "# The attention link in a pretrained model: the paper's link and the learned gate",
                "",
                "Generated by `recipes/experiments/gentle_start.py` from `docs/gentle_start.json`; "
                "do not edit by hand.",
                "",
                f"Command: `{record['command']}`  ",
                f"Host: {host['model']}, kernels {host['kernels']}, float fingerprint {host['float_fingerprint']}; "
                f"{record['date']}.",
                "",
                f"A vanilla model of the quickstart's shape (Marian architecture, d 256, 3+3 layers) trained by this "
                f"package for {settings['pretrain_minutes']} minutes on Bible es-en train_10k, then fine-tuned on the "
                f"full training split for {settings['steps']} steps (peak learning rate {settings['learning_rate']}, "
                f"{settings['warmup_steps']} warm-up steps, the same data order) in each setting below. Validation: "
                f"{settings['eval_samples']} pairs spread over the split, greedy decoding for BLEU. One seed, one "
                "corpus, a short budget: this shows where each setting starts and how fast it recovers, not which "
                "is better at convergence.",
                "",
                "Validation loss (label-smoothed cross-entropy) by fine-tuning step:",
                "",
                *_table(record, steps, "loss", 4),
                "",
                "Validation BLEU by fine-tuning step:",
                "",
                *_table(record, steps, "bleu", 2),
                "",
                _reading(record),
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="data/bible-es-en")
    parser.add_argument("--output-root", default="outputs/gentle_start")
    parser.add_argument("--pretrain-minutes", type=float, default=12)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=0.0005)
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--eval-samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--record", default=str(REPO / "docs" / "gentle_start.json"))
    parser.add_argument("--page", default=str(REPO / "docs" / "gentle_start.md"))
    parser.add_argument("--render-only", action="store_true", help="regenerate the page from the record")
    args = parser.parse_args(argv)
    if args.render_only:
        record = json.loads(Path(args.record).read_text(encoding="utf-8"))
    else:
        pretrained = pretrain(args)
        runs = {name: fine_tune(args, pretrained, options, name) for name, (_, options) in VARIANTS.items()}
        record = {
            "command": shlex.join(["python", "recipes/experiments/gentle_start.py", *(argv or sys.argv[1:])]),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "host": cpu_record(),
            "settings": {name: getattr(args, name) for name in SETTINGS},
            "runs": runs,
        }
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    Path(args.page).write_text(render(record), encoding="utf-8")
    print(Path(args.page).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
