"""The prepared GPU command (recipes/gpu/run_all.sh) rehearsed on the CPU with ``--dry-run``.

A GPU lease is 15 minutes of device time in all, so the command must work the first time: the rehearsal runs
the same steps on tiny shapes and checks that each one finished and left its log in the tarball that comes
back. No test needs a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ROOT / "recipes" / "gpu" / "run_all.sh"


def rehearse(tmp_path: Path, steps: str | None = None, budget: int | None = None) -> tuple[str, dict[str, str]]:
    """Run the command with ``--dry-run`` into `tmp_path`; its status lines and the logs in its tarball."""
    argv = ["bash", str(COMMAND), "--dry-run", *([f"--steps={steps}"] if steps else [])]
    argv += [f"--budget={budget}"] if budget is not None else []
    # the command calls python3: this interpreter's, as on the GPU machine the image's
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "OUT": str(tmp_path), "OMP_NUM_THREADS": "1", "PATH": path}
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3000, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gpu_results.tar.gz", "machine.txt", "status.txt"]
    with tarfile.open(tmp_path / "gpu_results.tar.gz") as archive:
        logs = {
            Path(member.name).stem: archive.extractfile(member).read().decode()
            for member in archive.getmembers()
            if member.name.endswith(".log")
        }
    return (tmp_path / "status.txt").read_text(encoding="utf-8"), logs


def test_the_backends_step_prints_a_row_per_attention_shape(tmp_path):
    status, logs = rehearse(tmp_path, "backends")
    assert "sdpa_backends exit 0" in status
    rows = [line for line in logs["sdpa_backends"].splitlines() if line.startswith("| ")]
    assert len(rows) == 5 and "cuDNN" in logs["sdpa_backends"]  # header + 4 shapes


@pytest.mark.slow
def test_the_whole_gpu_command_rehearses_on_the_cpu(tmp_path):
    """Every default step exits 0 and says what the GPU call will measure (about 6 minutes on 2 cores)."""
    status, logs = rehearse(tmp_path)
    steps = ("sdpa_backends", "check_float32", "link_kernels", "sweep_train", "translation", "compiled_train")
    for step in (*steps, "choice_link_scores", "choice_link_joins", "choice_graph_modules", "choice_graph_fused"):
        assert f"{step} exit 0" in status, status
    assert logs["sweep_train"].count("target tokens/step") == 3  # one table per token budget
    assert "link kernel scores" in logs["choice_link_scores"] and "graph path modules" in logs["choice_graph_modules"]
    assert "link saves joins" in logs["choice_link_joins"]
    assert "ops/step (ratio)" in logs["sweep_train"]
    assert "compiled" in logs["translation"] and "regional torch.compile" in logs["compiled_train"]


def test_a_step_past_the_budget_is_skipped_and_says_so_and_the_results_still_come_back(tmp_path):
    """On the GPU the command keeps inside the device call's limit: with no budget left every step is skipped
    with a status line, and the tarball, status and machine files are still written."""
    status, logs = rehearse(tmp_path, "backends,correctness", budget=0)
    assert status.count("skipped") == 3, status  # sdpa_backends, check_float32, link_kernels
    assert logs == {}


def test_the_summary_reads_a_calls_logs_and_judges_each_target_by_the_scripts_thresholds(monkeypatch, capsys):
    """The results page's GPU tables come from `recipes/gpu/summarize.py` over the logs a call brought back;
    a log format the summary no longer reads, or a threshold it restates wrongly, fails here."""
    monkeypatch.syspath_prepend(str(ROOT / "recipes" / "gpu"))
    import summarize

    summarize.main([str(ROOT / "recipes" / "gpu" / "results" / "h200-2026-12-04")])
    out = capsys.readouterr().out
    assert out.count("| 16,174 ") >= 2 and "| 32,537 " in out  # the sweep's budgets
    assert "CatArrayBatchedCopy" in out  # the link's joins among its kernels
    assert "| graph path per module | graph-half+gate   | 0.80x" in out
    targets = out.split("**The targets:**")[1]
    assert "| link training, 16,174 tokens " in targets and "| 0.83x " in targets and "missed" in targets
    assert ">= 0.97x vanilla" in targets and ">= 90% of its FLOP bound" in targets


def test_the_summary_reads_a_call_without_a_sweep_and_its_decode_profiles(monkeypatch, capsys):
    """A call of ``--steps=translation,decode`` has no sweep: the summary prints its decode profiles and the
    decoding targets, the link against vanilla in the same compiled mode among them."""
    monkeypatch.syspath_prepend(str(ROOT / "recipes" / "gpu"))
    import summarize

    summarize.main([str(ROOT / "recipes" / "gpu" / "results" / "h200-2026-12-04-fourth")])
    out = capsys.readouterr().out
    assert "Token-budget sweep" not in out and out.count("**Where a generate call waits**") == 2
    assert "| beam 4 | Transformers MarianMTModel bf16, compiled   | 298.6 " in out
    targets = out.split("**The targets:**")[1]
    assert "| link decoding, compiled, beam 4 " in targets and "| 0.90x " in targets
    assert "link training" not in targets


@pytest.mark.slow
def test_the_decode_step_rehearses_on_the_cpu(tmp_path):
    """The decode profiles print one row per search and system at both batch sizes, in float32 the tokens of
    eager decoding (about 3 minutes)."""
    status, logs = rehearse(tmp_path, "decode")
    assert "decode_profile exit 0" in status and "decode_profile_batch256 exit 0" in status, status
    for log in ("decode_profile", "decode_profile_batch256"):
        rows = [line for line in logs[log].splitlines() if line.count(" | ") >= 8 and not line.startswith("search |")]
        # {beam 4, greedy} x {vanilla, linked} x {eager, compiled, cuda-graphs}, each against eager's tokens
        assert len(rows) == 12 and all(row.endswith(("the same", "(the reference)")) for row in rows), logs[log][-2000:]
