"""What exported decoding gains by leaving out the rows `generate` no longer reads, on a trained model.

    python recipes/benchmarks/ignored_rows.py --model outputs/quickstart            # int8, greedy and beam 5
    python recipes/benchmarks/ignored_rows.py --model M --dtypes fp32,int8 --beam-sizes 1,4 --threads 1

Greedy search pads a row after its end token and beam search stops reading the beams of a sentence it is
done with, but both keep those rows in the batch to the end; the exported steps leave them out
(`ExportedDecoding.leave_out_ignored_rows`). On random weights no sentence ends early, so
translation_speed.py cannot see this; here a trained model translates a test split through
`translate_texts` (the call under ``hf-graphtf translate``), with every row decoded to the end and with the
ignored rows left out, alternately in one process (``--repeats`` times each, the fastest kept), from the
same packages. The table gives the time of each, how many lines came out the same, and BLEU and chrF of
each: in float32 the translations must be the same; in int8, whose activations are quantized by the range
of the rows in the batch, fewer rows move the others' logits as a batch's make-up always does.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

import sacrebleu
import torch
from benchmark_page import header, run_start, table
from common import add_test_split_args, copy_of_model, exported_formats, positive_ints, test_split, test_split_text

from hf_graphtf.translation.aoti import export_model
from hf_graphtf.translation.inference import load_model, translate_texts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_test_split_args(parser)
    parser.add_argument("--dtypes", type=exported_formats, default="int8", help="exported formats, e.g. fp32,int8")
    parser.add_argument("--beam-sizes", type=positive_ints, default="1,5", help="1 is greedy search")
    parser.add_argument("--batch-size", type=int, default=32, help="translate's default")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = run_start()

    sources, references = test_split(args)
    copy = copy_of_model(args.model, prefix="ignored-rows-")  # the model's own folder is left as it was
    rows = []
    try:
        for dtype in args.dtypes:
            export_model(copy, dtype)
            tokenizer, model = load_model(str(copy), "cpu", dtype, engine="exported")
            for beams in args.beam_sizes:
                seconds, outputs = {True: [], False: []}, {}
                for _ in range(args.repeats):
                    for leave_out in (False, True):
                        model.exported_decoding.leave_out_ignored_rows = leave_out
                        began = time.perf_counter()
                        outputs[leave_out] = translate_texts(
                            tokenizer,
                            model,
                            sources,
                            batch_size=args.batch_size,
                            num_beams=beams,
                            max_new_tokens=args.max_new_tokens,
                            progress=False,
                        )
                        seconds[leave_out].append(time.perf_counter() - began)
                same = sum(a == b for a, b in zip(outputs[False], outputs[True]))
                search = "greedy" if beams == 1 else f"beam {beams}"
                for leave_out in (False, True):
                    bleu = sacrebleu.corpus_bleu(outputs[leave_out], [references]).score
                    chrf = sacrebleu.corpus_chrf(outputs[leave_out], [references]).score
                    best = min(seconds[leave_out])
                    rows.append(
                        [
                            f"{dtype}, exported",
                            search,
                            "left out" if leave_out else "decoded to the end",
                            f"{best:.1f}",
                            f"{min(seconds[False]) / best:.2f}x",
                            f"{bleu:.2f}",
                            f"{chrf:.2f}",
                            f"{same:,} of {len(sources):,}" if leave_out else "",
                        ]
                    )
                    print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
            del model
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    settings = {
        "model": args.model,
        "test": test_split_text(
            args, len(sources), f"up to {args.max_new_tokens} new tokens, batches of {args.batch_size}"
        ),
        "speed": f"wall-clock time of the whole split through translate_texts, fastest of {args.repeats}, the two "
        "ways alternating in one process",
    }
    print(header("Leaving out the rows generate no longer reads", settings, "cpu", start))
    print()
    columns = ["system", "search", "ignored rows", "seconds", "speed", "BLEU", "chrF", "lines the same"]
    print(table(columns, rows))


if __name__ == "__main__":
    main()
