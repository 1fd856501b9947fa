"""A line longer than the model reads is translated whole, in pieces, and said so: never cut silently; text
the vocabulary lacks (it reaches the model as the unknown token) is named, not dropped silently."""

from __future__ import annotations

import io
import warnings

import pytest
import torch
from model_matrix import OPTION_MATRIX, tiny_model

from hf_graphtf import cli
from hf_graphtf.inference import LongInputWarning, UnknownTextWarning, split_to_fit, translate_texts, unknown_text

LIMIT = 12  # source tokens the test model reads (max_position_embeddings), </s> included


def _sentence(start: int, words: int) -> str:
    return " ".join(f"w{3 + (start + i) % 30}" for i in range(words)) + " ."


@pytest.fixture(scope="module")
def model():
    return tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32, max_position_embeddings=LIMIT)


def _fits(tokenizer):
    return lambda text: len(tokenizer(text)["input_ids"]) <= LIMIT


def test_split_to_fit_keeps_every_word_and_packs_whole_sentences(tiny_tokenizer):
    text = " ".join(_sentence(i * 5, 4) for i in range(4))  # four sentences of 5 tokens, 21 with </s>
    pieces, cut = split_to_fit(text, _fits(tiny_tokenizer))
    assert not cut and " ".join(pieces) == text
    assert pieces == [f"{_sentence(0, 4)} {_sentence(5, 4)}", f"{_sentence(10, 4)} {_sentence(15, 4)}"]
    long_sentence = _sentence(0, 30)
    pieces, cut = split_to_fit(long_sentence, _fits(tiny_tokenizer))
    assert cut and " ".join(pieces) == long_sentence
    assert all(_fits(tiny_tokenizer)(piece) for piece in pieces)


def test_the_library_call_translates_long_lines_in_pieces_and_warns(model, tiny_tokenizer):
    short, long_line = _sentence(0, 3), " ".join(_sentence(i * 5, 4) for i in range(4))
    pieces, _ = split_to_fit(long_line, _fits(tiny_tokenizer))
    gen = dict(num_beams=2, max_new_tokens=4, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = translate_texts(tiny_tokenizer, model, [short, "", long_line, _sentence(3, 40)], **gen)
    caught = [warning for warning in caught if warning.category is LongInputWarning]  # "." is no word here
    assert len(caught) == 1
    warning = caught[0].message
    assert warning.lines == [3, 4] and warning.mid_sentence == [4]
    assert "line 3, 4" in str(warning) and f"({LIMIT} tokens)" in str(warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # lines that fit: no warning
        warnings.simplefilter("ignore", UnknownTextWarning)  # of the toy vocabulary's missing "."
        alone = translate_texts(tiny_tokenizer, model, [short, *pieces], **gen)
    assert out[0] == alone[0] and out[1] == ""
    assert out[2] == " ".join(alone[1:])  # the long line is its pieces' translations, joined


def test_the_cli_names_the_long_lines_on_stderr(model, tiny_tokenizer, tmp_path, monkeypatch, capsys):
    model.save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")
    lines = [_sentence(0, 3), " ".join(_sentence(i * 5, 4) for i in range(4))]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    argv = ["translate", "--model", str(tmp_path / "model"), "--max-new-tokens", "4", "--quiet"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    warning_lines = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warning_lines) == 2  # and one for the "." the toy vocabulary lacks
    assert "translated in pieces" in warning_lines[0] and "line 2" in warning_lines[0]


def test_text_the_vocabulary_lacks_is_named_not_dropped_silently(model, tiny_tokenizer):
    """A word (here; a character, for subword vocabularies) the tokenizer maps to its unknown token never
    reaches the model: the library call names each such line and what of it became the unknown token."""
    known, unknown = "w3 w4 w5", "w3 zebra w4 okapi zebra"
    gen = dict(num_beams=1, max_new_tokens=4, progress=False)
    with pytest.warns(UnknownTextWarning) as caught:
        out = translate_texts(tiny_tokenizer, model, [known, unknown, ""], **gen)
    assert len(out) == 3 and len(caught) == 1
    warning = caught[0].message
    assert warning.lines == {2: ["zebra", "okapi"]}
    assert "1 line(s)" in str(warning) and "line 2: 'zebra', 'okapi'" in str(warning) and "<unk>" in str(warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every word known: no warning
        translate_texts(tiny_tokenizer, model, [known], **gen)
    with pytest.warns(UnknownTextWarning) as caught:  # a chunk of a longer file: lines numbered in the file
        translate_texts(tiny_tokenizer, model, [known, unknown], first_line=41, **gen)
    assert caught[0].message.lines == {42: ["zebra", "okapi"]}


def test_a_slow_sentencepiece_tokenizer_names_the_unknown_characters(tmp_path):
    """opus-mt's `MarianTokenizer` has no offsets: the characters are found one by one."""
    from recipe_fixtures import write_opus_mt_stand_in, write_tiny_corpus
    from transformers import AutoTokenizer

    folder = write_opus_mt_stand_in(tmp_path / "opus-mt", write_tiny_corpus(tmp_path / "corpus"), "marian")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert not tokenizer.is_fast
    assert unknown_text(tokenizer, "El rey dijo 5€ ✓ y €.") == ["5", "€", "✓"]
    assert unknown_text(tokenizer, "El rey dijo.") == []


def test_the_cli_names_lines_with_unknown_text_on_stderr(model, tiny_tokenizer, tmp_path, monkeypatch, capsys):
    model.save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")
    monkeypatch.setattr("sys.stdin", io.StringIO("w3 w4 w5\nw3 zebra\n"))
    argv = ["translate", "--model", str(tmp_path / "model"), "--max-new-tokens", "4", "--quiet"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    warning_lines = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warning_lines) == 1 and "vocabulary lacks" in warning_lines[0] and "line 2: 'zebra'" in warning_lines[0]
