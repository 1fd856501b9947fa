"""A line longer than the model reads is translated whole, in pieces, and said so: never cut silently; text
the vocabulary lacks (it reaches the model as the unknown token) is named, not dropped silently; a
translation that runs to the length limit is named, as it may be cut.

The test model has random weights, so its translations run to the limit: the tests of the input warnings
leave that warning aside."""

from __future__ import annotations

import copy
import io
import warnings

import pytest
import torch
from model_matrix import OPTION_MATRIX, tiny_model

from hf_graphtf import cli
from hf_graphtf.translation.inference import (
    DEFAULT_MAX_NEW_TOKENS,
    CutTranslationWarning,
    LongInputWarning,
    TranslationLengthError,
    UnknownTextWarning,
    reached_limit,
    split_to_fit,
    translate_texts,
    translation_length,
    unknown_text,
)

LIMIT = 12  # source tokens the test model reads (max_position_embeddings), </s> included


def _sentence(start: int, words: int) -> str:
    return " ".join(f"w{3 + (start + i) % 30}" for i in range(words)) + " ."


@pytest.fixture(scope="module")
def model():
    return tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32, max_position_embeddings=LIMIT)


def _translate_on_the_cli(model, tokenizer, tmp_path, monkeypatch, capsys, text: str, max_new_tokens: int):
    """``hf-graphtf translate`` of ``text`` from stdin with ``model`` saved: its output lines and its stderr."""
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    argv = ["translate", "--model", str(tmp_path / "model"), "--max-new-tokens", str(max_new_tokens), "--quiet"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def _warning_lines(stderr: str) -> list[str]:
    """The CLI's warning lines on ``stderr`` other than the length limit's, which every line of a random
    model raises."""
    return [line for line in stderr.splitlines() if line.startswith("warning:") and "length limit" not in line]


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
        warnings.simplefilter("ignore", CutTranslationWarning)
        alone = translate_texts(tiny_tokenizer, model, [short, *pieces], **gen)
    assert out[0] == alone[0] and out[1] == ""
    assert out[2] == " ".join(alone[1:])  # the long line is its pieces' translations, joined


def test_the_cli_names_the_long_lines_on_stderr(model, tiny_tokenizer, tmp_path, monkeypatch, capsys):
    lines = [_sentence(0, 3), " ".join(_sentence(i * 5, 4) for i in range(4))]
    text = "\n".join(lines) + "\n"
    out, err = _translate_on_the_cli(model, tiny_tokenizer, tmp_path, monkeypatch, capsys, text, max_new_tokens=4)
    assert len(out) == 2
    warning_lines = _warning_lines(err)
    assert len(warning_lines) == 2  # and one for the "." the toy vocabulary lacks
    assert "translated in pieces" in warning_lines[0] and "line 2" in warning_lines[0]


def test_text_the_vocabulary_lacks_is_named_not_dropped_silently(model, tiny_tokenizer):
    """A word (here; a character, for subword vocabularies) the tokenizer maps to its unknown token never
    reaches the model: the library call names each such line and what of it became the unknown token."""
    known, unknown = "w3 w4 w5", "w3 zebra w4 okapi zebra"
    gen = dict(num_beams=1, max_new_tokens=4, progress=False)
    with pytest.warns(UnknownTextWarning) as caught:
        warnings.simplefilter("ignore", CutTranslationWarning)
        out = translate_texts(tiny_tokenizer, model, [known, unknown, ""], **gen)
    assert len(out) == 3 and len(caught) == 1
    warning = caught[0].message
    assert warning.lines == {2: ["zebra", "okapi"]}
    assert "1 line(s)" in str(warning) and "line 2: 'zebra', 'okapi'" in str(warning) and "<unk>" in str(warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every word known: no warning
        warnings.simplefilter("ignore", CutTranslationWarning)
        translate_texts(tiny_tokenizer, model, [known], **gen)
    with pytest.warns(UnknownTextWarning) as caught:  # a chunk of a longer file: lines numbered in the file
        warnings.simplefilter("ignore", CutTranslationWarning)
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
    text = "w3 w4 w5\nw3 zebra\n"
    out, err = _translate_on_the_cli(model, tiny_tokenizer, tmp_path, monkeypatch, capsys, text, max_new_tokens=4)
    assert len(out) == 2
    warning_lines = _warning_lines(err)
    assert len(warning_lines) == 1 and "vocabulary lacks" in warning_lines[0] and "line 2: 'zebra'" in warning_lines[0]


def test_reached_limit_counts_each_row_to_its_first_end_of_sentence():
    """The decoder's start token (NLLB's is its end-of-sentence token) is not counted; a row whose end comes at
    the limit itself (Marian forces it there) counts as reaching it, as does a row with no end at all."""
    start, eos, pad = 9, 1, 0
    generated = torch.tensor(
        [
            [start, 5, 6, eos, pad, pad],  # ended after 3 new tokens
            [start, 5, 6, 7, 8, eos],  # ended at the 5th: the limit
            [start, 5, 6, 7, 8, 9],  # never ended
            [eos, 5, eos, pad, pad, pad],  # starts with eos, ended after 2
        ]
    )
    assert reached_limit(generated, {eos}, 5) == [False, True, True, False]
    assert reached_limit(generated, {eos}, 6) == [False, False, False, False]
    assert reached_limit(generated, {eos, 6}, 5) == [False, False, False, False]  # a list of end tokens


def test_the_length_limit_is_the_call_s_else_the_model_s_else_the_default():
    """Transformers' model-agnostic default would stop every translation at 20 tokens; where neither the call
    nor the model's generation config sets a length, a translation may have `DEFAULT_MAX_NEW_TOKENS`, within
    the decoder's positions."""
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32, max_position_embeddings=1024)
    assert model.generation_config.max_length is None and model.generation_config.max_new_tokens is None
    assert translation_length(model, None) == ({"max_length": DEFAULT_MAX_NEW_TOKENS + 1}, DEFAULT_MAX_NEW_TOKENS)
    assert translation_length(model, 5) == ({"max_length": 6}, 5)
    small = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32, max_position_embeddings=40)
    assert translation_length(small, None) == ({"max_length": 40}, 39)
    small.generation_config.max_length = 30  # a trained model's, or opus-mt's 512: generate applies it
    assert translation_length(small, None) == ({}, 29)
    small.generation_config.max_new_tokens = 7
    assert translation_length(small, None) == ({}, 7)
    assert translation_length(small, 5) == ({"max_new_tokens": 5}, 5)  # as a max_length, generate() takes 7


def test_a_model_with_no_length_in_its_generation_config_translates_past_20_tokens(tiny_tokenizer):
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32, max_position_embeddings=40)
    with pytest.warns(CutTranslationWarning) as caught:  # random weights: it runs to the limit
        (out,) = translate_texts(tiny_tokenizer, model, ["w3 w4 w5"], num_beams=1, progress=False)
    assert len(tiny_tokenizer(out, add_special_tokens=False)["input_ids"]) == 39
    (warning,) = [w.message for w in caught if w.category is CutTranslationWarning]
    assert warning.limit == 39 and str(warning).endswith("the model's decoder reads no more")

    model.generation_config.max_new_tokens = 7  # the call's limit is still the one decoded to
    (out,) = translate_texts(tiny_tokenizer, model, ["w3 w4 w5"], max_new_tokens=5, num_beams=1, progress=False)
    assert len(tiny_tokenizer(out, add_special_tokens=False)["input_ids"]) == 5


def test_translations_that_run_to_the_limit_are_named_and_those_that_end_are_not(model, tiny_tokenizer):
    lines = [_sentence(0, 3), "", _sentence(5, 3), " ".join(_sentence(i * 5, 4) for i in range(4))]
    gen = dict(num_beams=2, max_new_tokens=4, progress=False)
    with warnings.catch_warnings(record=True) as caught:  # random weights: every line runs to the limit
        warnings.simplefilter("always")
        translate_texts(tiny_tokenizer, model, lines, first_line=41, **gen)
    (warning,) = [w.message for w in caught if w.category is CutTranslationWarning]
    assert warning.lines == [41, 43, 44] and warning.limit == 4  # the long line once, for its pieces
    assert "3 translation(s) ran to the length limit of 4 tokens" in str(warning) and "line 41, 43, 44" in str(warning)

    ending = copy.deepcopy(model)
    with torch.no_grad():
        ending.final_logits_bias[0, ending.config.eos_token_id] = 1e4  # ends every translation at once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownTextWarning)  # of the toy vocabulary's missing "."
        warnings.simplefilter("error", CutTranslationWarning)
        assert translate_texts(tiny_tokenizer, ending, lines[:3], **gen) == ["", "", ""]


def test_the_cli_names_the_translations_that_reach_the_limit(model, tiny_tokenizer, tmp_path, monkeypatch, capsys):
    text = "w3 w4 w5\n\nw6 w7\n"
    out, err = _translate_on_the_cli(model, tiny_tokenizer, tmp_path, monkeypatch, capsys, text, max_new_tokens=3)
    assert len(out) == 3
    (line,) = [line for line in err.splitlines() if "length limit" in line]
    assert line.startswith("warning: 2 translation(s) ran to the length limit of 3 tokens") and "line 1, 3;" in line
    assert line.endswith("where they are, a larger max_new_tokens (--max-new-tokens) lets them end")


def test_a_length_limit_past_the_decoder_s_positions_is_refused_before_decoding():
    """Past its positions the decoder fails at that position (an index error in the table), after decoding
    every line up to it: the limit is refused first, naming the most the model reads."""
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32, max_position_embeddings=40)
    assert translation_length(model, 39) == ({"max_length": 40}, 39)
    with pytest.raises(TranslationLengthError, match=r"max_new_tokens 40 is more .* at most 39 new tokens"):
        translation_length(model, 40)
    model.generation_config.max_length = 60  # a model's own limit past its positions
    with pytest.raises(TranslationLengthError, match="the generation config's max_length 60 is more"):
        translation_length(model, None)
    assert translation_length(model, 10) == ({"max_length": 11}, 10)  # the call's limit wins


def test_a_long_line_gets_the_packages_line_only_not_the_tokenizers_indexing_warning(model, tiny_tokenizer, capfd):
    """Measuring a line longer than the model reads made Transformers print that it "will result in indexing
    errors" before the package's own line saying it is translated in pieces; the tokenizer's own warning stays
    for encodings outside this measuring."""
    from transformers.utils import logging as hf_logging

    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.model_max_length = LIMIT
    hf_logging.enable_propagation()
    long_line = " ".join(_sentence(i * 5, 4) for i in range(4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        translate_texts(tokenizer, model, [long_line], num_beams=1, max_new_tokens=2, progress=False)
    assert "indexing errors" not in capfd.readouterr().err
    assert "sequence-length-is-longer-than-the-specified-maximum" not in tokenizer.deprecation_warnings
    tokenizer(long_line)  # outside translate_texts, Transformers' warning is as it was
    assert tokenizer.deprecation_warnings.get("sequence-length-is-longer-than-the-specified-maximum")
