"""The offline Bible corpus: markup cleaning, alignment, splits, and the build from Debian's modules."""

from __future__ import annotations

import collections
import hashlib
import json
import re
from pathlib import Path

import pytest

from hf_graphtf.data.align import AlignedVerse, align_chapter, dice, english_content_words, monotone_align
from hf_graphtf.data.bible import (
    APT_COMMAND,
    SwordModulesMissing,
    build_bible_corpus,
    ensure_sword_modules,
)
from hf_graphtf.data.osis import GLUE, CaseModel, WordJoiner, clean_osis, strongs_numbers
from hf_graphtf.data.splits import chapter_of, chapter_split, drop_seen_sources, split_by_chapter, stable_subset


def _modules_missing() -> str | None:
    try:
        ensure_sword_modules()
    except SwordModulesMissing as error:
        return str(error)
    return None


_MISSING = _modules_missing()
needs_sword = pytest.mark.skipif(_MISSING is not None, reason=f"{_MISSING}")


# --- OSIS cleaning -------------------------------------------------------------------------------


def test_note_between_words_leaves_a_space_and_no_note_text():
    raw = (
        '<w lemma="strong:H0430">God</w><note placement="foot"><reference type="annotateRef">1:1 </reference>'
        'The Hebrew word rendered “God” is “אֱלֹהִ֑ים” (Elohim).</note><w lemma="strong:H1254">created</w>.'
    )
    assert clean_osis(raw) == "God created."


def test_cross_references_notes_before_punctuation_and_speakers_are_removed():
    raw = (
        '<speaker>Beloved</speaker> He said,<note type="crossReference"><reference>Gen 1:1</reference></note> '
        "“Come<note>x</note>.”"
    )
    assert clean_osis(raw) == "He said, “Come.”"


def test_canonical_psalm_titles_are_kept_and_editorial_titles_dropped():
    psalm = '<title canonical="true" type="psalm">A Psalm of David.</title> <w>The LORD</w> is my shepherd.'
    assert clean_osis(psalm) == "A Psalm of David. The LORD is my shepherd."
    heading = "<title>Written to the Romans from Corinthus.</title>Amen."
    assert clean_osis(heading) == "Amen."


def test_milestones_separate_words_and_typesetting_marks_go():
    raw = 'first line<l eID="a" level="1"/><l level="2" sID="b"/>second ¶ And the \\nd LORD spake'
    assert clean_osis(raw) == "first line second And the LORD spake"


def test_text_after_the_book_end_is_dropped():
    raw = 'Amen. <div canonical="true" eID="x" osisID="Rev" type="book"/> <div type="glossary"/>Glossary text'
    assert clean_osis(raw) == "Amen."


def test_strongs_numbers_are_unpadded_in_order():
    raw = '<w lemma="strong:H07225">In the beginning</w> <w lemma="strong:H0430 strong:H1254">God created</w>'
    assert strongs_numbers(raw) == ["H7225", "H430", "H1254"]


def test_touching_word_elements_are_split_unless_the_text_knows_the_joined_word():
    raw = '<w>hay allí</w><transChange type="added">también</transChange> <w>y díjo</w><w>le</w>'
    glued = clean_osis(raw, keep_glue=True)
    assert glued == f"hay allí{GLUE}también y díjo{GLUE}le"
    joiner = WordJoiner.from_texts([glued, "Y díjole Jehová"], suffixes={"le"})
    assert joiner.resolve(glued) == "hay allí también y díjole"
    assert clean_osis(raw) == "hay allí también y díjo le"


def test_case_model_restores_chapter_opening_capitals():
    model = CaseModel.from_texts(["Y dijo Moisés: en el monte aconteció esto.", "Habló Moisés en el campo."])
    assert model.restore("EN el principio") == "En el principio"
    assert model.restore("Y ACONTECIÓ que habló") == "Y aconteció que habló"
    assert model.restore("Salmo de David. Y MOISÉS habló") == "Salmo de David. Y Moisés habló"
    assert model.restore("EXISTÍA entonces Jephté") == "Existía entonces Jephté"  # unseen: lower-cased
    # Capitals that do not open a sentence are meant.
    assert model.restore("Y escribió: MENE, MENE, TEKEL") == "Y escribió: MENE, MENE, TEKEL"
    assert model.restore("Yo soy JEHOVÁ") == "Yo soy JEHOVÁ"


# --- alignment -----------------------------------------------------------------------------------


def test_monotone_align_skips_rather_than_crossing():
    left = ["a", "b", "c", "d"]
    right = ["x", "b", "c", "d", "e"]
    pairs = monotone_align(len(left), len(right), lambda i, j: 1.0 if left[i] == right[j] else None)
    assert pairs == [(1, 1), (2, 2), (3, 3)]


def _verses(*feature_lists: str) -> list[AlignedVerse]:
    return [AlignedVerse(number, collections.Counter(features.split())) for number, features in feature_lists]


def test_align_chapter_follows_a_shifted_numbering_and_drops_a_merged_verse():
    # The left edition starts with the previous chapter's last verse and merges the right's 4 and 5.
    left = _verses((1, "z y x"), (2, "a b c"), (3, "d e f"), (4, "g h i"), (5, "j k l m n o"))
    right = _verses((1, "a b c"), (2, "d e f"), (3, "g h i"), (4, "j k l"), (5, "m n o"))
    pairs = align_chapter(left, right, min_similarity=0.3, same_number_bonus=0.15)
    assert pairs == [(2, 1), (3, 2), (4, 3)]


def test_align_chapter_trusts_the_numbering_when_features_say_nothing():
    left = _verses((1, "a"), (2, "q"), (3, "c"))
    right = _verses((1, "a"), (2, "r"), (3, "c"))
    assert align_chapter(left, right, min_similarity=0.3, same_number_bonus=0.15) == [(1, 1), (2, 2), (3, 3)]


def test_english_overlap_survives_archaic_inflection():
    kjv = english_content_words("And the LORD spake unto Moses, saying, Speak unto the children of Israel")
    web = english_content_words("Yahweh spoke to Moses, saying, “Speak to the children of Israel")
    other = english_content_words("The famine was severe in the land of Canaan.")
    assert dice(kjv, web) > 0.6 > dice(kjv, other)


# --- splits --------------------------------------------------------------------------------------


def _record(record_id: str, source: str) -> dict:
    return {"id": record_id, "translation": {"es": source, "en": source.upper()}}


def test_chapter_split_is_stable_and_roughly_proportional():
    chapters = [f"Book{b}.{c}" for b in range(40) for c in range(1, 31)]
    names = [chapter_split(chapter) for chapter in chapters]
    assert names == [chapter_split(chapter) for chapter in chapters]
    counts = collections.Counter(names)
    assert 0.03 < counts["test"] / len(names) < 0.07
    assert 0.015 < counts["valid"] / len(names) < 0.045
    assert chapter_of("1Cor.13.4") == "1Cor.13"


def test_split_by_chapter_keeps_each_chapter_whole():
    records = [_record(f"Gen.{c}.{v}", f"text {c} {v}") for c in range(1, 51) for v in range(1, 4)]
    splits = split_by_chapter(records)
    seen = {}
    for name, part in splits.items():
        for record in part:
            assert seen.setdefault(chapter_of(record["id"]), name) == name
    assert sum(len(part) for part in splits.values()) == len(records)


def test_drop_seen_sources_ignores_case_and_spacing():
    train = [_record("Gen.1.1", "Y dijo Dios")]
    kept, dropped = drop_seen_sources(
        [_record("Gen.2.1", "y  dijo DIOS"), _record("Gen.2.2", "otra")], train, src_lang="es"
    )
    assert [r["id"] for r in kept] == ["Gen.2.2"] and [r["id"] for r in dropped] == ["Gen.2.1"]


def test_stable_subset_is_deterministic_and_order_preserving():
    records = [_record(f"Gen.1.{v}", str(v)) for v in range(1, 101)]
    first = stable_subset(records, 10, salt="s")
    assert first == stable_subset(records, 10, salt="s")
    assert {r["id"] for r in stable_subset(records[::-1], 10, salt="s")} == {r["id"] for r in first}
    assert [r["id"] for r in first] == sorted((r["id"] for r in first), key=lambda i: int(i.rsplit(".", 1)[1]))
    assert first != stable_subset(records, 10, salt="other")
    assert stable_subset(records, 1000, salt="s") == records


# --- the build from the Debian packages ----------------------------------------------------------


def test_missing_modules_error_names_the_apt_command(tmp_path):
    with pytest.raises(SwordModulesMissing) as error:
        ensure_sword_modules(tmp_path)
    message = str(error.value)
    assert APT_COMMAND in message
    assert "sword-text-sparv" in message and "spaRV1909eb" in message


def _read_split(directory: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (directory / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="session")
def bible(tmp_path_factory) -> tuple[Path, dict, dict[str, list[dict]]]:
    """The full corpus, built once per session (about 10-20 s on two cores)."""
    if _MISSING is not None:
        pytest.skip(_MISSING)
    directory = tmp_path_factory.mktemp("bible-es-en")
    meta = build_bible_corpus(directory, progress=False)
    splits = {name: _read_split(directory, name) for name in ("train", "train_10k", "train_5k", "valid", "test")}
    return directory, meta, splits


def _by_id(splits: dict[str, list[dict]]) -> dict[str, dict]:
    return {record["id"]: record for name in ("train", "valid", "test") for record in splits[name]}


@needs_sword
def test_genesis_1_1(bible):
    _, _, splits = bible
    record = _by_id(splits)["Gen.1.1"]
    assert record["translation"] == {
        "es": "En el principio crió Dios los cielos y la tierra.",
        "en": "In the beginning, God created the heavens and the earth.",
    }
    assert record["references"]["en"] == [
        "In the beginning, God created the heavens and the earth.",
        "In the beginning God created the heaven and the earth.",
    ]


@needs_sword
def test_numbers_30_is_aligned_by_content_not_by_verse_number(bible):
    # The Spanish module's Num 30:1 holds KJV Num 29:40 ("Moses told the children of Israel"), so
    # every Spanish verse of the chapter sits one slot later than its KJV counterpart.
    records = _by_id(bible[2])
    first = records["Num.30.1"]
    assert "príncipes de las tribus" in first["translation"]["es"]
    assert "heads of the tribes" in first["translation"]["en"]
    vow = records["Num.30.2"]
    assert "voto" in vow["translation"]["es"] and "boca" in vow["translation"]["es"]
    assert "vows a vow" in vow["translation"]["en"] and "mouth" in vow["translation"]["en"]
    woman = records["Num.30.3"]
    assert "mujer" in woman["translation"]["es"] and "padre" in woman["translation"]["es"]
    assert "woman" in woman["translation"]["en"] and "father" in woman["translation"]["en"]


@needs_sword
def test_other_shifted_chapters_pair_matching_content(bible):
    records = _by_id(bible[2])
    jonah = records["Jonah.2.1"]["translation"]
    assert "Jonás" in jonah["es"] and "Jonah" in jonah["en"]
    gird = records["Job.40.7"]["translation"]
    assert "lomos" in gird["es"] and "man" in gird["en"]
    grace = records["2Cor.13.14"]["translation"]
    assert grace["es"].startswith("La gracia del Señor Jesucristo") and grace["es"].endswith("Amén.")
    assert grace["en"].startswith("The grace of the Lord Jesus Christ")


@needs_sword
def test_counts_and_sentence_lengths(bible):
    _, meta, splits = bible
    total = sum(len(splits[name]) for name in ("train", "valid", "test"))
    assert 28_000 <= total <= 33_000
    assert len(splits["train_10k"]) == 10_000
    assert 0.03 * total < len(splits["test"]) < 0.07 * total
    assert 0.015 * total < len(splits["valid"]) < 0.045 * total
    for name, records in splits.items():
        assert meta["splits"][name]["pairs"] == len(records)
        for lang in ("es", "en"):
            average = sum(len(r["translation"][lang].split()) for r in records) / len(records)
            assert 15 <= average <= 35, (name, lang, average)
    assert meta["license"] == "public domain"
    assert meta["language_pair"] == {"source": "es", "target": "en"}
    assert {source["sword_module"] for source in meta["sources"].values()} == {
        "spaRV1909eb",
        "engWEB2015eb",
        "engKJV2006eb",
    }


@needs_sword
def test_records_are_clean_and_well_formed(bible):
    _, _, splits = bible
    ids = [record["id"] for name in ("train", "valid", "test") for record in splits[name]]
    assert len(ids) == len(set(ids))
    leftovers = re.compile(r"[<>¶\\" + GLUE + r"]|  |^\s|\s$")
    shouted_opening = re.compile(r"^(?:Y |¿|¡)?[A-ZÁÉÍÓÚÑ]{2,} [a-záéíóúñ]")
    for record in splits["train"] + splits["valid"] + splits["test"]:
        assert re.fullmatch(r"[1-3]?[A-Z][A-Za-z]+\.\d+\.\d+", record["id"])
        texts = [record["translation"]["es"], record["translation"]["en"], *record["references"]["en"]]
        assert record["references"]["en"][0] == record["translation"]["en"]
        for text in texts:
            assert text and not leftovers.search(text), (record["id"], text)
        assert not shouted_opening.match(record["translation"]["es"]), record


@needs_sword
def test_no_chapter_in_two_splits_and_no_train_sources_in_evaluation(bible):
    _, _, splits = bible
    owner = {}
    for name in ("train", "valid", "test"):
        for record in splits[name]:
            assert owner.setdefault(chapter_of(record["id"]), name) == name
    train_sources = {" ".join(r["translation"]["es"].casefold().split()) for r in splits["train"]}
    for name in ("valid", "test"):
        for record in splits[name]:
            assert " ".join(record["translation"]["es"].casefold().split()) not in train_sources
    train_ids = {record["id"] for record in splits["train"]}
    assert {record["id"] for record in splits["train_10k"]} <= train_ids


@needs_sword
def test_the_5k_split_is_drawn_from_10k_as_10k_is_from_train_and_the_others_are_unchanged(bible):
    """train_5k: 5,000 pairs of train_10k ranked by sha1('train_5k:' + id), so 5K lies within 10K; meta.json
    counts and hashes it. Adding it left every earlier split byte for byte as the converged grid's runs
    recorded them (their rows' corpus_sha256), so those rows re-score on the same data."""
    directory, meta, splits = bible
    assert splits["train_5k"] == stable_subset(splits["train_10k"], 5_000, salt="train_5k")
    assert splits["train_10k"] == stable_subset(splits["train"], 10_000, salt="train_10k")
    assert len(splits["train_5k"]) == 5_000 and meta["splits"]["train_5k"]["pairs"] == 5_000
    assert {r["id"] for r in splits["train_5k"]} < {r["id"] for r in splits["train_10k"]}
    digest = hashlib.sha256((directory / "train_5k.jsonl").read_bytes()).hexdigest()
    assert meta["files"]["train_5k.jsonl"]["sha256"] == digest
    assert "train_5k ranks train_10k by sha1('train_5k:' + id)" in meta["split_rule"]
    results = Path(__file__).parents[1] / "recipes/experiments/results_bible_cpu_converged.jsonl"
    recorded = json.loads(results.read_text(encoding="utf-8").splitlines()[0])["provenance"]["corpus_sha256"]
    assert set(recorded) == {"train.jsonl", "train_10k.jsonl", "valid.jsonl", "test.jsonl"}
    for name, sha256 in recorded.items():
        assert meta["files"][name]["sha256"] == sha256, name


@needs_sword
def test_existing_build_is_reused(bible):
    directory, meta, _ = bible
    before = {path.name: path.stat().st_mtime_ns for path in directory.iterdir()}
    assert build_bible_corpus(directory, progress=False) == meta
    assert {path.name: path.stat().st_mtime_ns for path in directory.iterdir()} == before


@needs_sword
def test_build_is_byte_identical_across_runs(tmp_path):
    books = ["Num", "Ruth", "Jonah"]
    digests = []
    for run in ("a", "b"):
        meta = build_bible_corpus(tmp_path / run, books=books, progress=False)
        assert meta["books"] == books
        digests.append(
            {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted((tmp_path / run).iterdir())}
        )
    assert digests[0] == digests[1]
    assert set(digests[0]) == {
        "train.jsonl",
        "train_10k.jsonl",
        "train_5k.jsonl",
        "valid.jsonl",
        "test.jsonl",
        "meta.json",
    }


@needs_sword
def test_cli_builds_a_book_subset(tmp_path, capsys):
    from hf_graphtf.data.bible import main

    assert main(["--out", str(tmp_path / "ruth"), "--books", "Ruth"]) == 0
    printed = capsys.readouterr().out
    assert "train" in printed and "wrote" in printed
    meta = json.loads((tmp_path / "ruth" / "meta.json").read_text(encoding="utf-8"))
    assert meta["books"] == ["Ruth"] and 80 <= meta["total_pairs"] <= 85


def test_unknown_book_names_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown book"):
        build_bible_corpus(tmp_path, books=["Genesis"], progress=False)


@needs_sword
@pytest.mark.faults
@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda folder: _cut(folder / "train.jsonl", 10), "train.jsonl has 10 lines"),
        (lambda folder: (folder / "meta.json").write_text('{"books": ', encoding="utf-8"), "damaged corpus metadata"),
    ],
    ids=["train cut to 10 lines", "damaged meta.json"],
)
def test_a_damaged_corpus_folder_is_rebuilt_not_reused(tmp_path, capsys, damage, reason):
    """A reused folder is checked against the line counts and hashes in its meta.json."""
    meta = build_bible_corpus(tmp_path, books=["Ruth", "Jonah"], progress=False)
    original = (tmp_path / "train.jsonl").read_bytes()
    damage(tmp_path)
    again = build_bible_corpus(tmp_path, books=["Ruth", "Jonah"], progress=False)
    assert reason in capsys.readouterr().err
    assert again == meta and (tmp_path / "train.jsonl").read_bytes() == original


def _cut(path: Path, lines: int) -> None:
    kept = path.read_text(encoding="utf-8").splitlines(keepends=True)[:lines]
    path.write_text("".join(kept), encoding="utf-8")
