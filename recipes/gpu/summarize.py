"""The results page's tables from the logs of one GPU call (`run_all.sh`), and where the GPU targets land.

    python recipes/gpu/summarize.py recipes/gpu/results/h200-2026-12-04

Reads the logs the command left (the sweep, the per-device choices, translation, the decode profiles,
compiled training), whichever steps ran, and prints Markdown: the sweep's ratios at each token budget; the
kernels where the link's GPU time differs most from vanilla's at the middle budget; the choices behind
`attention_link_kernel="auto"`, `saved_joins` and `graph_attention.FUSED_PATH_MEASURED`; each decode profile
(kernel time against wall time); and each target of the GPU issue with the figure it is judged on. The
thresholds are the benchmark scripts' own (`train_throughput.AL_SPEED`, ...), so the page never restates one.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from benchmark_page import table  # noqa: E402
from train_throughput import AL_MEMORY, AL_SPEED, BOUND_SHARE  # noqa: E402

#: compiled linked decoding against eager vanilla, and the link against vanilla in the same mode (issue 109)
COMPILED_DECODING, LINK_DECODING = 2.0, 0.95
#: the middle budget of the sweep, where the choices are measured
MIDDLE_TOKENS = 16384


@dataclass
class Block:
    """One table a benchmark script printed: its settings (the ``- key: value`` lines) and its rows by column."""

    title: str
    settings: dict[str, str] = field(default_factory=dict)
    rows: list[dict[str, str]] = field(default_factory=list)
    extra: list[tuple[str, list[list[str]]]] = field(default_factory=list)  # captioned tables after the main one


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def read_blocks(log: Path) -> list[Block]:
    """Every ``## title`` block of a log, with its settings, its first table and the captioned tables after."""
    blocks: list[Block] = []
    caption, header = "", None
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            blocks.append(Block(line[3:].strip()))
            header = None
        elif not blocks:
            continue
        elif line.startswith("- ") and ": " in line and not blocks[-1].rows:
            key, value = line[2:].split(": ", 1)
            blocks[-1].settings[key] = value
        elif line.startswith("|"):
            cells = _cells(line)
            if header is None:
                header = cells
                if blocks[-1].rows:
                    blocks[-1].extra.append((caption, []))
            elif set("".join(cells)) <= set("-: "):
                continue
            elif blocks[-1].extra:
                blocks[-1].extra[-1][1].append(cells)
            else:
                blocks[-1].rows.append(dict(zip(header, cells)))
        elif line.strip():
            caption, header = line.strip(), None
    return blocks


def ratio_of(text: str) -> float:
    """The leading number of a ratio cell such as ``0.83x ±0.01`` or ``6001 MiB (1.00x)``."""
    found = re.findall(r"([0-9.]+)x", text)
    return float(found[-1] if "(" in text else found[0])


def tokens_of(block: Block) -> int:
    return int(block.rows[0]["target tokens/step"].replace(",", ""))


def middle(blocks: list[Block]) -> Block:
    """The block nearest the middle budget."""
    return min(blocks, key=lambda block: abs(tokens_of(block) - MIDDLE_TOKENS))


def sweep_table(blocks: list[Block]) -> str:
    columns = ["target tokens/step", "variant", "speed ratio", "of FLOP bound", "peak memory", "ops/step", "GPU busy"]
    rows = [
        [
            row["target tokens/step"],
            row["variant"],
            row["speed ratio"],
            row["of bound"],
            row["peak memory (ratio)"],
            row.get("ops/step (ratio)", "-"),
            row.get("GPU busy vanilla / variant", "-"),
        ]
        for block in blocks
        for row in block.rows
    ]
    return table(columns, rows)


def kernel_table(block: Block, variant: str, top: int = 8) -> str:
    for caption, rows in block.extra:
        if f"where {variant} differs" in caption:
            kept = [[cells[0][:70], *cells[1:]] for cells in rows[:top]]
            return table(["kernel", "vanilla ms", f"{variant} ms", "difference ms", "of the variant's step"], kept)
    return f"(no kernel table for {variant})"


def choices_table(results: Path, sweep: list[Block]) -> str:
    """Each configuration measured at the middle budget, the default first."""
    rows = []
    default = middle(sweep)
    for row in default.rows:
        rows.append(["default (sweep)", row["variant"], row["speed ratio"], row["peak memory (ratio)"]])
    for name, label in (
        ("choice_link_scores", "link kernel scores"),
        ("choice_link_joins", "link keeps its joins"),
        ("choice_graph_fused", "graph path fused"),
        ("choice_graph_modules", "graph path per module"),
    ):
        log = results / f"{name}.log"
        if log.exists():
            for block in read_blocks(log):
                for row in block.rows:
                    rows.append([label, row["variant"], row["speed ratio"], row["peak memory (ratio)"]])
    return table(["configuration", "variant", "speed ratio", "peak memory"], rows)


def translation_ratios(results: Path) -> dict[tuple[str, str], float]:
    """(search, system) -> target tokens/s of the translation benchmark's table."""
    speeds = {}
    for block in read_blocks(results / "translation.log"):
        for row in block.rows:
            speeds[(row["search"], row["system"])] = float(row["target tokens/s"].replace(",", ""))
    return speeds


def decode_tables(results: Path) -> list[tuple[str, str]]:
    """(caption, table) of each `decode_profile.py` log: its settings line, and its rows as printed."""
    tables = []
    for log in sorted(results.glob("decode*.log")):
        lines = log.read_text(encoding="utf-8").splitlines()
        settings = next((line for line in lines if line.startswith("torch ")), "")
        header = next((i for i, line in enumerate(lines) if line.startswith("search | system")), None)
        if header is None:
            continue
        rows = [_cells(line) for line in lines[header + 1 :] if line.count(" | ") >= 8]
        tables.append((f"`{results.name}/{log.name}` ({settings})", table(_cells(lines[header]), rows)))
    return tables


def targets_table(sweep: list[Block] | None, results: Path) -> str:
    """Each target of the GPU issue this call measured: training from the sweep, decoding from translation."""
    rows = []
    if sweep:
        at = middle(sweep)
        link = next(row for row in at.rows if row["variant"].startswith("al-"))
        speed, memory = ratio_of(link["speed ratio"]), ratio_of(link["peak memory (ratio)"])
        rows.append([f"link training, {link['target tokens/step']} tokens", f">= {AL_SPEED}x vanilla",
                     f"{speed:.2f}x", "met" if speed >= AL_SPEED else "missed"])  # fmt: skip
        rows.append(["link training memory", f"<= {AL_MEMORY}x vanilla", f"{memory:.2f}x",
                     "met" if memory <= AL_MEMORY else "missed"])  # fmt: skip
        for row in at.rows:
            if row["variant"].startswith("graph-"):
                share = float(row["of bound"].rstrip("%")) / 100
                rows.append([f"{row['variant']} training", f">= {BOUND_SHARE:.0%} of its FLOP bound",
                             f"{share:.0%}", "met" if share >= BOUND_SHARE else "missed"])  # fmt: skip
    if (results / "translation.log").exists():
        speeds = translation_ratios(results)
        for search in sorted({search for search, _ in speeds}):
            systems = {system: value for (s, system), value in speeds.items() if s == search}
            vanilla = next(value for system, value in systems.items() if system.endswith("MarianMTModel bf16"))
            compiled = next((value for system, value in systems.items() if system.startswith("linked") and
                             system.endswith("compiled")), None)  # fmt: skip
            compiled_vanilla = next((value for system, value in systems.items() if system.startswith("Transformers")
                                     and system.endswith("compiled")), None)  # fmt: skip
            linked = next(value for system, value in systems.items() if system.startswith("linked") and
                          system.endswith("bf16"))  # fmt: skip
            if compiled is not None:
                rows.append([f"compiled linked decoding, {search}", f">= {COMPILED_DECODING}x eager vanilla bf16",
                             f"{compiled / vanilla:.2f}x",
                             "met" if compiled / vanilla >= COMPILED_DECODING else "missed"])  # fmt: skip
            if compiled is not None and compiled_vanilla is not None:
                share = compiled / compiled_vanilla
                rows.append([f"link decoding, compiled, {search}", f">= {LINK_DECODING}x vanilla, same mode",
                             f"{share:.2f}x", "met" if share >= LINK_DECODING else "missed"])  # fmt: skip
            share = linked / vanilla
            rows.append([f"link decoding, eager bf16, {search}", f">= {LINK_DECODING}x vanilla, same mode",
                         f"{share:.2f}x", "met" if share >= LINK_DECODING else "missed"])  # fmt: skip
    return table(["target", "threshold", "measured", "status"], rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a folder of the logs one call of run_all.sh brought back")
    args = parser.parse_args(argv)
    sweep = read_blocks(args.results / "sweep_train.log") if (args.results / "sweep_train.log").exists() else None
    if sweep:
        link = next(row["variant"] for row in sweep[0].rows if row["variant"].startswith("al-"))
        print(f"**Token-budget sweep** (`{args.results.name}/sweep_train.log`):\n")
        print(sweep_table(sweep))
        print(f"\n**Where {link}'s GPU time differs from vanilla's** at "
              f"{middle(sweep).rows[0]['target tokens/step']} target tokens a step (one profiled step):\n")  # fmt: skip
        print(kernel_table(middle(sweep), link))
        print("\n**The per-device choices**, at the same budget:\n")
        print(choices_table(args.results, sweep))
    for caption, rendered in decode_tables(args.results):
        print(f"\n**Where a generate call waits**, {caption}:\n")
        print(rendered)
    if sweep or (args.results / "translation.log").exists():
        print("\n**The targets:**\n")
        print(targets_table(sweep, args.results))


if __name__ == "__main__":
    main()
