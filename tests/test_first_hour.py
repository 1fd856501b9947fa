"""A new user's mistakes each get one line, not a traceback: a model folder without its tokenizer, a CUDA device
that this torch or machine lacks, and Ctrl-C during a long translation (exit 130, with how to resume)."""

from __future__ import annotations

import shutil

import pytest
import torch
from recipe_fixtures import trained_tiny_model

from hf_graphtf import cli
from hf_graphtf.translation.file_translation import CHUNK_BATCHES


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


def test_a_hub_id_with_no_hub_in_reach_is_refused_in_one_line_naming_the_offline_switch(tmp_path, capsys, monkeypatch):
    """Without a network (the Hub's address refuses here) and not in the cache: one line within seconds that names
    HF_HUB_OFFLINE=1, where huggingface_hub retried for about 46 s; under HF_HUB_OFFLINE nothing is probed."""
    import time

    from huggingface_hub import constants

    from hf_graphtf import model_files

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "in.txt").write_text("Hola.\n", encoding="utf-8")
    started = time.monotonic()
    assert cli.main(["translate", "--model", "Helsinki-NLP/opus-mt-es-en", "--input", str(tmp_path / "in.txt")]) == 2
    assert time.monotonic() - started < 10
    (line,) = _error_lines(capsys)
    assert "cannot be reached" in line and "HF_HUB_OFFLINE=1" in line
    # a cached id loads as before, its line once however often a command checks it, the Hub probed once
    import huggingface_hub

    probes = []
    monkeypatch.setattr(model_files, "_probed", {})
    monkeypatch.setattr(model_files, "_said_cached", set())
    monkeypatch.setattr(model_files, "_reachable", lambda host, port: probes.append(host) or False)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda name, file: "/cache/config.json")
    for _ in range(2):
        model_files.check_hub_reachable("Helsinki-NLP/opus-mt-es-en")
    said = [line for line in capsys.readouterr().err.splitlines() if "using its copy" in line]
    assert len(said) == 1 and "HF_HUB_OFFLINE=1" in said[0] and probes == ["127.0.0.1"]
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(model_files, "_reachable", lambda host, port: pytest.fail("probed the Hub while offline"))
    model_files.check_hub_reachable("Helsinki-NLP/opus-mt-es-en")


def test_the_main_job_in_your_own_virtualenv_keeps_what_it_holds(tmp_path):
    """Run inside an active virtualenv that already holds newer releases within the declared ranges, the main
    job installs the package without the pinned set (which downgraded Transformers 5.25 to 5.23) and keeps its
    torch, and says so before pip runs. A stand-in ``python`` records what pip is asked; the job stops at the
    corpus step (a stand-in ``hf-graphtf`` that fails)."""
    import os
    import subprocess

    from recipe_fixtures import REPO_ROOT

    if subprocess.run(["dpkg-query", "-W", "sword-text-kjv"], capture_output=True).returncode != 0:
        pytest.skip("the SWORD packages are not installed: the job would install them with apt first")
    bin_dir, log = tmp_path / "venv" / "bin", tmp_path / "pip.log"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-m" ]; then echo "$@" >> {log}; exit 0; fi\n'
        'case "$2" in *__version__*) echo 2.14.1;; esac\n'
        "exit 0\n",
        encoding="utf-8",
    )
    (bin_dir / "hf-graphtf").write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    env = {**os.environ, "VIRTUAL_ENV": str(tmp_path / "venv"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    job = subprocess.run(
        ["bash", str(REPO_ROOT / "recipes" / "run_main_job.sh")], env=env, capture_output=True, text=True
    )
    assert job.returncode == 3, job.stderr  # stopped at the corpus step, after the environment's
    asked = log.read_text(encoding="utf-8").splitlines()
    assert asked and all("constraints.txt" not in line and "torch==" not in line for line in asked), asked
    assert "torch 2.14.1 is installed: kept" in job.stdout and "nothing it has is changed" in job.stdout


def test_train_without_a_recipe_asks_for_one(capsys):
    """``hf-graphtf train`` alone said ``DataArguments.corpus is required``, and ``train --help`` showed
    ``usage: hf-graphtf [-h]``."""
    assert cli.main(["train"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("a recipe is needed. usage: hf-graphtf train RECIPE.yaml") and "corpus" not in err
    assert cli.main(["train", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: hf-graphtf train RECIPE.yaml [--field value ...]")


def test_evaluate_scores_translations_without_their_sources(tmp_path, capsys):
    """Scoring existing translations needs only the references (BLEU by source length needs the sources, and
    says so); translating still needs --source or --corpus."""
    (tmp_path / "h.txt").write_text("the king said bread\nthe man saw the land\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("the king said bread\nthe man saw the water\n", encoding="utf-8")
    assert cli.main(["evaluate", "--hypotheses", str(tmp_path / "h.txt"), "--references", str(tmp_path / "r.txt")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("BLEU ") and "(2 sentences" in out and "no --source or --corpus given" in out
    (tmp_path / "short.txt").write_text("one line\n", encoding="utf-8")
    argv = ["evaluate", "--hypotheses", str(tmp_path / "h.txt"), "--references", str(tmp_path / "short.txt")]
    assert cli.main(argv) == 2 and "has 1 lines but there are 2 hypotheses" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--hypotheses", str(tmp_path / "h.txt")])
    assert "needs --source or --corpus" in capsys.readouterr().err
