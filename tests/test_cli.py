"""The hf-graphtf command: translate, evaluate, gates, build-corpus, train."""

from __future__ import annotations

import io
import json

import pytest
import sacrebleu
import torch
from recipe_fixtures import one_thread, run_python, trained_tiny_model  # noqa: F401  (autouse fixture)

from hf_graphtf import cli
from hf_graphtf.translation import file_translation


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return trained_tiny_model(tmp_path_factory)


def _test_pairs(run):
    records = [json.loads(line) for line in (run.corpus / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    sources = [r["translation"]["es"] for r in records]
    references = [r["references"]["en"] for r in records]
    return sources, references


def test_translate_reads_stdin_and_keeps_line_order(trained):
    """The real console entry point in a child process: one output line per input line, blank stays blank."""
    lines = ["El rey dijo pan.", "", "El hombre y la mujer vieron la tierra grande y el agua."]
    result = run_python(
        "-m",
        "hf_graphtf.cli",
        "translate",
        "--model",
        str(trained.output_dir),
        "--beam-size",
        "2",
        "--max-new-tokens",
        "6",
        "--batch-size",
        "2",
        stdin="\n".join(lines) + "\n",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = result.stdout.split("\n")[:-1]
    assert len(outputs) == 3 and outputs[1] == ""
    assert "Translating" not in result.stderr and "Loading weights" not in result.stderr  # no bars off a terminal
    assert "seem to have been set" not in result.stderr  # no "Both max_new_tokens and max_length" warning per batch

    tokenizer, model = cli.load_model(str(trained.output_dir), "cpu")
    for line, output in zip(lines[::2], outputs[::2]):
        batch = tokenizer([line], return_tensors="pt")
        expected = tokenizer.decode(model.generate(**batch, num_beams=2, max_new_tokens=6)[0], skip_special_tokens=True)
        assert output == expected.strip()


def test_evaluate_a_model_against_two_reference_files(trained, tmp_path, capsys):
    sources, references = _test_pairs(trained)
    (tmp_path / "test.es").write_text("\n".join(sources) + "\n", encoding="utf-8")
    for k in range(2):
        (tmp_path / f"ref{k}.en").write_text("\n".join(refs[k] for refs in references) + "\n", encoding="utf-8")
    report_path = tmp_path / "report.json"
    argv = ["evaluate", "--model", str(trained.output_dir), "--source", str(tmp_path / "test.es")]
    argv += ["--references", str(tmp_path / "ref0.en"), str(tmp_path / "ref1.en"), "--length-buckets", "5", "10"]
    argv += ["--json", str(report_path), "--save-translations", str(tmp_path / "hyp.en"), "--quiet"]
    assert cli.main(argv) == 0
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["references_per_sentence"] == 2 and report["sentences"] == len(sources)
    assert list(report["bleu_by_length"]) == ["1-5", "6-10", "11+"]
    hypotheses = (tmp_path / "hyp.en").read_text(encoding="utf-8").splitlines()
    streams = [[refs[k] for refs in references] for k in range(2)]
    assert report["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, streams).score, 2)
    assert "BLEU by source length" in capsys.readouterr().out


def test_evaluate_a_corpus_split_uses_all_its_references(trained, tmp_path, capsys):
    sources, references = _test_pairs(trained)
    hypotheses = [refs[1] for refs in references]  # the second reference, scored against both
    (tmp_path / "hyp.en").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    argv = ["evaluate", "--hypotheses", str(tmp_path / "hyp.en"), "--corpus", str(trained.corpus), "--json", "-"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["bleu"] == 100.0 and report["references_per_sentence"] == 2
    assert cli.main([*argv, "--single-reference"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] < 100.0


def test_evaluate_refuses_misaligned_references(trained, tmp_path):
    (tmp_path / "src").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "ref").write_text("a\n", encoding="utf-8")
    (tmp_path / "hyp").write_text("a\nb\n", encoding="utf-8")
    argv = ["evaluate", "--hypotheses", str(tmp_path / "hyp"), "--source", str(tmp_path / "src")]
    assert cli.main([*argv, "--references", str(tmp_path / "ref")]) == 2
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--source", str(tmp_path / "src")])  # neither --model nor --hypotheses


@pytest.mark.parametrize("fusion", ["gate", "self_gate"])
def test_gates_reports_per_layer_and_length_bucket(tmp_path, monkeypatch, capsys, tiny_tokenizer, fusion):
    from model_matrix import tiny_model

    model = tiny_model("marian", {"graph_attention": True, "graph_fusion": fusion}, dtype=torch.float32)
    model.save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")

    monkeypatch.setattr("sys.stdin", io.StringIO("w3 w4\nw3 w4 w5 w3 w4 w5 w3 w4\n\nw5\n"))
    assert cli.main(["gates", "--model", str(tmp_path / "model"), "--length-buckets", "2", "--quiet"]) == 0
    profile = json.loads(capsys.readouterr().out)
    assert profile["fusion"] == fusion
    # keyed by the index in model.model.encoder.layers: graph attention is in layers 1 and 2 of 3
    assert list(profile["layers"]) == ["1", "2"] and profile["layer_index"].startswith("i in model.model.encoder")
    layer = profile["layers"]["1"]
    assert layer["1-2"]["sentences"] == 2 and layer["3+"]["sentences"] == 1
    if fusion == "gate":
        assert 0.0 < layer["1-2"]["w"] < 1.0
    else:
        weights = [layer["3+"][g] for g in ("high", "middle_inc", "middle_prev", "low")]
        assert sum(weights) == pytest.approx(1.0, abs=1e-3)


def test_the_command_line_does_not_load_datasets_before_it_is_needed():
    """`hf-graphtf translate` pays for torch and Transformers, not for `datasets` too: the corpus loader
    and the Bible pairs ``build-corpus`` offers are imported apart (`hf_graphtf.data.bible_pairs`)."""
    done = run_python("-c", "import sys, hf_graphtf.cli; print(sorted({m.split('.')[0] for m in sys.modules}))")
    assert done.returncode == 0, done.stderr
    assert "'datasets'" not in done.stdout and "'hf_graphtf'" in done.stdout


@pytest.mark.parametrize("pair", [[], ["--pair", "es-en"], ["--pair", "ny-en"]])
def test_build_corpus_calls_the_builder_of_its_pair(pair, tmp_path, monkeypatch, capsys):
    import importlib

    from hf_graphtf.data.bible_pairs import BIBLE_BUILDERS, DEFAULT_BIBLE_PAIR

    calls = []

    def fake_builder(output_dir, *, force=False, books=None, progress=True):
        calls.append((output_dir, force, books, progress))
        return {"splits": {"train": {"pairs": 3}}}

    for module, function in BIBLE_BUILDERS.values():
        monkeypatch.setattr(importlib.import_module(module), function, lambda *a, **k: pytest.fail("another pair"))
    module, function = BIBLE_BUILDERS[pair[1] if pair else DEFAULT_BIBLE_PAIR]
    monkeypatch.setattr(importlib.import_module(module), function, fake_builder)
    assert cli.main(["build-corpus", *pair, "--output-dir", str(tmp_path), "--force", "--books", "Ruth"]) == 0
    assert calls == [(str(tmp_path), True, ["Ruth"], False)]  # no progress bar off a terminal
    assert json.loads(capsys.readouterr().out)["splits"]["train"]["pairs"] == 3


def test_train_hands_its_arguments_to_the_recipe_parser(monkeypatch):
    import hf_graphtf.training

    seen = []
    monkeypatch.setattr(hf_graphtf.training, "main", lambda argv: seen.append(list(argv)))
    assert cli.main(["train", "recipe.yaml", "--max_steps", "3"]) == 0
    assert seen == [["recipe.yaml", "--max_steps", "3"]]


def test_threads_dtype_and_attention_flags(trained, tmp_path, monkeypatch):
    import torch

    seen = {}
    real_load = cli.load_model

    def spy(name, device=None, dtype="fp32", attn_implementation=None, compile="off", engine="auto", **options):
        tokenizer, model = real_load(
            name, device, dtype, attn_implementation, compile=compile, engine=engine, **options
        )
        seen.update(threads=torch.get_num_threads(), dtype=model.dtype, attn=model.config._attn_implementation)
        seen["compiled"] = model.decoding_setup.compiled
        return tokenizer, model

    monkeypatch.setattr(cli, "load_model", spy)
    (tmp_path / "in.txt").write_text("El rey dijo pan.\n", encoding="utf-8")
    argv = ["translate", "--model", str(trained.output_dir), "--input", str(tmp_path / "in.txt")]
    argv += ["--output", str(tmp_path / "out.txt"), "--max-new-tokens", "4", "--quiet"]
    assert cli.main([*argv, "--threads", "2", "--dtype", "bf16", "--attn-implementation", "eager"]) == 0
    assert seen == {"threads": 2, "dtype": torch.bfloat16, "attn": "eager", "compiled": False}  # auto: not on a CPU
    torch.set_num_threads(1)

    from hf_graphtf.translation import dtypes

    monkeypatch.setattr(dtypes, "cpu_flags", lambda cpuinfo: {"sse2", "avx2"})  # no bf16: auto is fp32
    assert cli.main(argv) == 0
    assert seen["threads"] == 1 and seen["dtype"] == torch.float32  # torch's setting left alone by default
    assert cli.main([*argv, "--threads", "0"]) == 2


@pytest.mark.parametrize("flag", ["--beam-size", "--batch-size", "--max-new-tokens", "--threads"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_counts_below_one_are_refused_in_one_line_before_loading(flag, value, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "load_model", lambda *args, **kwargs: pytest.fail("a model was loaded"))
    (tmp_path / "in.txt").write_text("Hola.\n", encoding="utf-8")
    (tmp_path / "model").mkdir()
    for command in (
        ["translate", "--input", str(tmp_path / "in.txt")],
        ["evaluate", "--source", str(tmp_path / "in.txt")],
    ):
        assert cli.main([*command, "--model", str(tmp_path / "model"), flag, value]) == 2
        err = capsys.readouterr().err
        assert err == f"error: {flag} must be at least 1; got {value}\n"


def test_train_reports_user_errors_in_one_line_with_the_exit_status_of_every_subcommand(tmp_path, capsys, monkeypatch):
    """A forgotten build-corpus, and a bad number in a recipe: one line each, naming what to do, status 2."""
    from recipe_fixtures import tiny_recipe, write_recipe

    monkeypatch.chdir(tmp_path)  # a fresh clone's folder: no corpus built yet
    recipe = tiny_recipe(tmp_path / "data" / "bible-es-en", tmp_path / "out")
    recipe["corpus"] = "data/bible-es-en"  # relative, as the committed recipes name it; not built here
    path = write_recipe(tmp_path / "recipe.yaml", recipe)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["train", str(path)])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    *announced, last = err.splitlines()  # what it was doing ("[hf-graphtf] loading the corpus ..."), then the error
    assert last.startswith("error: data/bible-es-en: no such corpus folder")
    assert all(line.startswith("[hf-graphtf]") for line in announced)
    assert "hf-graphtf build-corpus --output-dir data/bible-es-en" in err and "Traceback" not in err
    path.write_text(path.read_text().replace("learning_rate: 0.003", "learning_rate: 1e-3x"), encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["train", str(path)])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == f"error: {path}: learning_rate: '1e-3x' is not a valid float.\n"


def test_translating_to_a_file_resumes_after_an_interruption_and_refuses_another_jobs_leftovers(
    trained, tmp_path, monkeypatch, capsys
):
    """`--output FILE` appends chunk by chunk to FILE.partial and renames it once whole: an interrupted run
    leaves no FILE that looks finished, and rerunning the same job translates only what is missing."""
    sources, _ = _test_pairs(trained)
    (tmp_path / "in.es").write_text("\n".join(sources) + "\n", encoding="utf-8")
    argv = ["translate", "--model", str(trained.output_dir), "--input", str(tmp_path / "in.es"), "--batch-size", "1"]
    options = ["--max-new-tokens", "6", "--beam-size", "2"]
    assert cli.main([*argv, *options, "--output", str(tmp_path / "whole.en")]) == 0
    whole = (tmp_path / "whole.en").read_text(encoding="utf-8")
    assert len(whole.splitlines()) == len(sources) and not list(tmp_path.glob("*.partial*"))

    monkeypatch.setattr(file_translation, "CHUNK_BATCHES", 3)  # chunks of 3 lines
    translated_chunks = []
    real = cli.translate_texts

    def interrupted(*args, **kwargs):
        if len(translated_chunks) == 1:
            raise KeyboardInterrupt
        translated_chunks.append(kwargs["first_line"])
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "translate_texts", interrupted)
    out = tmp_path / "out.en"
    assert cli.main([*argv, *options, "--output", str(out)]) == cli.INTERRUPTED_EXIT  # Ctrl-C: one line, exit 130
    assert not out.exists()
    partial = tmp_path / "out.en.partial"
    assert partial.read_text(encoding="utf-8") == "".join(whole.splitlines(keepends=True)[:3])
    partial.write_bytes(partial.read_bytes() + b"half a transl")  # the interruption cut a line short
    capsys.readouterr()

    # another job's leftovers are refused, naming what differs
    assert cli.main([*argv, "--max-new-tokens", "6", "--beam-size", "3", "--output", str(out)]) == 2
    assert "out.en.partial holds part of another translation (it differs in beam_size)" in capsys.readouterr().err

    record = tmp_path / "out.en.partial.json"
    saved = record.read_bytes()
    record.unlink()  # a partial file without its record cannot be checked: refused too
    assert cli.main([*argv, *options, "--output", str(out)]) == 2
    assert "out.en.partial is left from a translation, without out.en.partial.json" in capsys.readouterr().err
    record.write_bytes(saved)

    translated_chunks.clear()
    monkeypatch.setattr(
        cli, "translate_texts", lambda *a, **k: (translated_chunks.append(k["first_line"]), real(*a, **k))[1]
    )
    assert cli.main([*argv, *options, "--output", str(out)]) == 0
    assert f"resuming {out}: 3 of {len(sources)} lines were translated before" in capsys.readouterr().err
    assert translated_chunks == list(range(4, len(sources) + 1, 3))  # from line 4 on, nothing twice
    assert out.read_text(encoding="utf-8") == whole
    assert not partial.exists() and not (tmp_path / "out.en.partial.json").exists()
