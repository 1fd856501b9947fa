"""Resumable file translation as a library call (`hf_graphtf.translation.file_translation`); the CLI's ``--output`` runs
the same job (tests/test_cli.py, on a trained model)."""

from __future__ import annotations

import json

import pytest
import torch
from recipe_fixtures import tiny_model_config
from transformers import AutoModelForSeq2SeqLM

from hf_graphtf.errors import UserError
from hf_graphtf.translation import file_translation
from hf_graphtf.translation.file_translation import FileTranslation, PartialOutputError, translate_file
from hf_graphtf.translation.inference import translate_texts

TEXTS = [f"w{3 + i} w{4 + i}" for i in range(7)]
OPTIONS = dict(model="some/model", beam_size=2, max_new_tokens=5, dtype="fp32", batch_size=1)


def upper(chunk, first_line, calls):
    calls.append(first_line)
    return [text.upper() for text in chunk]


def test_an_interrupted_job_resumes_after_its_last_whole_line_and_translates_nothing_twice(tmp_path, monkeypatch):
    monkeypatch.setattr(file_translation, "CHUNK_BATCHES", 3)
    output = tmp_path / "deep" / "out.txt"  # a missing folder is made
    calls: list[int] = []

    def interrupted(chunk, first_line):
        if calls:
            raise KeyboardInterrupt
        return upper(chunk, first_line, calls)

    job = FileTranslation(TEXTS, output, **OPTIONS)
    assert job.resume() == 0
    with pytest.raises(KeyboardInterrupt):
        job.run(interrupted)
    assert not output.exists()  # never a file that looks finished
    partial = output.with_name("out.txt.partial")
    partial.write_bytes(partial.read_bytes() + b"W5 HALF")  # a line cut short by the interruption

    calls.clear()
    job = FileTranslation(TEXTS, output, **OPTIONS)
    assert job.resume() == 3
    assert job.run(lambda chunk, first: upper(chunk, first, calls)) == output
    assert calls == [4, 7]  # lines 4-6, then 7
    assert output.read_text(encoding="utf-8").splitlines() == [text.upper() for text in TEXTS]
    assert not partial.exists() and not output.with_name("out.txt.partial.json").exists()


@pytest.mark.parametrize("field", ["model", "beam_size", "max_new_tokens", "dtype", "input"])
def test_another_jobs_partial_file_is_refused_naming_what_differs(tmp_path, field):
    output = tmp_path / "out.txt"
    FileTranslation(TEXTS, output, **OPTIONS).resume()
    output.with_name("out.txt.partial").write_text("W3 W4\n", encoding="utf-8")  # a line translated
    texts, options = TEXTS, dict(OPTIONS)
    if field == "input":
        texts = [*TEXTS[:-1], "w40"]
    else:
        options[field] = {"model": "other", "beam_size": 4, "max_new_tokens": 9, "dtype": "bf16"}[field]
    with pytest.raises(PartialOutputError, match=r"holds part of another translation \(it differs in") as refused:
        FileTranslation(texts, output, **options).resume()
    assert (field if field != "input" else "input_sha256") in str(refused.value)
    assert isinstance(refused.value, UserError)  # the CLI prints it as one error line


def test_a_partial_file_without_its_record_and_an_old_record_format(tmp_path):
    output = tmp_path / "out.txt"
    FileTranslation(TEXTS, output, **OPTIONS).resume()
    output.with_name("out.txt.partial").write_text("W3 W4\n", encoding="utf-8")  # a line translated
    record = output.with_name("out.txt.partial.json")
    saved = json.loads(record.read_text(encoding="utf-8"))
    record.unlink()
    with pytest.raises(PartialOutputError, match="out.txt.partial is left from a translation, without"):
        FileTranslation(TEXTS, output, **OPTIONS).resume()
    # the record the CLI wrote before the job moved into the library has the same keys: it still resumes
    assert sorted(saved) == ["beam_size", "dtype", "input_sha256", "lines", "max_new_tokens", "model"]
    record.write_text(json.dumps(saved), encoding="utf-8")
    assert FileTranslation(TEXTS, output, **OPTIONS).resume() == 1


def test_a_job_that_stopped_before_its_first_line_leaves_nothing_and_holds_nothing_back(tmp_path):
    """A job that fails before its first chunk (a model that does not load, an option the model refuses)
    leaves no partial file; one left empty by a killed run holds no work, so another job starts over on it
    instead of being refused."""
    output = tmp_path / "out.txt"
    job = FileTranslation(TEXTS, output, **OPTIONS)
    job.resume()

    def refused(chunk, first_line):
        raise ValueError("refused before any line")

    with pytest.raises(ValueError, match="refused before any line"):
        job.run(refused)
    assert sorted(path.name for path in tmp_path.iterdir()) == []

    FileTranslation(TEXTS, output, **OPTIONS).resume()  # then killed before its first chunk
    other = FileTranslation(TEXTS, output, **{**OPTIONS, "max_new_tokens": 9})
    assert other.resume() == 0
    assert json.loads(other.record.read_text(encoding="utf-8"))["max_new_tokens"] == 9
    assert other.run(lambda chunk, first: [text.upper() for text in chunk]) == output


def test_translate_file_writes_what_translate_texts_gives_and_resumes(tiny_tokenizer, tmp_path):
    torch.manual_seed(0)
    config = tiny_model_config(len(tiny_tokenizer), attention_link="both")
    model = AutoModelForSeq2SeqLM.from_config(config).eval()
    model.name_or_path = "tiny-linked"
    options = dict(batch_size=2, num_beams=2, max_new_tokens=4)
    expected = translate_texts(tiny_tokenizer, model, TEXTS, progress=False, **options)
    output = tmp_path / "out.txt"
    assert translate_file(tiny_tokenizer, model, TEXTS, output, **options) == 0
    assert output.read_text(encoding="utf-8") == "".join(line + "\n" for line in expected)

    # a run stopped after two lines, then the same call again: it takes up the job
    job = FileTranslation(TEXTS, output, model="tiny-linked", beam_size=2, max_new_tokens=4, dtype="fp32",
                          batch_size=2)  # fmt: skip
    job.resume()
    job.partial.write_text("".join(line + "\n" for line in expected[:2]), encoding="utf-8")
    assert translate_file(tiny_tokenizer, model, TEXTS, output, **options) == 2
    assert output.read_text(encoding="utf-8") == "".join(line + "\n" for line in expected)
