"""A new user's mistakes each get one line, not a traceback: a model folder without its tokenizer, a CUDA device
that this torch or machine lacks, and Ctrl-C during a long translation (exit 130, with how to resume)."""

from __future__ import annotations

import shutil

import pytest
import torch
from recipe_fixtures import trained_tiny_model

from hf_graphtf import cli
from hf_graphtf.file_translation import CHUNK_BATCHES


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return trained_tiny_model(tmp_path_factory)


def _error_lines(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_a_model_folder_without_its_tokenizer_is_named_in_one_line(trained, tmp_path, capsys):
    folder = tmp_path / "model"
    shutil.copytree(trained.output_dir, folder, ignore=shutil.ignore_patterns("checkpoint-*", "tokenizer*"))
    (tmp_path / "in.txt").write_text("El rey dijo pan.\n", encoding="utf-8")
    for argv in (
        ["translate", "--model", str(folder), "--input", str(tmp_path / "in.txt")],
        [
            "evaluate",
            "--model",
            str(folder),
            "--source",
            str(tmp_path / "in.txt"),
            "--references",
            str(tmp_path / "in.txt"),
        ],
    ):
        assert cli.main(argv) == 2
        (line,) = _error_lines(capsys)
        assert "no tokenizer files" in line and "sentencepiece" not in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: --device cuda is no mistake here")
@pytest.mark.parametrize(
    "argv",
    [
        ["translate", "--device", "cuda"],
        ["evaluate", "--device", "cuda"],
        ["evaluate", "--device", "cuda", "--dtype", "int8"],
        ["check", "--device", "cuda"],
        ["check", "--device", "cuda:1"],
    ],
    ids=["translate", "evaluate", "evaluate int8", "check", "check cuda:1"],
)
def test_a_cuda_device_this_torch_lacks_is_refused_in_one_line(trained, tmp_path, capsys, argv):
    (tmp_path / "in.txt").write_text("El rey dijo pan.\n", encoding="utf-8")
    if argv[0] == "translate":
        argv = [*argv, "--model", str(trained.output_dir), "--input", str(tmp_path / "in.txt")]
    elif argv[0] == "evaluate":
        argv = [*argv, "--model", str(trained.output_dir), "--source", str(tmp_path / "in.txt")]
        argv += ["--references", str(tmp_path / "in.txt")]
    assert cli.main(argv) == 2
    (line,) = _error_lines(capsys)
    assert f"--device {argv[2]}" in line and ("CPU build" in line or "sees no GPU" in line)


def test_ctrl_c_during_a_file_translation_ends_in_one_line_saying_how_to_resume(trained, tmp_path, capsys, monkeypatch):
    """The first chunk is written, Ctrl-C lands in the second: exit 130, one line, and the same command then
    finishes the file from where it stopped."""
    lines = [f"El rey dijo pan {index}." for index in range(3 * CHUNK_BATCHES)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.txt"
    argv = ["translate", "--model", str(trained.output_dir), "--input", str(tmp_path / "in.txt"), "--output"]
    argv += [str(output), "--batch-size", "1", "--max-new-tokens", "3", "--quiet", "--dtype", "fp32"]
    real = cli._translate_with
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "_translate_with", interrupted)
    assert cli.main(argv) == cli.INTERRUPTED_EXIT
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (said,) = [line for line in err.splitlines() if "interrupted" in line]
    assert (
        said
        == f"hf-graphtf: interrupted: {output} keeps every line translated so far; the same command resumes from there"
    )
    monkeypatch.setattr(cli, "_translate_with", real)
    assert cli.main(argv) == 0
    assert f"resuming {output}: {CHUNK_BATCHES:,} of {len(lines):,} lines" in capsys.readouterr().err
    assert len(output.read_text(encoding="utf-8").splitlines()) == len(lines)
