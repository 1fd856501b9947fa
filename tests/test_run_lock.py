"""One run per output folder: a second run on a live run's folder is refused; a dead run's folder is taken over."""

from __future__ import annotations

import json
import os

import pytest
from recipe_fixtures import TRAIN_SCRIPT, run_python, tiny_recipe, write_recipe, write_tiny_corpus

from hf_graphtf.training.run_lock import LOCK_FILE, FolderInUseError, hold_output_folder


def test_a_held_folder_refuses_a_second_holder_until_released(tmp_path):
    with hold_output_folder(tmp_path / "out"):
        record = json.loads((tmp_path / "out" / LOCK_FILE).read_text(encoding="utf-8"))
        assert record["pid"] == os.getpid()
        with pytest.raises(FolderInUseError, match=f"{tmp_path / 'out'} is in use by another training run \\(pid"):
            with hold_output_folder(tmp_path / "out"):
                pass
        with hold_output_folder(tmp_path / "out", main_process=False):  # other ranks do not take it
            pass
    with hold_output_folder(tmp_path / "out"):  # released when the run ends
        pass
    assert not (tmp_path / "out" / LOCK_FILE).exists()  # and gone: an uploaded folder does not carry its host


def test_a_lock_file_removed_as_it_was_opened_is_taken_again_at_its_path(tmp_path, monkeypatch):
    """A holder removes the lock file as it ends; a process that opened that file just before locks a file no
    other process can find, so it takes the lock again on the file now at the path."""
    from hf_graphtf import folder_lock

    folder = tmp_path / "out"
    folder.mkdir()
    (folder / LOCK_FILE).write_text("{}")
    real_flock, calls = folder_lock.fcntl.flock, []

    def flock_after_the_holder_ended(handle, operation):
        if not calls:  # the previous holder removes its file between this open and this lock
            (folder / LOCK_FILE).unlink()
        calls.append(operation)
        return real_flock(handle, operation)

    monkeypatch.setattr(folder_lock.fcntl, "flock", flock_after_the_holder_ended)
    with hold_output_folder(folder):
        assert len(calls) == 2  # locked twice: the removed file, then the one at the path
        assert json.loads((folder / LOCK_FILE).read_text(encoding="utf-8"))["pid"] == os.getpid()
        monkeypatch.setattr(folder_lock.fcntl, "flock", real_flock)
        with pytest.raises(FolderInUseError):  # and that file is the one held
            with hold_output_folder(folder):
                pass


def test_a_lock_left_by_a_dead_run_is_taken_over(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / LOCK_FILE).write_text(json.dumps({"pid": 999999, "host": "gone", "started": "2026-01-01"}))
    with hold_output_folder(folder):
        assert json.loads((folder / LOCK_FILE).read_text(encoding="utf-8"))["pid"] == os.getpid()


def test_the_training_script_refuses_a_folder_a_live_run_holds(tmp_path):
    corpus = write_tiny_corpus(tmp_path / "corpus")
    recipe = write_recipe(tmp_path / "recipe.yaml", tiny_recipe(corpus, tmp_path / "out", max_steps=2))
    with hold_output_folder(tmp_path / "out"):  # a live run: this process holds the folder
        (tmp_path / "out" / "marker").write_text("the first run's file")
        result = run_python(str(TRAIN_SCRIPT), str(recipe))
        assert result.returncode == 2
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.stderr[-2000:]
        assert errors[0].startswith(
            f"error: {tmp_path / 'out'} is in use by another training run (pid {os.getpid()} on "
        )
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [LOCK_FILE, "marker"]  # untouched
