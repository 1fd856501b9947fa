"""One record per translation format (`hf_graphtf.translation.dtypes`): adding a format is one registration,
and everything that offers or reads a format sees it."""

from __future__ import annotations

import pytest
import torch
from recipe_fixtures import tiny_model_config

from hf_graphtf import cli
from hf_graphtf.translation import dtype_choice, dtypes, inference
from hf_graphtf.translation.dtypes import DTYPE_RECORDS, TranslationDtype, register_dtype


@pytest.fixture
def registered():
    """Register formats for one test; the registry is as it was afterwards."""
    before = dict(DTYPE_RECORDS)
    yield register_dtype
    DTYPE_RECORDS.clear()
    DTYPE_RECORDS.update(before)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory, tiny_tokenizer):
    from transformers import AutoModelForSeq2SeqLM

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-linked")
    AutoModelForSeq2SeqLM.from_config(tiny_model_config(len(tiny_tokenizer), attention_link="both")).save_pretrained(
        folder
    )
    tiny_tokenizer.save_pretrained(folder)
    return folder


def _halved(model):
    model.halved = True
    return model


def test_a_new_format_is_one_registration_read_by_every_consumer(registered, saved_model, capsys):
    registered(TranslationDtype("half", "float16", "a format added by a user", aliases=("halfprec",), prepare=_halved))
    # the vocabulary: names, aliases, torch dtypes
    assert "half" in dtype_choice.TRANSLATION_DTYPES and dtype_choice.TORCH_DTYPES["half"] == "float16"
    assert dtype_choice.canonical_dtype("halfprec") == "half"
    assert dtype_choice.resolve_translation_dtype("half", "cpu").reason == "translating in half"
    # the CLI offers it, by name and alias
    args = cli.build_parser().parse_args(["translate", "--model", "m", "--dtype", "halfprec"])
    assert args.dtype == "half" and "half" in cli._translate_dtype_help()
    # load_model loads in its dtype and prepares the model as the record says
    _, model = inference.load_model(str(saved_model), "cpu", "half")
    assert model.dtype == torch.float16 and model.halved and model.decoding_setup.dtype == "half"
    assert "half" not in inference.DTYPES  # prepared after loading: not a plain float format


def test_where_a_format_runs_whether_it_compiles_and_what_auto_may_take(registered, tmp_path):
    registered(TranslationDtype("gpu8", "float32", "a GPU-only format", devices=("cuda",), compiles=False))
    with pytest.raises(ValueError, match=r"dtype gpu8 runs on a CUDA GPU only \(a GPU-only format\)"):
        dtype_choice.resolve_translation_dtype("gpu8", "cpu")
    with pytest.raises(ValueError, match=r"compiled decoding takes .*, not gpu8 \(a GPU-only format\)$"):
        dtype_choice.check_compilable("gpu8")
    assert dtype_choice.decides_to_compile("auto", "cpu", "gpu8") == (False, "")
    # a format auto prefers, computed natively on this stand-in CPU: auto takes it before bf16 and fp32
    registered(TranslationDtype("fast", "bfloat16", "preferred", auto_rank=-1, native=lambda device, cpuinfo: True))
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu sse2 avx2\n", encoding="utf-8")
    assert dtype_choice.resolve_translation_dtype("auto", "cpu", cpuinfo).dtype == "fast"


def test_a_taken_name_or_alias_and_auto_are_refused(registered):
    with pytest.raises(ValueError, match="bf16 is registered already"):
        registered(TranslationDtype("bf16", "bfloat16", "again"))
    with pytest.raises(ValueError, match="float32 is registered already"):
        registered(TranslationDtype("single", "float32", "again", aliases=("float32",)))
    with pytest.raises(ValueError, match="'auto' is the choice among dtypes"):
        registered(TranslationDtype("auto", "float32", "no"))


def test_the_built_in_formats_and_their_tables():
    """The tables other modules read are views of the records."""
    assert dtype_choice.TRANSLATION_DTYPES == ("auto", "fp32", "bf16", "fp16", "int8")
    assert dict(inference.DTYPES) == {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
    assert dtypes.self_checked_names() == ("fp32", "bf16", "fp64")
    assert [fmt.name for fmt in dtypes.auto_candidates()] == ["bf16", "fp32"]
    assert DTYPE_RECORDS["int8"].devices == ("cpu",) and not DTYPE_RECORDS["int8"].compiles
