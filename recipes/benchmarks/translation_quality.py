"""What each translation format costs in quality: test BLEU and chrF of one saved model in fp32, bf16 and int8.

    python recipes/benchmarks/translation_quality.py                       # the main job's model, es-en test
    python recipes/benchmarks/translation_quality.py --model outputs/al_both --dtypes fp32,int8
    python recipes/benchmarks/translation_quality.py --model M --corpus C --max-sentences 50   # a quick look
    python recipes/benchmarks/translation_quality.py --dtypes bf16 --compiled bf16                # compiled too
    python recipes/benchmarks/translation_quality.py --exported bf16,int8          # hf-graphtf export's packages

Each format translates the whole split through the package's own `load_model` and `translate_texts` (the
calls under ``hf-graphtf translate``), with the model's beam (``--beam-size`` to change it); scores are
sacreBLEU's BLEU and chrF against the split's target side, and the table gives each format's difference
from fp32, and whether it stays within `QUALITY_TOLERANCE` BLEU of it: the bar a format must clear for the
results page to call it free of cost (``auto`` takes bf16 by what the device computes; this table says what
that costs). ``--exported`` builds the model's packages (``hf-graphtf export``) in a copy of its folder, the
original left as it was, and translates with them (``--engine exported``); the other rows decode eagerly.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import sacrebleu
import torch
from benchmark_page import header, run_start, table
from common import (
    add_test_split_args,
    compiled_formats,
    copy_of_model,
    exported_formats,
    test_split,
    test_split_text,
    translation_dtypes,
)

from hf_graphtf.translation.aoti import export_model
from hf_graphtf.translation.dtype_choice import TRANSLATION_DTYPES
from hf_graphtf.translation.inference import load_model, translate_texts

#: how far a cheaper format may move test BLEU from fp32 and still count as costing nothing
QUALITY_TOLERANCE = 0.3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_test_split_args(parser)
    parser.add_argument(
        "--dtypes",
        "--modes",  # its name before 0.2
        type=translation_dtypes,
        default="fp32,bf16,int8",
        help=f"of {', '.join(TRANSLATION_DTYPES[1:])}",
    )
    parser.add_argument("--beam-size", type=int, default=5, help="the quickstart's test beam")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--compiled",
        type=compiled_formats,
        default=[],
        metavar="MODES",
        help="also these formats with compiled decoding (translate --compile on), e.g. bf16: what the compiler's "
        "own rounding costs",
    )
    parser.add_argument(
        "--exported",
        type=exported_formats,
        default=[],
        metavar="MODES",
        help="also these formats exported (hf-graphtf export, in a copy of the model's folder), e.g. bf16,int8",
    )
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    modes = list(args.dtypes)
    if "fp32" not in modes:
        modes.insert(0, "fp32")  # the reference every difference is taken from
    compiled = args.compiled  # int8 was refused when the arguments were read, before a minute of translating
    if args.threads:
        torch.set_num_threads(args.threads)
    start = run_start()

    sources, references = test_split(args)
    scores, build_seconds = {}, {}
    exported_copy = None
    if args.exported:  # the packages go into a copy: the model's own folder is left as it was
        exported_copy = copy_of_model(args.model, prefix="translation-quality-")
        for mode in args.exported:
            began = time.perf_counter()
            export_model(exported_copy, mode)
            build_seconds[mode] = time.perf_counter() - began
    runs = [(mode, "off") for mode in modes] + [(mode, "on") for mode in compiled]
    runs += [(mode, "exported") for mode in args.exported]
    for mode, compile in runs:
        if compile == "exported":
            tokenizer, model = load_model(str(exported_copy), "cpu", mode, engine="exported")
            mode = f"{mode}, exported"
        else:
            tokenizer, model = load_model(args.model, "cpu", mode, compile=compile, engine="eager")
        if compile == "on":
            mode = f"{mode}, compiled"
        began = time.perf_counter()
        hypotheses = translate_texts(
            tokenizer,
            model,
            sources,
            batch_size=args.batch_size,
            num_beams=args.beam_size,
            max_new_tokens=args.max_new_tokens,
            progress=sys.stderr.isatty(),
        )
        seconds = time.perf_counter() - began
        bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
        chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
        scores[mode] = {"bleu": round(bleu, 2), "chrf": round(chrf, 2), "seconds": seconds}
        print(f"{mode}: BLEU {bleu:.2f} chrF {chrf:.2f} ({seconds:.0f} s)", file=sys.stderr)
        del model

    reference = scores["fp32"]
    rows = []
    for mode, score in scores.items():
        delta = score["bleu"] - reference["bleu"]
        rows.append(
            [
                mode,
                f"{score['bleu']:.2f}",
                f"{delta:+.2f}",
                f"{score['chrf']:.2f}",
                f"{score['chrf'] - reference['chrf']:+.2f}",
                f"{reference['seconds'] / score['seconds']:.2f}x",
                "" if mode == "fp32" else ("yes" if abs(delta) <= QUALITY_TOLERANCE else "no"),
            ]
        )
    settings = {
        "model": args.model,
        "test": test_split_text(
            args,
            len(sources),
            f"beam {args.beam_size}, up to {args.max_new_tokens} new tokens, batches of {args.batch_size}",
        ),
        "speed": "wall-clock time of each whole split, torch threads "
        f"{torch.get_num_threads()} (a rough guide; translation_speed.py is the controlled comparison)"
        + ("; a compiled format's time includes its compiling" if compiled else ""),
    }
    if build_seconds:
        settings["exported"] = "hf-graphtf export in a copy of the model's folder, built in " + ", ".join(
            f"{seconds:.0f} s ({mode})" for mode, seconds in build_seconds.items()
        )
    print(header("Translation quality by format", settings, "cpu", start))
    print()
    columns = ["format", "BLEU", "Δ BLEU", "chrF", "Δ chrF", "speed vs fp32", f"within {QUALITY_TOLERANCE} BLEU"]
    print(table(columns, rows))
    if args.json:
        Path(args.json).write_text(json.dumps(scores, indent=1) + "\n", encoding="utf-8")
    if exported_copy is not None:
        shutil.rmtree(exported_copy.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
