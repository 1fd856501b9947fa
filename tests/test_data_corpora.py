"""User corpora: every supported format loads into a `translation` column; bad input fails clearly."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from hf_graphtf.data.corpora import (
    HUB_CORPORA,
    CorpusError,
    CorpusFileNotFound,
    load_parallel_corpus,
    missing_local_corpus,
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def _pairs(dataset: datasets.Dataset, src: str, tgt: str) -> list[tuple[str, str]]:
    return [(row["translation"][src], row["translation"][tgt]) for row in dataset]


# --- formats -------------------------------------------------------------------------------------


def test_directory_of_jsonl_splits_keeps_ids_and_references(tmp_path):
    record = {
        "id": "Gen.1.1",
        "translation": {"es": "En el principio", "en": "In the beginning"},
        "references": {"en": ["In the beginning", "In the beginning"]},
    }
    for split in ("train", "valid", "test"):
        _write(tmp_path / f"{split}.jsonl", _jsonl([record, {**record, "id": "Gen.1.2"}]))
    corpus = load_parallel_corpus(tmp_path, src_lang="es", tgt_lang="en")
    assert isinstance(corpus, datasets.DatasetDict)
    assert sorted(corpus) == ["test", "train", "valid"]
    assert corpus["train"].column_names == ["id", "translation", "references"]
    assert corpus["train"][0]["translation"] == {"es": "En el principio", "en": "In the beginning"}
    assert corpus["test"][1]["id"] == "Gen.1.2"
    # "validation" is accepted for "valid", and a named split gives one Dataset.
    valid = load_parallel_corpus(tmp_path, src_lang="es", tgt_lang="en", split="validation")
    assert isinstance(valid, datasets.Dataset) and len(valid) == 2


def test_jsonl_file_reduces_translation_to_the_requested_pair(tmp_path):
    path = _write(
        tmp_path / "multi.jsonl",
        _jsonl(
            [
                {"translation": {"de": "Hallo", "en": "Hello", "fr": "Bonjour"}},
                {"translation": {"de": "Ja", "en": "Yes"}},
            ]
        ),
    )
    corpus = load_parallel_corpus(path, src_lang="de", tgt_lang="en")
    assert isinstance(corpus, datasets.Dataset)
    assert _pairs(corpus, "de", "en") == [("Hallo", "Hello"), ("Ja", "Yes")]
    assert set(corpus[0]["translation"]) == {"de", "en"}


def test_tsv_without_header_is_source_then_target(tmp_path):
    path = _write(tmp_path / "pairs.tsv", "Guten Morgen\tGood morning\nDanke\tThanks\n")
    corpus = load_parallel_corpus(path, src_lang="de", tgt_lang="en")
    assert _pairs(corpus, "de", "en") == [("Guten Morgen", "Good morning"), ("Danke", "Thanks")]


def test_tsv_header_names_the_column_order(tmp_path):
    path = _write(tmp_path / "pairs.tsv", "en\tde\nGood morning\tGuten Morgen\n")
    corpus = load_parallel_corpus(path, src_lang="de", tgt_lang="en")
    assert _pairs(corpus, "de", "en") == [("Guten Morgen", "Good morning")]


def test_tsv_short_first_row_is_data_not_a_header(tmp_path):
    path = _write(tmp_path / "pairs.tsv", "ja\tyes\nnein\tno\n")
    corpus = load_parallel_corpus(path, src_lang="de", tgt_lang="en")
    assert _pairs(corpus, "de", "en") == [("ja", "yes"), ("nein", "no")]


def test_aligned_text_files_by_prefix(tmp_path):
    _write(tmp_path / "corpus" / "train.de", "Hallo Welt\nÄpfel und Birnen\n")
    _write(tmp_path / "corpus" / "train.en", "Hello world\r\nApples and pears\r\n")
    corpus = load_parallel_corpus(tmp_path / "corpus" / "train", src_lang="de", tgt_lang="en")
    assert _pairs(corpus, "de", "en") == [("Hallo Welt", "Hello world"), ("Äpfel und Birnen", "Apples and pears")]
    assert corpus.features["translation"] == datasets.Translation(languages=["de", "en"])


def test_directory_of_text_file_splits(tmp_path):
    for split, n in (("train", 3), ("dev", 1)):
        _write(tmp_path / f"{split}.de", "".join(f"de {i}\n" for i in range(n)))
        _write(tmp_path / f"{split}.en", "".join(f"en {i}\n" for i in range(n)))
    corpus = load_parallel_corpus(tmp_path, src_lang="de", tgt_lang="en")
    assert {name: len(part) for name, part in corpus.items()} == {"dev": 1, "train": 3}
    assert len(load_parallel_corpus(tmp_path, src_lang="de", tgt_lang="en", split="valid")) == 1


# --- bad input -----------------------------------------------------------------------------------


def test_misaligned_text_files_name_both_counts(tmp_path):
    _write(tmp_path / "train.de", "a\nb\nc\n")
    _write(tmp_path / "train.en", "a\nb\n")
    with pytest.raises(CorpusError) as error:
        load_parallel_corpus(tmp_path / "train", src_lang="de", tgt_lang="en")
    message = str(error.value)
    assert "train.de" in message and "3 lines" in message
    assert "train.en" in message and "2 lines" in message


def test_empty_line_names_file_and_line(tmp_path):
    _write(tmp_path / "train.de", "a\n\nc\n")
    _write(tmp_path / "train.en", "a\nb\nc\n")
    with pytest.raises(CorpusError, match=r"train\.de, line 2: empty line"):
        load_parallel_corpus(tmp_path / "train", src_lang="de", tgt_lang="en")


def test_missing_partner_file(tmp_path):
    _write(tmp_path / "train.de", "a\n")
    with pytest.raises(CorpusFileNotFound, match=r"train\.en"):
        load_parallel_corpus(tmp_path / "train", src_lang="de", tgt_lang="en")


@pytest.mark.parametrize("name", ["missing.jsonl", "nothing/train", "./nowhere"])
def test_missing_local_sources(tmp_path, name):
    (tmp_path / "nothing").mkdir()
    with pytest.raises(CorpusFileNotFound) as error:
        load_parallel_corpus(str(tmp_path / name) if not name.startswith(".") else name, src_lang="de", tgt_lang="en")
    assert isinstance(error.value, ValueError) and isinstance(error.value, FileNotFoundError)


def test_jsonl_without_translation_column(tmp_path):
    path = _write(tmp_path / "bad.jsonl", _jsonl([{"translation": {"de": "a", "en": "b"}}, {"src": "a", "tgt": "b"}]))
    with pytest.raises(CorpusError, match=r"bad\.jsonl, line 2: no 'translation' column"):
        load_parallel_corpus(path, src_lang="de", tgt_lang="en")


def test_jsonl_without_the_requested_language(tmp_path):
    path = _write(tmp_path / "bad.jsonl", _jsonl([{"translation": {"de": "a", "fr": "b"}}]))
    with pytest.raises(CorpusError) as error:
        load_parallel_corpus(path, src_lang="de", tgt_lang="en")
    message = str(error.value)
    assert "bad.jsonl, line 1" in message and "'en'" in message and "'fr'" in message


def test_jsonl_with_invalid_json(tmp_path):
    path = _write(tmp_path / "bad.jsonl", '{"translation": {"de": "a", "en": "b"}}\n{"translation": \n')
    with pytest.raises(CorpusError, match=r"bad\.jsonl, line 2: invalid JSON"):
        load_parallel_corpus(path, src_lang="de", tgt_lang="en")


@pytest.mark.parametrize("row", ["only one column", "a\tb\tc"])
def test_tsv_row_without_two_columns(tmp_path, row):
    path = _write(tmp_path / "bad.tsv", f"x\ty\n{row}\n")
    with pytest.raises(CorpusError, match=r"bad\.tsv, line 2: expected 2 tab-separated columns"):
        load_parallel_corpus(path, src_lang="de", tgt_lang="en")


def test_tsv_header_naming_other_languages(tmp_path):
    path = _write(tmp_path / "bad.tsv", "fr\ten\nBonjour\tHello\n")
    with pytest.raises(CorpusError, match=r"bad\.tsv, line 1: header names languages 'fr' and 'en'"):
        load_parallel_corpus(path, src_lang="de", tgt_lang="en")


def test_same_source_and_target_language(tmp_path):
    with pytest.raises(CorpusError, match="both 'en'"):
        load_parallel_corpus(tmp_path, src_lang="en", tgt_lang="en")


# --- Hub datasets, up to the network boundary ----------------------------------------------------


@pytest.fixture
def fake_hub(monkeypatch):
    """Replace `datasets.load_dataset` with a recorder returning a small translation DatasetDict."""
    calls = []

    def load_dataset(path, name=None, split=None, **kwargs):
        calls.append({"path": path, "name": name, "split": split, **kwargs})
        features = datasets.Features({"translation": datasets.Translation(languages=["de", "en"])})
        rows = {"translation": [{"de": "Hallo", "en": "Hello"}, {"de": "Danke", "en": "Thanks"}]}
        part = datasets.Dataset.from_dict(rows, features=features)
        if split is not None:
            return part
        return datasets.DatasetDict({"train": part, "validation": part, "test": part})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


@pytest.mark.parametrize(
    ("name", "src", "tgt", "hub_id", "config"),
    [
        ("iwslt14-de-en", "de", "en", "bbaaaa/iwslt14-de-en", "de-en"),
        ("iwslt2017-de-en", "de", "en", "IWSLT/iwslt2017", "iwslt2017-de-en"),
        ("iwslt2017", "de", "en", "iwslt2017", "iwslt2017-de-en"),
        ("wmt14-en-de", "en", "de", "wmt/wmt14", "de-en"),
    ],
)
def test_known_hub_names_map_to_ids_and_configs(fake_hub, name, src, tgt, hub_id, config):
    corpus = load_parallel_corpus(name, src_lang=src, tgt_lang=tgt)
    assert fake_hub == [{"path": hub_id, "name": config, "split": None}]
    assert sorted(corpus) == ["test", "train", "validation"]
    assert corpus["train"][0]["translation"] == {"de": "Hallo", "en": "Hello"}


def test_generic_hub_id_passes_config_and_split(fake_hub):
    corpus = load_parallel_corpus(
        "hf://datasets/someone/parallel", src_lang="de", tgt_lang="en", split="train", config="de-en"
    )
    assert fake_hub == [{"path": "someone/parallel", "name": "de-en", "split": "train"}]
    assert isinstance(corpus, datasets.Dataset) and corpus.column_names == ["translation"]


@pytest.mark.parametrize("source", ["data/bible-es-en", "someone/parallel", "corpora/de-en/train"])
def test_a_missing_local_folder_fails_at_once_with_what_builds_it(fake_hub, source, tmp_path, monkeypatch):
    """A forgotten build-corpus (or a run outside the repository) is a missing folder, not a Hub id: one
    line naming the folder and the build command, without half a minute of Hub retries."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError) as caught:
        load_parallel_corpus(source, src_lang="es", tgt_lang="en", split="train")
    message = str(caught.value)
    assert "no such corpus folder" in message and str(tmp_path / source) in message
    assert f"hf-graphtf build-corpus --output-dir {source}" in message and "hf://datasets/" in message
    assert "\n" not in message and fake_hub == []  # the Hub was never asked


def test_a_missing_corpus_is_told_the_build_command_of_its_own_pair(fake_hub, tmp_path, monkeypatch):
    """A missing ny-en folder is told ``--pair ny-en`` (the default pair's command would fill it with es-en),
    and a pair the Bible builder does not make is told so instead of a command that builds another pair."""
    monkeypatch.chdir(tmp_path)
    told = str(missing_local_corpus("data/bible-ny-en", src_lang="ny", tgt_lang="en"))
    assert "`hf-graphtf build-corpus --pair ny-en --output-dir data/bible-ny-en`" in told
    other = str(missing_local_corpus("data/de-en", src_lang="de", tgt_lang="en"))
    assert "build-corpus" not in other and "only for es-en, ny-en, not de-en" in other and "hf://datasets/" in other


def test_a_missing_local_corpus_is_told_before_loading_with_the_loaders_own_message(fake_hub, tmp_path, monkeypatch):
    """`missing_local_corpus` answers without reading anything or asking the Hub: the same error the
    loader raises for a folder that is not there, and None for what the loader would open (a folder, a
    text-file prefix, a Hub name or id); ``root`` is where a relative path is looked up."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError) as raised:
        load_parallel_corpus("data/bible-es-en", src_lang="es", tgt_lang="en")
    told = missing_local_corpus("data/bible-es-en", src_lang="es", tgt_lang="en")
    assert isinstance(told, CorpusFileNotFound) and str(told) == str(raised.value)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "data" / "bible-es-en").mkdir(parents=True)
    assert missing_local_corpus("data/bible-es-en", src_lang="es", tgt_lang="en", root=elsewhere) is None
    assert str(elsewhere) not in str(missing_local_corpus("data/other", src_lang="es", tgt_lang="en"))
    assert str(elsewhere / "data/other") in str(
        missing_local_corpus("data/other", src_lang="es", tgt_lang="en", root=elsewhere)
    )
    _write(tmp_path / "pairs" / "train.de", "a\n")
    for present in ("pairs/train", "iwslt14-de-en", "wmt14", "hf://datasets/someone/parallel"):
        assert missing_local_corpus(present, src_lang="de", tgt_lang="en") is None, present
    assert fake_hub == []


def test_hub_dataset_with_text_columns(monkeypatch):
    def load_dataset(path, name=None, split=None, **kwargs):
        return datasets.Dataset.from_dict({"transcription": ["nfr"], "translation": ["gut"], "hieroglyphs": [""]})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    corpus = load_parallel_corpus(
        "bbaw_egyptian",
        src_lang="egy",
        tgt_lang="de",
        split="train",
        columns={"egy": "transcription", "de": "translation"},
    )
    assert corpus[0]["translation"] == {"egy": "nfr", "de": "gut"}
    with pytest.raises(CorpusError, match="not language -> text pairs; pass columns="):
        load_parallel_corpus("bbaw_egyptian", src_lang="egy", tgt_lang="de", split="train")


def test_known_name_with_the_wrong_language_pair(fake_hub):
    with pytest.raises(CorpusError, match="de-en corpus, not es-en"):
        load_parallel_corpus("iwslt14-de-en", src_lang="es", tgt_lang="en")
    assert fake_hub == []


def test_hub_table_entries_are_consistent():
    for name, (hub_id, _config, pair) in HUB_CORPORA.items():
        assert hub_id and len(pair) == 2 and name.endswith("-".join(pair))
