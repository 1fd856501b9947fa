"""int8 with a scale per activation row against one scale per batch: speed, BLEU, and lines a batch changes.

    python recipes/benchmarks/int8_row_scales.py --model outputs/quickstart          # greedy and beam 5
    python recipes/benchmarks/int8_row_scales.py --model M --beam-sizes 5 --batch-sizes 32,8 --exported

``translate --dtype int8`` quantizes every linear layer's activations with a scale per row
(`hf_graphtf.translation.int8_linear`), as CTranslate2 does; torch's ``quantize_dynamic``, which the package used
before, takes one scale for a layer's whole input, so a sentence's translation depended on the sentences batched with
it. Here a trained model translates a test split through `translate_texts` (the call under ``hf-graphtf
translate``) in fp32, in int8 each way, and with ``--exported`` from ``hf-graphtf export --dtype int8``'s
package (built in a copy of the model's folder from the int8 layers). Each runs at the first
``--batch-sizes`` entry ``--repeats`` times, alternating in one process, the fastest kept, then once at each
other batch size. The table gives the time, BLEU and chrF at the first batch size, how many lines equal
fp32's, and how many lines a different batch size changes.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import sys
import time
import warnings
from typing import Any

import sacrebleu
import torch
from benchmark_page import header, run_start, table
from common import add_test_split_args, copy_of_model, positive_ints, test_split, test_split_text

from hf_graphtf.translation.aoti import export_model
from hf_graphtf.translation.inference import load_model, translate_texts


def quantized_per_batch(model: Any) -> Any:
    """``model`` as ``translate --dtype int8`` quantized it before: torch's ``quantize_dynamic``, one activation
    scale per call (kept here only to measure against)."""
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its deprecation warnings
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_test_split_args(parser)
    parser.add_argument("--beam-sizes", type=positive_ints, default="1,5", help="1 is greedy search")
    parser.add_argument(
        "--batch-sizes", type=positive_ints, default="32,8", help="the first is timed and scored (translate's 32)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--exported", action="store_true", help="also the exported int8 package")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = run_start()

    sources, references = test_split(args)
    tokenizer, fp32 = load_model(args.model, "cpu", "fp32", engine="eager")
    systems: dict[str, Any] = {
        "fp32": fp32,
        "int8, a scale per row": load_model(args.model, "cpu", "int8", engine="eager")[1],
        "int8, a scale per batch (quantize_dynamic)": quantized_per_batch(copy.deepcopy(fp32)),
    }
    package = None
    if args.exported:  # the package goes into a copy: the model's own folder is left as it was
        package = copy_of_model(args.model, prefix="int8-row-scales-")
        export_model(package, "int8")
        systems["int8, exported (a scale per row)"] = load_model(str(package), "cpu", "int8")[1]

    def translate(model: Any, beams: int, batch_size: int) -> list[str]:
        return translate_texts(
            tokenizer,
            model,
            sources,
            batch_size=batch_size,
            num_beams=beams,
            max_new_tokens=args.max_new_tokens,
            progress=False,
        )

    first, *others = args.batch_sizes
    rows = []
    try:
        for beams in args.beam_sizes:
            seconds: dict[str, list[float]] = {name: [] for name in systems}
            outputs: dict[tuple[str, int], list[str]] = {}
            for _ in range(args.repeats):
                for name, model in systems.items():
                    began = time.perf_counter()
                    outputs[name, first] = translate(model, beams, first)
                    seconds[name].append(time.perf_counter() - began)
            for name, model in systems.items():
                for batch_size in others:
                    outputs[name, batch_size] = translate(model, beams, batch_size)
            search = "greedy" if beams == 1 else f"beam {beams}"
            per_batch = min(seconds["int8, a scale per batch (quantize_dynamic)"])
            for name in systems:
                hypotheses = outputs[name, first]
                changed = [sum(a != b for a, b in zip(hypotheses, outputs[name, size])) for size in others]
                rows.append(
                    [
                        name,
                        search,
                        f"{min(seconds[name]):.1f}",
                        f"{per_batch / min(seconds[name]):.2f}x",
                        f"{sacrebleu.corpus_bleu(hypotheses, [references]).score:.2f}",
                        f"{sacrebleu.corpus_chrf(hypotheses, [references]).score:.2f}",
                        f"{sum(a == b for a, b in zip(hypotheses, outputs['fp32', first])):,}",
                        ", ".join(f"{count:,}" for count in changed) or "–",
                    ]
                )
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    finally:
        if package is not None:
            shutil.rmtree(package.parent, ignore_errors=True)
    settings = {
        "model": args.model,
        "test": test_split_text(args, len(sources), f"up to {args.max_new_tokens} new tokens"),
        "speed": f"wall-clock time of the whole split through translate_texts in batches of {first}, fastest of "
        f"{args.repeats}, the systems alternating in one process; speed relative to the scale per batch",
    }
    print(header("int8 with a scale per row against one per batch", settings, "cpu", start))
    print()
    changed_by = ", ".join(f"batches of {size}" for size in others) or "another batch size (none asked)"
    columns = ["system", "search", "seconds", "speed", "BLEU", "chrF", "lines as fp32's", f"lines {changed_by} change"]
    print(table(columns, rows))


if __name__ == "__main__":
    main()
