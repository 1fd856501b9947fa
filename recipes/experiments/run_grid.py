"""Run an experiment grid: every selected (variant, size, seed) through the real training script.

    python recipes/experiments/run_grid.py recipes/experiments/grid_bible_cpu.yaml --variants core --sizes 10k
    python recipes/experiments/run_grid.py GRID --processes 2        # two data-parallel CPU processes per run
    python recipes/experiments/run_grid.py GRID --jobs 8             # eight runs at a time (sharing one GPU)
    python recipes/experiments/run_grid.py GRID --dry-run            # list the runs and their state
    python recipes/experiments/run_grid.py GRID --runs al_both-10k-seed2,vanilla-10k-seed3   # these, in this order
    python recipes/experiments/run_grid.py GRID --restore --sizes full --processes 2   # see below

A run whose name is already in the results file is skipped; a run with checkpoints in its output
folder resumes from them (the training script does that); a run that would train in a precision none
of its size's finished runs trained in is refused before anything starts (`precision_conflicts`;
``--allow-other-precision`` starts it anyway); a finished run appends one JSON line to
the results file: what was run, on what, how fast, and its validation and test scores (sacreBLEU
BLEU, chrF and chrF++ with signatures, and BLEU on Moses-tokenized text, the papers' multi-bleu
convention), and where its test translations are. Rows are never rewritten or dropped.

A finished run also leaves its test translations and training log in the grid's archive, in the
repository (see archive.py), because the report needs them and the output folder stays on the
machine that trained it. ``--restore`` gives the selected finished runs that lack an archive one:
from the output folder where it is here, else by rerunning the run exactly as its row records it
(same recipe, overrides and seed, on the same kind of device) and archiving the rerun only if it
reproduces the row's steps, parameter count and validation and test scores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

if not __package__:  # run as a script (`python recipes/experiments/run_grid.py`): import its siblings as the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "recipes.experiments"

from . import archive
from .grid import REPO_ROOT, Grid, Run, cpus_differ, languages, relative, resolve_corpus
from .rows import Row

TRAIN_SCRIPT = REPO_ROOT / "recipes" / "train_translation.py"


def _flag_value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def train_command(run: Run, processes: int) -> list[str]:
    """The command line of one run: the committed recipe, then its overrides as flags (flags win)."""
    if processes > 1:
        launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes)]
        launch += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    else:
        launch = [sys.executable]
    flags = [item for name, value in run.overrides.items() for item in (f"--{name}", _flag_value(value))]
    return [*launch, str(TRAIN_SCRIPT), str(run.recipe), *flags]


def device_name(processes: int) -> str:
    """What the run trained on, for the results row."""
    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} x{processes}"
    return f"cpu ({os.cpu_count()} cores, {processes} process{'es' if processes > 1 else ''}; {platform.machine()})"


def _recipe_of(run: Run) -> tuple[dict[str, Any], str]:
    """The run's recipe with its overrides, and its corpus as an absolute path (or a Hub id)."""
    recipe = run.recipe_fields()
    return recipe, resolve_corpus(recipe["corpus"])


def provenance(corpus: str) -> dict[str, Any]:
    """What a rerun has to match to reproduce a run, taken when it starts: the code's commit and the code
    files changed from it, the versions of the libraries that compute (`software_record`, as every
    run's results.json has them), the corpus files' content, and the CPU (its model, the vector kernels
    torch picks on it and a fingerprint of how it sums a float32 training step: float sums come out
    differently on different CPUs, so a CPU run is reproducible bit for bit only where all three match)."""
    from hf_graphtf.data.fingerprints import fingerprint
    from hf_graphtf.machine import cpu_record
    from hf_graphtf.training.tooling import software_record

    files = sorted(Path(corpus).glob("*.jsonl")) if Path(corpus).is_dir() else []
    return {
        **software_record(code_paths=("hf_graphtf", relative(TRAIN_SCRIPT))),
        "corpus_sha256": {path.name: fingerprint(path)["sha256"] for path in files} or None,
        "cpu": cpu_record(),
    }


def target_tokens_per_epoch(output_dir: Path, corpus: str, split: str, tgt_lang: str, src_lang: str) -> int:
    """Target tokens (with ``</s>``) of one pass over the training split, with the run's own tokenizer."""
    from transformers import AutoTokenizer

    from hf_graphtf.data import load_parallel_corpus

    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    data = load_parallel_corpus(corpus, src_lang=src_lang, tgt_lang=tgt_lang, split=split)
    targets = [pair[tgt_lang] for pair in data["translation"]]
    return sum(len(ids) for ids in tokenizer(text_target=targets)["input_ids"])


def test_scores(output_dir: Path, results: dict[str, Any], corpus: str, split: str, langs: tuple[str, str]):
    """The run's test scores (single reference, the target side): BLEU and chrF as the run computed them,
    chrF++ and Moses-tokenized BLEU from its saved translations, with the package's metric."""
    from hf_graphtf.data import load_parallel_corpus
    from hf_graphtf.translation_scores import score_translations

    src_lang, tgt_lang = langs
    hypotheses = (output_dir / "test_predictions.txt").read_text(encoding="utf-8").splitlines()
    data = load_parallel_corpus(corpus, src_lang=src_lang, tgt_lang=tgt_lang, split=split)
    references = [pair[tgt_lang] for pair in data["translation"]]
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{output_dir}/test_predictions.txt has {len(hypotheses)} lines for {len(references)} sentences"
        )
    scores = score_translations(hypotheses, references, tgt_lang=tgt_lang, tokenized=True)
    return {
        "bleu": results["test"]["bleu"],
        "bleu_signature": results["test"]["bleu_signature"],
        "chrf": results["test"]["chrf"],
        "chrf_signature": results["test"]["chrf_signature"],
        "chrf_pp": scores["chrf_pp"],
        "chrf_pp_signature": scores["chrf_pp_signature"],
        "bleu_tokenized": scores["bleu_tokenized"],
        "bleu_tokenized_method": scores["bleu_tokenized_method"],
        "repeated_token_outputs": results["test"].get("repeated_token_outputs"),
        "bleu_by_length": results["test"].get("bleu_by_length"),
    }


def results_row(
    run: Run,
    grid: Grid,
    processes: int,
    wall_seconds: float,
    concurrent_runs: int = 1,
    cpu_seconds: float | None = None,
    started_with: dict[str, Any] | None = None,
) -> Row:
    """The row of a finished run, from its results.json and saved translations (archived first).

    ``concurrent_runs`` is the ``--jobs`` setting the run was made under (at most that many ran side by
    side): runs sharing a device are slower each, so speed columns compare only at the same setting.
    ``cpu_seconds`` is the CPU time of the run's whole process tree; divided by the wall time it gives
    the cores the run actually got, which shows when other work on the machine slowed it down (a
    wall-clock speed alone cannot tell a slower variant from a busier machine). ``started_with`` is the
    run's ``provenance`` when it started.

    The row's ``resumed_from_step`` is the step of the checkpoint the run's last training sitting
    resumed from, as the training script recorded it in results.json (None when it ran in one
    sitting). The time figures (wall, CPU and training seconds) are then the last sitting's: the
    Trainer's ``train_runtime`` covers only its own ``train()`` call and the time of the earlier
    sittings is not kept anywhere. So the speed is that sitting's too: the target tokens of the steps
    it trained, over its runtime (the batches are fixed, so each step is the same share of an epoch).
    """
    output = run.output_dir
    results = json.loads((output / "results.json").read_text(encoding="utf-8"))
    recipe, corpus = _recipe_of(run)
    langs = languages(recipe)
    train = results["train"]
    tokens = target_tokens_per_epoch(output, corpus, recipe.get("train_split", "train"), langs[1], langs[0])
    epochs = float(train.get("epoch") or 0.0)
    runtime = float(train.get("train_runtime") or 0.0)
    steps = train.get("global_step") or 0
    resumed_from_step = resumed_step(train)
    sitting_epochs = epochs * (steps - (resumed_from_step or 0)) / steps if steps else 0.0
    return Row.from_json(
        {
            "run": run.name,
            "grid": grid.name,
            "variant": run.variant,
            "size": run.size,
            "seed": run.seed,
            **({"tuning": {"field": grid.tuning.field, "value": run.overrides[grid.tuning.field]}} if run.tag else {}),
            "recipe": relative(run.recipe),
            "overrides": {key: value for key, value in run.overrides.items() if key != "output_dir"},
            "options": results["model"]["options"],
            "device": device_name(processes),
            "concurrent_runs": concurrent_runs,
            "steps": train.get("global_step"),
            "stop_reason": train.get("stop_reason"),
            "best_step": train.get("best_step"),
            "train_minutes": train.get("train_minutes"),
            "precision": train.get("precision", "fp32"),
            # the attention kernel it trained with (rows before it was recorded: sdpa, the only default then)
            "attn_implementation": train.get("attn_implementation", "sdpa"),
            "epochs": round(epochs, 3),
            "resumed_from_step": resumed_from_step,
            "wall_seconds": round(wall_seconds, 1),
            "cpu_seconds": None if cpu_seconds is None else round(cpu_seconds, 1),
            "cores_used": None if cpu_seconds is None else round(cpu_seconds / wall_seconds, 2),
            "train_seconds": round(runtime, 1),
            "target_tokens_per_second": round(tokens * sitting_epochs / runtime, 1)
            if runtime and sitting_epochs > 0
            else None,
            "parameters": results["model"]["parameters"],
            "valid": {"bleu": results["eval"].get("eval_bleu"), "chrf": results["eval"].get("eval_chrf")},
            "test": test_scores(output, results, corpus, recipe.get("test_split", "test"), langs),
            "output_dir": relative(output),
            "hypotheses": relative(grid.archive_folder(run.name) / archive.HYPOTHESES),
            "provenance": started_with,
            "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )


def run_grid(grid: Grid, runs: list[Run], processes: int, dry_run: bool = False, jobs: int = 1) -> bool:
    """Run what is not finished yet, ``jobs`` runs at a time, appending a row as each finishes.

    Runs start in the order given (the grid's, seed-major, unless ``--runs`` names an order). Rows are
    written by this process only, one line per
    finished run, so concurrent runs never interleave in the results file. After a failed run no new
    run starts; the ones already running finish and keep their rows. Returns False when a run failed.
    """
    done = {row.run for row in grid.finished_rows()}
    pending = []
    for index, run in enumerate(runs, start=1):
        state = "waits for the tuning runs" if run.waits_for_tuning else _state(grid, run, done)
        print(f"[{index}/{len(runs)}] {run.name}: {state}", flush=True)
        if run.name not in done and not run.waits_for_tuning:
            pending.append(run)
    if dry_run:
        return True
    running: list[_Running] = []
    failed = False
    while pending or running:
        while pending and not failed and len(running) < jobs:
            running.append(_Running.start(pending.pop(0), processes))
        if not running:
            break
        ended = [job for job in running if job.poll() is not None]
        if not ended:
            time.sleep(0.5)  # runs take minutes: polling costs nothing next to them
        for job in ended:
            code = job.wait()
            running.remove(job)
            if code != 0:
                print(f"  {job.run.name} failed (exit {code}); see {job.run.output_dir / 'train.log'}", flush=True)
                failed = True
                continue
            archive.archive_run(job.run.output_dir, grid.archive_folder(job.run.name))
            row = results_row(
                job.run,
                grid,
                processes,
                job.ended - job.started,
                concurrent_runs=jobs,
                cpu_seconds=job.cpu_seconds,
                started_with=job.provenance,
            )
            grid.results.parent.mkdir(parents=True, exist_ok=True)
            with open(grid.results, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row.to_json(), ensure_ascii=False) + "\n")
            print(
                f"  {job.run.name}: test BLEU {row.test['bleu']}  chrF {row.test['chrf']}"
                f"  ({row.wall_seconds:.0f} s, {row.cores_used} cores)",
                flush=True,
            )
    return not failed


def _state(grid: Grid, run: Run, done: set[str]) -> str:
    if run.name not in done:
        return resume_state(run) if run.output_dir.exists() else "to run"
    if archive.is_archived(grid.archive_folder(run.name)):
        return "done"
    if archive.can_archive(run.output_dir):
        return "done (not archived: --restore copies its output folder)"
    return "done (not archived, no output folder: --restore reruns it)"


def resume_state(run: Run) -> str:
    """Where an unfinished run with an output folder stands (`Run.progress`), as the runner says it
    before resuming: its step, its best validation score so far and how many evaluations in a row have
    not beaten it."""
    progress = run.progress()
    if progress is None:
        return "starts over (its output folder has no whole checkpoint)"
    text = f"resumes from step {progress.step}"
    if progress.best_metric is not None:
        text += f", best validation {progress.metric} {progress.best_metric} at step {progress.best_step}"
    if patience := progress.patience_text():
        text += f", {patience}"
    return text


def rerun_problem(row: Row, run: Run, processes: int) -> str | None:
    """Why rerunning ``run`` could not reproduce ``row`` (the grid or the machine changed), or None."""
    overrides = {key: value for key, value in run.overrides.items() if key != "output_dir"}
    if row.overrides != overrides:
        changed = sorted(key for key in {*overrides, *row.overrides} if overrides.get(key) != row.overrides.get(key))
        return f"the grid's overrides changed since it ran ({', '.join(changed)})"
    if row.recipe != relative(run.recipe):
        return f"it ran recipe {row.recipe}, the grid now names {relative(run.recipe)}"
    if row.device != device_name(processes):
        return f"it ran on {row.device}, this is {device_name(processes)} (set --processes to match)"
    if problem := _missing_corpus(run):
        return str(problem)
    recorded, now = row.provenance or {}, provenance(_recipe_of(run)[1])
    if corpus_changed(recorded, now):
        return "its corpus files had other content than they have here (corpus_sha256 in its row)"
    if "cuda" not in row.device.lower() and cpus_differ(recorded.get("cpu"), now["cpu"]):
        return f"it ran on a CPU {recorded['cpu']}, this is {now['cpu']}: float sums would differ"
    return None


def corpus_changed(recorded: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether a corpus file that a row's provenance records has other content now (or is gone). A file added
    to the folder since (``train_5k.jsonl``, 2026-12-07) changes nothing the row's run read; a row without a
    record is judged by its scores alone."""
    files, here = recorded.get("corpus_sha256") or {}, now.get("corpus_sha256") or {}
    return any(here.get(name) != digest for name, digest in files.items())


def reproduction_differences(row: Row, output_dir: Path) -> list[str]:
    """Where the run in ``output_dir`` differs from ``row``: steps, parameters, validation and test scores."""
    results = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    pairs = {
        "steps": (row.steps, results["train"].get("global_step")),
        "parameters": (row.parameters, results["model"]["parameters"]),
        "valid BLEU": (row.valid["bleu"], results["eval"].get("eval_bleu")),
        "test BLEU": (row.test["bleu"], results["test"]["bleu"]),
        "test chrF": (row.test["chrf"], results["test"]["chrf"]),
    }
    return [
        f"{name} {recorded} in the row, {found} now" for name, (recorded, found) in pairs.items() if recorded != found
    ]


def _what_changed(row: Row, now: dict[str, Any]) -> str:
    """Which of the row's provenance differs from ``now``, as a phrase (the first guess at a cause)."""
    recorded = row.provenance
    if not recorded:
        return "the row predates provenance records: code, packages, corpus and CPU then are unknown"
    # packages: those both records name (rows made before hf_graphtf, datasets and sacrebleu were recorded)
    packages = {name: version for name, version in now["packages"].items() if name in (recorded.get("packages") or {})}
    changed = [key for key in ("commit", "code_changed_from_commit") if recorded.get(key) != now[key]]
    changed += ["corpus_sha256"] if corpus_changed(recorded, now) else []
    changed += ["packages"] if recorded.get("packages") != packages else []
    changed += ["cpu"] if cpus_differ(recorded.get("cpu"), now["cpu"]) else []
    return f"changed since the run: {', '.join(changed)}" if changed else "same commit, packages and corpus"


def restore(grid: Grid, runs: list[Run], processes: int) -> int:
    """Archive every selected finished run that has no archive yet; returns how many could not be.

    From the run's output folder where it is on this machine, else from a rerun into that folder (an
    interrupted rerun resumes from its checkpoints). Either way the folder's results must match the
    row; a rerun that does not is moved to ``<output_root>/not_reproduced/`` and nothing is archived,
    so the report never pairs a row with translations of a different model."""
    rows = {row.run: row for row in grid.finished_rows()}
    failures = 0
    for run in runs:
        row, folder = rows.get(run.name), grid.archive_folder(run.name)
        if row is None or archive.is_archived(folder):
            continue
        if not archive.can_archive(run.output_dir):
            problem = rerun_problem(row, run, processes)
            if problem:
                print(f"  {run.name}: cannot rerun it to restore its archive: {problem}", flush=True)
                failures += 1
                continue
            print(f"  {run.name}: rerunning it to restore its archive", flush=True)
            if (code := _Running.start(run, processes).wait()) != 0:
                print(f"  {run.name}: rerun failed (exit {code}); see {run.output_dir / 'train.log'}", flush=True)
                failures += 1
                continue
        differences = reproduction_differences(row, run.output_dir)
        if differences:
            differences.append(_what_changed(row, provenance(_recipe_of(run)[1])))
            kept = grid.output_root / "not_reproduced" / run.name
            attempt = 1
            while kept.exists():  # an earlier rerun that did not reproduce either: keep both
                attempt += 1
                kept = kept.with_name(f"{run.name}-attempt{attempt}")
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(run.output_dir, kept)
            print(
                f"  {run.name}: does not reproduce its row ({'; '.join(differences)}); not archived, "
                f"the run is in {kept}",
                flush=True,
            )
            failures += 1
            continue
        archive.archive_run(run.output_dir, folder)
        print(f"  {run.name}: archived in {relative(folder)}", flush=True)
    return failures


def resumed_step(train: dict[str, Any]) -> int | None:
    """The step of the checkpoint a run's last training sitting resumed from (None: from the start).

    Read from the ``train`` record of the run's results.json, where the training script writes the
    checkpoint it handed to ``Trainer.train``: only the script knows which one it chose (an explicit
    ``resume_from_checkpoint``, the newest whole one, none after ``overwrite_output_dir``)."""
    from hf_graphtf.training.tooling import checkpoint_step

    checkpoint = train.get("resumed_from_checkpoint")
    return None if checkpoint is None else checkpoint_step(checkpoint)


@dataclass
class _Running:
    """One run's training process, started in the background with its log file open.

    The process is reaped with ``os.wait4`` so that its CPU time (its own and that of the processes it
    waited for: accelerate's workers) comes back with its exit status."""

    run: Run
    process: subprocess.Popen
    log: IO[str]
    started: float
    provenance: dict[str, Any]
    ended: float = 0.0
    cpu_seconds: float | None = None

    def poll(self) -> int | None:
        """The exit code once the process has ended (reaping it), else None."""
        if self.process.returncode is None:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid == 0:
                return None
            self.ended = time.monotonic()
            self.process.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_seconds = usage.ru_utime + usage.ru_stime
        return self.process.returncode

    @classmethod
    def start(cls, run: Run, processes: int) -> _Running:
        command = train_command(run, processes)
        _, corpus = _recipe_of(run)
        started_with = provenance(corpus)
        run.output_dir.mkdir(parents=True, exist_ok=True)
        log = open(run.output_dir / "train.log", "a", encoding="utf-8")  # noqa: SIM115 - closed by wait()
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        print(f"  {run.name}: started", flush=True)
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        return cls(run, process, log, time.monotonic(), started_with)

    def wait(self) -> int:
        while (code := self.poll()) is None:
            time.sleep(0.5)
        self.log.close()
        return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", help="grid YAML file")
    parser.add_argument("--variants", help="'core', 'all' (default) or a comma-separated list")
    parser.add_argument("--sizes", help="comma-separated sizes (default: all)")
    parser.add_argument("--seeds", help="comma-separated seeds (default: the grid's)")
    parser.add_argument(
        "--runs",
        help="comma-separated run names (as --dry-run lists them), run in this order; instead of --variants, "
        "--sizes and --seeds",
    )
    parser.add_argument("--processes", type=int, default=1, help="data-parallel processes per run (accelerate)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time (several small runs can share one GPU; on a CPU, jobs x processes x threads "
        "should not exceed the cores)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their state, run nothing")
    parser.add_argument(
        "--restore",
        action="store_true",
        help="archive finished runs that have no archive (from their output folders, else by rerunning them "
        "and checking they reproduce their rows); starts no new run",
    )
    parser.add_argument(
        "--allow-other-precision",
        action="store_true",
        help="start runs that would train in a precision none of their size's finished runs trained in "
        "(precision auto follows the host); without it the runner refuses them before anything starts",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.processes < 1:
        parser.error("--jobs and --processes must be at least 1")
    if args.runs and (args.variants or args.sizes or args.seeds):
        parser.error("--runs names the runs itself: leave out --variants, --sizes and --seeds")
    grid = Grid.load(args.grid)

    def selected() -> list[Run]:
        return grid.named_runs(args.runs) if args.runs else grid.runs(args.variants, args.sizes, args.seeds)

    try:
        runs = selected()
    except ValueError as error:
        parser.error(str(error))
    if not args.dry_run and (missing := missing_corpora(grid, runs)):
        for problem in missing:
            print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2
    if not (args.dry_run or args.restore or args.allow_other_precision) and (
        conflicts := precision_conflicts(grid, runs)
    ):
        for problem in conflicts:
            print(f"error: {problem}", file=sys.stderr, flush=True)
        return 2
    if args.restore and not args.dry_run:
        run_grid(grid, runs, args.processes, dry_run=True)  # the runs' states, before anything happens
        return 1 if restore(grid, runs, args.processes) else 0
    while True:
        if not run_grid(grid, runs, args.processes, args.dry_run, args.jobs):
            return 1
        runs = selected()
        done = {row.run for row in grid.finished_rows()}
        if args.dry_run or all(run.name in done or run.waits_for_tuning for run in runs):
            return 0
        # every run of the last pass finished, so the runs left are new ones: a tuning range grown at
        # its edge, or the runs that waited for the tuned value
        print("Tuning: " + _tuning_state(grid), flush=True)


def missing_corpora(grid: Grid, runs: list[Run]) -> list[str]:
    """The local corpora that the unfinished ``runs`` name and that are not here, each as the training
    script would say it (with the command that builds the Bible corpus).

    Checked before anything starts: otherwise the first run's processes start, fail inside, and the
    runner can only point at that run's log."""
    done = {row.run for row in grid.finished_rows()}
    problems: dict[str, None] = {}
    for run in runs:
        if run.name not in done and (problem := _missing_corpus(run)):
            problems[str(problem)] = None
    return list(problems)


def host_precision(recipe: dict[str, Any]) -> str:
    """The precision a run of ``recipe`` trains in on this machine, resolved as the training script resolves
    it (`resolve_precision`; unset, the bf16/fp16 flags): ``auto`` follows the host."""
    from hf_graphtf.training.tooling import resolve_precision

    requested = recipe.get("precision")
    if requested is None:
        return "bf16" if recipe.get("bf16") else "fp16" if recipe.get("fp16") else "fp32"
    import torch

    return resolve_precision(str(requested), use_cpu=bool(recipe.get("use_cpu")) or not torch.cuda.is_available())


def precision_conflicts(grid: Grid, runs: list[Run]) -> list[str]:
    """The unfinished ``runs`` that would train here in a precision none of their size's compared runs
    trained in (the rows of `Grid.rows_by_cell` that record one), each with what it would take and what
    the others took.

    ``precision: auto`` follows the host, so a grid that moves part-way to a host without bf16
    instructions would train its next seed in fp32 beside bf16 seeds: different rounding sends two runs
    apart as a change of seed does, and that seed's Δ would pair a run with a vanilla run of another
    precision. Checked before anything starts; the row would record it, but only after hours of training."""
    done = {row.run for row in grid.finished_rows()}
    trained: dict[str, set[str]] = {}
    for (_, size), rows in grid.rows_by_cell().items():
        trained.setdefault(size, set()).update(row.precision for row in rows if row.precision)
    problems = []
    for run in runs:
        others = trained.get(run.size)
        if run.name in done or run.waits_for_tuning or not others:
            continue
        recipe = run.recipe_fields()
        precision = host_precision(recipe)
        if precision in others:
            continue
        requested = recipe.get("precision")
        why = "precision auto on this host" if requested == "auto" else "as its recipe and the grid set it"
        problems.append(
            f"{run.name} would train in {precision} here ({why}), but the grid's finished {run.size} runs trained "
            f"in {' and '.join(sorted(others))}: another rounding moves a run as a change of seed does. Run it "
            "on a host where it trains as they did, or pass --allow-other-precision (its row records the "
            "precision, and the page names runs that trained differently)."
        )
    return problems


def _missing_corpus(run: Run) -> Exception | None:
    """The error the training script would raise for the run's local corpus not being here, else None
    (a Hub corpus, or none named: the training script says what is wrong)."""
    from hf_graphtf.data import missing_local_corpus

    recipe = run.recipe_fields()
    if recipe.get("corpus") is None:
        return None
    src_lang, tgt_lang = languages(recipe)
    return missing_local_corpus(recipe["corpus"], src_lang=src_lang, tgt_lang=tgt_lang, root=REPO_ROOT)


def _tuning_state(grid: Grid) -> str:
    """``dropout 0.2 at 10k`` for every size whose tuning has finished, and the values tried so far for
    one whose range grew."""
    states = []
    for size in grid.sizes:
        tuned = grid.tuned_value(size)
        if tuned is not None:
            notes = grid.tuned_notes(size)
            states.append(f"{grid.tuning.field} {tuned} at {size}" + (f" ({'; '.join(notes)})" if notes else ""))
        else:
            tried = ", ".join(str(value) for value in grid.tuning_values(size))
            states.append(f"{size}: the best {grid.tuning.field} lay at the edge of the range, which grows to {tried}")
    return "; ".join(states)


if __name__ == "__main__":
    sys.exit(main())
