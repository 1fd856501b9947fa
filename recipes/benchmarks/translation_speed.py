"""Translation speed beside CTranslate2: Transformers' Marian, the linked model in every format
`hf-graphtf translate` offers, and CTranslate2 on the vanilla weights, in one process, interleaved.

    python recipes/benchmarks/translation_speed.py                           # opus-mt's shape, vocab 8,000
    python recipes/benchmarks/translation_speed.py --threads 1 --clock cpu   # on a machine shared with other jobs
    python recipes/benchmarks/translation_speed.py --size tiny --steps 1 --warmup 0 --cli-lines 8   # smoke

People who translate with Marian or NLLB models pick CTranslate2 for speed, but a model with the attention
link or graph attention cannot run there: this package is its only engine. So the table sets the linked
model, in each format of ``--dtype``, beside CTranslate2 running the same model without the link, which is
the speed such a user gives up.

Two parts:

- **generate**: one batch (16 sentences of 24 tokens by default), exactly ``--new-tokens`` new tokens each
  (``min = max``, so random weights do a trained model's work), greedy and beam 4, for each thread count.
  The Transformers systems load through the package's own `load_model` (the call under ``translate``);
  CTranslate2 translates the same token ids (``translate_batch``, ``min_decoding_length =
  max_decoding_length``).
- **exported** (``--exported``): the linked model built by ``hf-graphtf export`` in each format given, and
  decoded through its packages (``translate --engine exported``); the build is timed apart, once.
- **end to end** (``--cli-lines``): a text file through ``hf-graphtf translate`` in a child process, load
  time included, against a CTranslate2 script doing the same (load, tokenize, translate, detokenize,
  write), at each of ``--threads`` and ``--cli-beams``; target tokens per second of the child's CPU time
  (``--clock cpu``) or wall time. Each command also runs on a one-line file: its start-up.

Models have random weights at a pretrained checkpoint's shape, with opus-mt's special tokens (``</s>``
first, ``<pad>`` last and the decoder's start), and a word-level tokenizer over the vocabulary, so that
CTranslate2's Marian converter takes the vanilla model as it takes an opus-mt download.

CTranslate2 is a benchmark-only extra (``pip install -e ".[bench]"``), never a dependency of the package;
without it its rows say it is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from benchmark_page import header, run_start, table
from common import (
    SHAPES,
    Shape,
    compiled_formats,
    config_kwargs,
    exported_formats,
    positive_ints,
    synchronizer,
    translation_dtypes,
)
from measure import CLOCK_TEXT, interleaved

from hf_graphtf.translation.aoti import export_model, store_dir
from hf_graphtf.translation.dtype_choice import TRANSLATION_DTYPES
from hf_graphtf.translation.inference import load_model

#: opus-mt's special tokens: the converter of CTranslate2 expects ``<pad>`` last (the decoder's start)
EOS, UNK = 0, 1
#: the family compared: opus-mt's, which CTranslate2 converts with its Marian loader
OPUS_MT_FAMILY = "marian"


def has_ctranslate2() -> bool:
    return importlib.util.find_spec("ctranslate2") is not None


def write_models(shape: Shape, folder: Path, seed: int) -> dict[str, Path]:
    """Vanilla `MarianMTModel` and the same weights with ``attention_link="both"``, each with a word-level
    tokenizer, saved as a user's checkpoints are; returns their folders."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

    from hf_graphtf import GraphMarianMTModel

    pad = shape.vocab - 1
    vocab = {"</s>": EOS, "<unk>": UNK, **{f"w{i}": i for i in range(2, pad)}, "<pad>": pad}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", EOS)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="</s>", unk_token="<unk>", pad_token="<pad>", model_max_length=512
    )
    # the benchmarks' shared fields, with opus-mt's special tokens (the converter expects <pad> last)
    special = {"eos_token_id": EOS, "pad_token_id": pad, "decoder_start_token_id": pad, "bos_token_id": None}
    fields = {**config_kwargs(shape, OPUS_MT_FAMILY, "sdpa", max_length=510), **special}
    config = MarianConfig(**{**fields, "forced_eos_token_id": EOS, "num_beams": 4, "max_length": 512})
    torch.manual_seed(seed)
    folders = {"vanilla": folder / "vanilla", "linked": folder / "linked"}
    MarianMTModel(config).save_pretrained(folders["vanilla"])
    linked = GraphMarianMTModel.from_pretrained(folders["vanilla"], attention_link="both")
    linked.save_pretrained(folders["linked"])
    for path in folders.values():
        tokenizer.save_pretrained(path)
    return folders


def folder_megabytes(folder: Path, pattern: str) -> float:
    """The size of the files matching ``pattern`` in ``folder``, in MB (10^6 bytes)."""
    return sum(path.stat().st_size for path in folder.glob(pattern)) / 1e6


def convert_ctranslate2(vanilla: Path, folder: Path, quantization: str | None) -> Path:
    """The vanilla checkpoint as CTranslate2 converts an opus-mt download (``ct2-transformers-converter``)."""
    from ctranslate2.converters import TransformersConverter

    output = folder / f"ct2-{quantization or 'float32'}"
    TransformersConverter(str(vanilla)).convert(str(output), quantization=quantization, force=True)
    return output


def source_batch(shape: Shape, batch_size: int, length: int, seed: int) -> torch.Tensor:
    """``batch_size`` sentences of exactly ``length`` tokens, the last ``</s>`` (no padding, so every system
    reads the same sources)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, shape.vocab - 1, (batch_size, length), generator=generator)
    ids[:, -1] = EOS
    return ids


def hf_runner(model: torch.nn.Module, ids: torch.Tensor, beams: int, new_tokens: int) -> Callable[[], object]:
    ids = ids.to(model.device)
    mask = torch.ones_like(ids)
    options = dict(num_beams=beams, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)

    decoding = getattr(model, "exported_decoding", None)  # the exported package, where it loaded one

    def run() -> torch.Tensor:
        with torch.inference_mode():
            if decoding is not None:
                output = decoding.generate(model, input_ids=ids, attention_mask=mask, **options)
            else:
                output = model.generate(input_ids=ids, attention_mask=mask, **options)
        if output.shape[1] != new_tokens + 1:  # + the decoder start token
            raise RuntimeError(f"expected {new_tokens} new tokens, got {output.shape[1] - 1}")
        return output

    return run


def ct2_runner(translator, tokens: list[list[str]], beams: int, new_tokens: int) -> Callable[[], object]:
    def run() -> object:
        results = translator.translate_batch(
            tokens,
            beam_size=beams,
            max_decoding_length=new_tokens,
            min_decoding_length=new_tokens,
            max_batch_size=len(tokens),
        )
        lengths = {len(result.hypotheses[0]) for result in results}
        if not lengths <= {new_tokens, new_tokens - 1}:  # with or without the closing </s>
            raise RuntimeError(f"CTranslate2 generated {sorted(lengths)} tokens, asked for {new_tokens}")
        return results

    return run


#: the end-to-end CTranslate2 job: what a CTranslate2 user runs on a text file (load, tokenize, translate
#: in length-sorted batches, detokenize, write), timed like ``hf-graphtf translate``
CT2_SCRIPT = """
import sys, ctranslate2
from transformers import AutoTokenizer
model, tokenizer_dir, source, target, beams, new_tokens, threads, batch = sys.argv[1:]
tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
translator = ctranslate2.Translator(model, device="cpu", intra_threads=int(threads), inter_threads=1)
lines = open(source, encoding="utf-8").read().splitlines()
tokens = [tokenizer.convert_ids_to_tokens(tokenizer(line)["input_ids"]) for line in lines]
results = translator.translate_batch(tokens, beam_size=int(beams), max_decoding_length=int(new_tokens),
                                     max_batch_size=int(batch), batch_type="examples")
with open(target, "w", encoding="utf-8") as out:
    for result in results:
        ids = tokenizer.convert_tokens_to_ids(result.hypotheses[0])
        out.write(tokenizer.decode(ids, skip_special_tokens=True) + "\\n")
"""


def timed_child(command: list[str], clock: str, env: dict[str, str] | None = None) -> float:
    """Seconds a child process took: its CPU time (user + system, all its threads and the processes it waited
    for, such as the compiler's workers) or wall time. `env` is added to this process's environment."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed:\n{result.stderr[-2000:]}")
    for line in result.stderr.splitlines():  # what translate chose, and why: kept with the run's log
        if line.startswith("hf-graphtf: "):
            print(f"  {line}", file=sys.stderr, flush=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu if clock == "cpu" else wall


def end_to_end(
    args, shape: Shape, folders: dict[str, Path], ct2: dict[str, Path], work: Path
) -> tuple[list[list[str]], list[list[str]]]:
    """``--cli-lines`` lines through ``hf-graphtf translate`` (linked model, each format; with ``--compiled``,
    each compiled format twice: with torch's compiler cache empty, then filled by that first run, as a user's
    second file finds it) and through CTranslate2 (vanilla weights), load included, at each thread count and
    each of ``--cli-beams``: the rows of target tokens/s. And the start-up rows: each (not compiled) command on
    a one-line file, at each thread count (imports, load and one sentence: what a file of any size pays
    once)."""
    generator = torch.Generator().manual_seed(args.seed + 1)
    source, one_line = work / "source.txt", work / "one-line.txt"
    lines = []
    for _ in range(args.cli_lines):
        length = int(torch.randint(args.length // 2, args.length * 3 // 2, (1,), generator=generator))
        words = torch.randint(2, shape.vocab - 1, (length,), generator=generator).tolist()
        lines.append(" ".join(f"w{word}" for word in words))
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one_line.write_text(lines[0] + "\n", encoding="utf-8")
    rows, startup = [], []
    for threads in args.threads:
        for beams in args.cli_beams:
            search = "greedy" if beams == 1 else f"beam {beams}"
            timed = [
                (name, *_timed_job(args, command, output, env))
                for name, command, output, env in _end_to_end_jobs(args, folders, ct2, work, source, threads, beams)
            ]
            ct2_int8 = next(
                ((rate, positions / seconds) for name, _, positions, seconds, rate in timed if _is_ct2_int8(name)),
                None,
            )
            for name, produced, positions, seconds, rate in timed:
                versus = "–" if ct2_int8 is None else f"{rate / ct2_int8[0]:.2f}x"
                by_position = "–" if ct2_int8 is None else f"{positions / seconds / ct2_int8[1]:.2f}x"
                cells = [str(threads), search, name, f"{produced:,}", f"{seconds:.1f}", f"{rate:.0f}", versus]
                cells += [f"{positions / seconds:.0f}", by_position]
                rows.append(cells)
                print("end to end: " + " | ".join(cells), file=sys.stderr, flush=True)  # a run cut short keeps it
        jobs = _end_to_end_jobs(args, folders, ct2, work, one_line, threads, args.cli_beams[0])
        for name, command, output, env in jobs:
            if "--compile" not in command:
                startup.append([str(threads), name, f"{_timed_job(args, command, output, env)[2]:.1f}"])
    return rows, startup


def _is_ct2_int8(name: str) -> bool:
    return name.startswith("CTranslate2") and "int8" in name


def _timed_job(args, command: list[str], output: Path, env: dict[str, str]) -> tuple[int, int, float, float]:
    """Target tokens a child wrote (one word-level token per word), the decoder positions behind them, its
    seconds and its target tokens/s. A line's positions are its words and its ``</s>``, which a line shorter
    than the cap had: at the cap Marian's generation config forces ``</s>`` as the last token
    (``forced_eos_token_id``), where CTranslate2 writes a word, so the two systems write different numbers of
    words from as many decoder steps."""
    seconds = timed_child(command, args.clock, env)
    words = [len(line.split()) for line in output.read_text(encoding="utf-8").splitlines()]
    positions = sum(count + (count < args.new_tokens) for count in words)
    return sum(words), positions, seconds, sum(words) / seconds


def _end_to_end_jobs(
    args, folders: dict[str, Path], ct2: dict[str, Path], work: Path, source: Path, threads: int, beams: int
) -> list[tuple[str, list[str], Path, dict[str, str]]]:
    """The end-to-end commands on ``source`` at one thread count and beam size: (name, command, output, env)."""
    common = ["--beam-size", str(beams), "--max-new-tokens", str(args.new_tokens)]
    common += ["--batch-size", str(args.batch_size), "--quiet", "--input", str(source), "--threads", str(threads)]
    translate = [sys.executable, "-m", "hf_graphtf.cli", "translate", "--model", str(folders["linked"]), *common]
    jobs: list[tuple[str, list[str], Path, dict[str, str]]] = []
    for mode in args.dtypes:
        output = work / f"out-{mode}.txt"
        command = [*translate, "--dtype", mode, "--engine", "eager", "--output", str(output)]
        jobs.append((f"hf-graphtf translate, linked, --dtype {mode}", command, output, {}))
    for mode in args.exported:
        output = work / f"out-{mode}-exported.txt"
        command = [*translate, "--dtype", mode, "--engine", "exported", "--output", str(output)]
        jobs.append((f"hf-graphtf translate, linked, --dtype {mode} --engine exported", command, output, {}))
    for engine, dtype in args.runtimes:
        output = work / f"out-{dtype}-{engine}.txt"
        command = [*translate, "--dtype", dtype, "--engine", engine, "--output", str(output)]
        jobs.append((f"hf-graphtf translate, linked, --dtype {dtype} --engine {engine}", command, output, {}))
    if args.exported or args.runtimes:  # the folder holds those exports: what translate takes with no flags
        output = work / "out-no-flags.txt"
        command = [*translate, "--output", str(output)]
        jobs.append(("hf-graphtf translate, linked, no --dtype or --engine", command, output, {}))
    for mode in args.compiled:
        # one compiler cache per mode, thread count and beam size, empty until its first run
        cache = {"TORCHINDUCTOR_CACHE_DIR": str(work / f"compiler-cache-{mode}-{threads}-{beams}")}
        output = work / f"out-{mode}-compiled.txt"
        command = [*translate, "--dtype", mode, "--compile", "on", "--output", str(output)]
        for state in ("compiler cache empty", "compiler cache filled"):
            jobs.append((f"hf-graphtf translate, linked, --dtype {mode} --compile on, {state}", command, output, cache))
    for quantization, folder in ct2.items():
        output = work / f"ct2-{quantization}.txt"
        command = [sys.executable, "-c", CT2_SCRIPT, str(folder), str(folders["vanilla"]), str(source), str(output)]
        command += [str(beams), str(args.new_tokens), str(threads), str(args.batch_size)]
        jobs.append((f"CTranslate2 {ctranslate2_version()}, vanilla weights, {quantization}", command, output, {}))
    return jobs


def ctranslate2_version() -> str:
    import ctranslate2

    return ctranslate2.__version__


def _runtime_systems(args, folder: Path, models: dict[str, torch.nn.Module], sizes: list[list[str]]) -> None:
    """The linked model exported for each of ``--runtimes`` (`hf_graphtf.translation.runtimes`), once, before
    anything is timed: its system in ``models`` and its build, size and load time in ``sizes``."""
    from hf_graphtf.translation.runtimes import export_runtime

    for engine, dtype in args.runtimes:
        began = time.perf_counter()
        target = export_runtime(folder, dtype, engine=engine, progress=lambda line: print(line, file=sys.stderr))
        built = time.perf_counter() - began
        began = time.perf_counter()
        _, model = load_model(str(folder), args.device, dtype, engine=engine)
        loaded = time.perf_counter() - began
        stored = folder_megabytes(target, "*.data") + folder_megabytes(target, "*.bin")  # ONNX's, OpenVINO's weights
        sizes.append(
            [f"linked {dtype}, {engine}", f"{built:.0f}", f"{stored:.0f} (weights in the export)", f"{loaded:.1f}"]
        )
        if not args.end_to_end_only:
            models[f"linked (attention_link=both) {dtype}, {engine}"] = model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SHAPES), default="opus-mt")
    parser.add_argument("--vocab", type=int, default=8000, help="vocabulary (opus-mt's own is 65,001)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--length", type=int, default=24, help="source tokens per sentence")
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--beams", type=positive_ints, default="4,1", help="comma-separated beam sizes (1: greedy)")
    parser.add_argument("--threads", type=positive_ints, default="1,2", help="comma-separated thread counts")
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda for the package's rows alone (CTranslate2 runs on the CPU here)"
    )
    parser.add_argument(
        "--dtypes",
        "--modes",  # its name before 0.2
        type=translation_dtypes,
        default="fp32,bf16,int8",
        help=f"the package's formats to time, of {', '.join(TRANSLATION_DTYPES[1:])}",
    )
    parser.add_argument(
        "--compiled",
        nargs="?",
        type=compiled_formats,
        const=["fp32", "bf16"],
        default=[],
        metavar="MODES",
        help="also vanilla and the linked model with compiled decoding (static cache, torch.compile: translate "
        "--compile on) "
        "in these formats (without a value: fp32,bf16; int8 is refused, its quantized linears do not compile), "
        "its compile time said apart",
    )
    parser.add_argument(
        "--exported",
        nargs="?",
        type=exported_formats,
        const=["bf16"],
        default=[],
        metavar="MODES",
        help="also the linked model exported (hf-graphtf export) in these formats (without a value: bf16), "
        "its build time said apart",
    )
    parser.add_argument(
        "--runtimes",
        type=lambda spec: [tuple(f"{name}:fp32".split(":")[:2]) for name in spec.split(",") if name],
        default=[],
        metavar="ENGINES",
        help="also the linked model exported for these runtime engines, each ENGINE or ENGINE:DTYPE (onnx,openvino,"
        "onnx:int8: hf-graphtf export --engine ENGINE --dtype DTYPE, fp32 by default), its export time said apart",
    )
    parser.add_argument("--steps", type=int, default=3, help="measured calls per system (after warm-up)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--cli-lines", type=int, default=0, help="lines of the end-to-end part (0: none)")
    parser.add_argument(
        "--cli-beams", type=positive_ints, default="4,1", help="comma-separated beam sizes of the end-to-end part"
    )
    parser.add_argument(
        "--end-to-end-only", action="store_true", help="only the end-to-end part (with --cli-lines): no generate table"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.end_to_end_only and not args.cli_lines:
        parser.error("--end-to-end-only needs --cli-lines N")
    with tempfile.TemporaryDirectory(prefix="translation-speed-") as work:  # the models, packages and outputs
        measure(args, Path(work))


def measure(args: argparse.Namespace, work: Path) -> None:
    """Everything `main` prints, with the models and packages written under ``work``."""
    start = run_start()
    shape = Shape(**{**SHAPES[args.size].__dict__, "vocab": args.vocab})

    folders = write_models(shape, work, args.seed)
    ct2: dict[str, Path] = {}
    on_gpu = args.device.startswith("cuda")
    if on_gpu:
        missing = "left out on a GPU: this script runs CTranslate2 on the CPU only"
    elif has_ctranslate2():
        ct2 = {
            q: convert_ctranslate2(folders["vanilla"], work, None if q == "float32" else q) for q in ("float32", "int8")
        }
        missing = ""
    else:
        missing = "not installed (pip install ctranslate2, or the [bench] extra): its rows are missing"
        print(f"CTranslate2 {missing}", file=sys.stderr)

    ids = source_batch(shape, args.batch_size, args.length, args.seed)
    # every format of the package, loaded once (as `translate` loads it) and timed at each thread count
    models: dict[str, torch.nn.Module] = {}
    for family, label in (("vanilla", "Transformers MarianMTModel"), ("linked", "linked (attention_link=both)")):
        for mode in [] if args.end_to_end_only else args.dtypes:
            tokenizer, models[f"{label} {mode}"] = load_model(str(folders[family]), args.device, mode, engine="eager")
    compiled_names = []
    for mode in args.compiled if not args.end_to_end_only else []:
        for family, label in (("vanilla", "Transformers MarianMTModel"), ("linked", "linked (attention_link=both)")):
            name = f"{label} {mode}, compiled"
            _, models[name] = load_model(str(folders[family]), args.device, mode, compile="on")
            compiled_names.append(name)
    sizes: list[list[str]] = []  # what each system stores and how long it takes to make and to load
    for mode in args.exported:  # built once, before anything is timed; the end-to-end part reuses the build
        began = time.perf_counter()
        export_model(folders["linked"], mode, progress=lambda line: print(line, file=sys.stderr, flush=True))
        built = time.perf_counter() - began
        began = time.perf_counter()
        _, model = load_model(str(folders["linked"]), args.device, mode, engine="exported")
        loaded = time.perf_counter() - began
        packages = store_dir(folders["linked"], mode)
        stored = folder_megabytes(packages, "*.pt2")
        sizes.append(
            [
                f"linked {mode}, exported",
                f"{built:.0f}",
                f"{stored:.0f} (weights in the model's safetensors)",
                f"{loaded:.1f}",
            ]
        )
        if not args.end_to_end_only:
            models[f"linked (attention_link=both) {mode}, exported"] = model
    _runtime_systems(args, folders["linked"], models, sizes)
    fp32_megabytes = folder_megabytes(folders["linked"], "*.safetensors")
    if args.exported or args.runtimes:
        sizes.append(["the model's safetensors (fp32)", "–", f"{fp32_megabytes:.0f}", "–"])
        for quantization, folder in ct2.items():
            sizes.append([f"CTranslate2 {quantization}", "–", f"{folder_megabytes(folder, 'model.bin'):.0f}", "–"])
    compile_seconds: list[str] = []
    rows, records = [], []
    # CTranslate2 reads token strings
    tokens = [tokenizer.convert_ids_to_tokens(row) for row in ids.tolist()] if models else []
    for threads in [] if args.end_to_end_only else args.threads:
        torch.set_num_threads(threads)
        systems: dict[str, Callable[[int], Callable[[], object]]] = {
            name: (lambda beams, model=model: hf_runner(model, ids, beams, args.new_tokens))
            for name, model in models.items()
        }
        if ct2:
            import ctranslate2

            for quantization, folder in ct2.items():
                translator = ctranslate2.Translator(str(folder), device="cpu", intra_threads=threads, inter_threads=1)
                name = f"CTranslate2 {ctranslate2.__version__} (vanilla weights) {quantization}"
                systems[name] = lambda beams, t=translator: ct2_runner(t, tokens, beams, args.new_tokens)
        for beams in args.beams:
            names = list(systems)
            for name in compiled_names:  # the first call compiles (for each new shape): timed apart
                began = time.perf_counter()
                systems[name](beams)()
                search = "greedy" if beams == 1 else f"beam {beams}"
                compile_seconds.append(f"{name}, {search}, {threads} thread(s): {time.perf_counter() - began:.0f} s")
                print(f"compiled: {compile_seconds[-1]}", file=sys.stderr, flush=True)  # a run cut short keeps it
            timing = interleaved(
                [systems[name](beams) for name in names],
                steps=args.steps,
                warmup=args.warmup,
                sync=synchronizer(args.device),
                clock=args.clock,
            )
            base = timing.median(0)
            ct2_int8 = next(
                (i for i, n in enumerate(names) if n.startswith("CTranslate2") and n.endswith("int8")), None
            )
            for i, name in enumerate(names):
                tokens_per_second = args.batch_size * args.new_tokens / timing.median(i)
                cells = [
                    str(threads),
                    "greedy" if beams == 1 else f"beam {beams}",
                    name,
                    f"{tokens_per_second:.0f}",
                    f"{base / timing.median(i):.2f}x",
                    "–" if ct2_int8 is None else f"{timing.median(ct2_int8) / timing.median(i):.2f}x",
                ]
                rows.append(cells)
                print("measured: " + " | ".join(cells), file=sys.stderr, flush=True)  # a run cut short keeps it
                records.append(
                    {"threads": threads, "beams": beams, "system": name, "tokens_per_second": tokens_per_second}
                )

    settings = {
        "model": f"opus-mt's shape ({shape.describe()}), random weights, sdpa",
        "batch": f"{args.batch_size} sentences of {args.length} source tokens, exactly {args.new_tokens} new tokens "
        "each (min = max)",
        "systems": "Transformers' MarianMTModel and the same weights with attention_link='both', each loaded by "
        "hf_graphtf.translation.inference.load_model in each --dtype; CTranslate2 on the vanilla weights, converted as "
        "ct2-transformers-converter does" + (f" ({missing})" if missing else ""),
        "steps": f"{args.warmup} warm-up + {args.steps} measured calls per system, interleaved; medians",
        "clock": CLOCK_TEXT[args.clock],
    }
    e2e, startup = end_to_end(args, shape, folders, ct2, work) if args.cli_lines else ([], [])  # before the header
    if args.end_to_end_only:  # (each row says its children's threads)
        settings = {key: value for key, value in settings.items() if key in ("model", "systems")}
    threads = f"{', '.join(map(str, args.threads))} (each row's threads column)"
    print(header("Translation speed beside CTranslate2", settings, args.device, start, threads=threads))
    if rows:
        print()
        base = f"vs Transformers {args.dtypes[0]}" if args.dtypes else f"vs {rows[0][2]}"
        columns = ["threads", "search", "system", "target tokens/s", base, "vs CTranslate2 int8"]
        print(table(columns, rows))
    if sizes:
        print()
        print(
            f"What is stored (the fp32 safetensors hold {fp32_megabytes / 4:.1f} M parameters: int8 weights take "
            "about as many MB), "
            "how long the export took (hf-graphtf export, once per model and format) and how long `load_model` took "
            "(wall clock):"
        )
        print()
        print(table(["system", "build s", "MB stored", "load s"], sizes))
    if compile_seconds:
        print()
        print("First call of each compiled system (compiling included, wall clock): " + "; ".join(compile_seconds))
    if args.cli_lines:
        print()
        print(
            f"End to end, {args.cli_lines} lines ({args.length // 2}-{args.length * 3 // 2 - 1} words), up to "
            f"{args.new_tokens} new tokens, batches of {args.batch_size}, load time included; "
            f"{CLOCK_TEXT[args.clock]} of the child process; positions: the decoder steps behind the words, a line's "
            "words and its </s> where it ended before the cap (at the cap Marian's generation config makes the "
            "last token </s>, which CTranslate2 does not):"
        )
        print()
        columns = ["threads", "search", "system", "target tokens", "seconds", "target tokens/s", "vs CTranslate2 int8"]
        columns += ["positions/s", "positions vs CTranslate2 int8"]
        print(table(columns, e2e))
        print()
        search = "greedy" if args.cli_beams[0] == 1 else f"beam {args.cli_beams[0]}"
        print(f"Start-up: the same commands on a one-line file ({search}; imports, load and one sentence), seconds:")
        print()
        print(table(["threads", "system", "seconds"], startup))
        records += [
            {"end_to_end": row[2], "threads": int(row[0]), "search": row[1], "tokens": row[3], "seconds": row[4]}
            for row in e2e
        ]
        records += [{"start_up": row[1], "threads": int(row[0]), "seconds": row[2]} for row in startup]
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
