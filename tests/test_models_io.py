"""Saving, loading, sharing: round trips, Auto classes, remote code without the package, pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from datasets import Dataset
from model_matrix import FAMILIES, OPTION_MATRIX, PAD, source_batch, target_batch, tiny_model
from recipe_fixtures import BLOCK_PACKAGE, write_opus_mt_stand_in
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig, pipeline
from transformers.pipelines.pt_utils import KeyDataset

from hf_graphtf import TranslationPipeline
from hf_graphtf.families import FAMILIES as MODEL_FAMILIES
from hf_graphtf.transformers_seam import generate_setting, new_token_limit
from hf_graphtf.translation_pipeline import DEFAULT_MAX_NEW_TOKENS, TruncatedInputWarning, TruncatedTranslationWarning

IO_MATRIX = ["vanilla", "al-both-cum", "al-dec-cum-gate", "graph-half-shared-self_gate", "graph-gate+al-dec-cum"]


REMOTE_LOAD_SCRIPT = BLOCK_PACKAGE + textwrap.dedent(
    """
    import torch
    from transformers import AutoModelForSeq2SeqLM

    try:
        import hf_graphtf  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("hf_graphtf should not be importable here")

    checkpoint, inputs_file, output_file = sys.argv[1:4]
    model = AutoModelForSeq2SeqLM.from_pretrained(
        checkpoint, trust_remote_code=True, dtype=torch.float64, attn_implementation="eager"
    ).eval()
    assert "hf_graphtf" not in sys.modules
    inputs = torch.load(inputs_file)
    with torch.no_grad():
        logits = model(**inputs).logits
        generated = model.generate(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], max_new_tokens=6, num_beams=2
        )
    torch.save({"logits": logits, "generated": generated, "class": type(model).__name__}, output_file)
    """
)


def _inputs() -> dict[str, torch.Tensor]:
    input_ids, attention_mask = source_batch()
    return dict(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch())


@pytest.mark.parametrize("options", IO_MATRIX)
def test_save_load_round_trip(family, options, tmp_path):
    model = tiny_model(family, OPTION_MATRIX[options])
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, dtype=torch.float64, attn_implementation="eager")
    assert type(reloaded) is type(model)
    assert reloaded.config.to_diff_dict() == model.config.to_diff_dict()
    with torch.no_grad():
        torch.testing.assert_close(reloaded.eval()(**_inputs()).logits, model(**_inputs()).logits)


def test_saved_folder_carries_code_and_auto_map(family, tmp_path):
    tiny_model(family, OPTION_MATRIX["al-both"]).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    module = f"modeling_{family}"
    assert config["model_type"] == f"graph_{family}"
    assert config["auto_map"]["AutoConfig"].startswith("configuration.")
    assert config["auto_map"]["AutoModel"].startswith(f"{module}.")
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].startswith(f"{module}.")
    graph = ("graph_attention.py",) if MODEL_FAMILIES[family].supports_graph_attention else ()
    for name in (f"{module}.py", "configuration.py", "attention_link.py", *graph, "layer_blocks.py"):
        assert (tmp_path / name).exists(), name


@pytest.mark.parametrize("options", ["al-both-cum", "graph-half-shared-self_gate"])
def test_remote_code_loads_without_the_package(family, options, tmp_path):
    model = tiny_model(family, OPTION_MATRIX[options])
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    torch.save(_inputs(), tmp_path / "inputs.pt")
    script = tmp_path / "load_remote.py"
    script.write_text(REMOTE_LOAD_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"), PYTHONNOUSERSITE="1")
    result = subprocess.run(
        [sys.executable, "-I", str(script), str(checkpoint), str(tmp_path / "inputs.pt"), str(tmp_path / "out.pt")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    remote = torch.load(tmp_path / "out.pt")
    assert remote["class"] == type(model).__name__
    with torch.no_grad():
        torch.testing.assert_close(remote["logits"], model(**_inputs()).logits, rtol=1e-12, atol=1e-12)
        inputs = _inputs()
        local = model.generate(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], max_new_tokens=6, num_beams=2
        )
    assert torch.equal(remote["generated"], local)


def test_auto_classes_are_registered(family):
    config_class, model_class = FAMILIES[family]
    config = AutoConfig.for_model(f"graph_{family}", d_model=16, encoder_attention_heads=4, decoder_attention_heads=4)
    assert type(config) is config_class
    assert type(AutoModelForSeq2SeqLM.from_config(config)) is model_class
    assert type(AutoModel.from_config(config)) is MODEL_FAMILIES[family].base_model_class


_REMOTE_PIPELINE = BLOCK_PACKAGE + textwrap.dedent(
    """
    from transformers import pipeline

    translator = pipeline("translation", model=sys.argv[1], trust_remote_code=True, device="cpu")
    out = translator(["w5 w6 w7", "w8 w9"], max_new_tokens=5, num_beams=2)
    assert "hf_graphtf" not in sys.modules
    print(type(translator).__name__, len(out), type(out[0]["translation_text"]).__name__)
    """
)

_PIPELINE_TABLES = textwrap.dedent(
    """
    import json, sys
    from transformers import pipelines

    def tables():  # REMOVED_TASKS: since Transformers 5.2x
        removed = sorted(getattr(pipelines, "REMOVED_TASKS", ()))
        return {"removed": removed, "supported": sorted(pipelines.PIPELINE_REGISTRY.get_supported_tasks())}

    before = tables()
    import hf_graphtf  # noqa: F401
    print(json.dumps(before == tables()))
    """
)


def test_translation_pipeline_directly_and_from_a_checkpoint(family, tiny_tokenizer, tmp_path):
    model = tiny_model(family, OPTION_MATRIX["al-both"], dtype=torch.float32)
    translator = TranslationPipeline(model=model, tokenizer=tiny_tokenizer, device="cpu")
    out = translator(["w5 w6 w7", "w8 w9"], max_new_tokens=5, num_beams=2)
    assert len(out) == 2 and all(isinstance(o["translation_text"], str) for o in out)

    model.save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")
    assert (tmp_path / "model" / "translation_pipeline.py").is_file()
    loaded = pipeline("translation", model=str(tmp_path / "model"), trust_remote_code=True, device="cpu")
    with warnings.catch_warnings(record=True) as caught:  # remote code's warning classes: xdist cannot ship them
        warnings.simplefilter("always")
        assert loaded(["w5 w6 w7", "w8 w9"], max_new_tokens=5, num_beams=2) == out
    assert [type(w.message).__name__ for w in caught] == ["TruncatedTranslationWarning"] * 2  # random weights
    # with the package imported, no remote code at all: Transformers' pipeline() given the class to use
    local = pipeline("translation", model=str(tmp_path / "model"), pipeline_class=TranslationPipeline, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedTranslationWarning)
        assert (
            isinstance(local, TranslationPipeline)
            and local(["w5 w6 w7", "w8 w9"], max_new_tokens=5, num_beams=2) == out
        )

    script = tmp_path / "remote_pipeline.py"
    script.write_text(_REMOTE_PIPELINE)
    result = subprocess.run(
        [sys.executable, "-I", str(script), str(tmp_path / "model")], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["TranslationPipeline", "2", "str"]


@pytest.mark.parametrize("batch_size", [1, 3])
def test_the_pipeline_gives_each_input_its_own_translations(tiny_tokenizer, batch_size):
    """Several translations an input (num_return_sequences) in batches: generate() returns them input after
    input, and the pipeline's batching must split them so, not row by row."""
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32)
    translator = TranslationPipeline(model=model, tokenizer=tiny_tokenizer, device="cpu")
    texts, options = ["w5 w6 w7", "w8 w9", "w10", "w11 w12 w13 w14"], {"max_new_tokens": 4, "num_beams": 3}
    out = translator(texts, batch_size=batch_size, num_return_sequences=2, **options)
    alone = [translator(text, num_return_sequences=2, **options) for text in texts]
    assert out == alone and [len(o) for o in out] == [2] * 4
    assert [o[0] for o in out] == translator(texts, batch_size=batch_size, **options)  # the best of each


def test_the_pipeline_takes_language_codes_as_transformers_4s_did(corpus, tmp_path, tiny_tokenizer):
    """NLLB-200: the source marked with src_lang's code, the translation forced to start with tgt_lang's; a
    base checkpoint names no target (its generation config has no forced_bos_token_id), so a call without one
    is refused rather than translated into whatever language the model picks."""
    folder = write_opus_mt_stand_in(tmp_path / "nllb", corpus, "m2m_100")
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModelForSeq2SeqLM.from_pretrained(folder)
    assert model.generation_config.forced_bos_token_id is None and tokenizer.src_lang == "eng_Latn"
    spanish, english, chichewa = tokenizer.convert_tokens_to_ids(["spa_Latn", "eng_Latn", "nya_Latn"])
    calls = []
    generate = model.generate
    model.generate = lambda **kwargs: calls.append(kwargs) or generate(**kwargs)
    translator = TranslationPipeline(model=model, tokenizer=tokenizer, device="cpu")
    options = {"max_new_tokens": 3, "batch_size": 2}
    translator(["hola mundo", "el"], src_lang="spa_Latn", tgt_lang="eng_Latn", **options)
    (call,) = calls
    assert call["input_ids"][:, 0].tolist() == [spanish] * 2
    assert generate_setting(model, call, "forced_bos_token_id") == english
    assert tokenizer.src_lang == "eng_Latn"  # the tokenizer's own code again after the call

    at_init = TranslationPipeline(
        model=model, tokenizer=tokenizer, device="cpu", src_lang="spa_Latn", tgt_lang="nya_Latn"
    )
    at_init("hola", **options)
    assert calls[-1]["input_ids"][0, 0] == spanish
    assert generate_setting(model, calls[-1], "forced_bos_token_id") == chichewa

    with pytest.raises(ValueError, match="names the language to translate into.*pass tgt_lang"):
        translator("hola", **options)
    with pytest.raises(ValueError, match="tgt_lang='es' is not a language code of this tokenizer.*e.g. eng_Latn"):
        translator("hola", tgt_lang="es", **options)
    marian = TranslationPipeline(
        model=tiny_model("marian", dtype=torch.float32), tokenizer=tiny_tokenizer, device="cpu"
    )
    with pytest.raises(ValueError, match="src_lang='spa_Latn' names a language code, and this tokenizer"):
        marian("w5", src_lang="spa_Latn", **options)
    model.generation_config.forced_bos_token_id = english  # as a fine-tuned model saves it: no code needed
    translator("hola", **options)
    assert calls[-1]["input_ids"][0, 0] == tokenizer.convert_tokens_to_ids("eng_Latn")


def test_the_pipeline_leaves_blank_inputs_blank(tiny_tokenizer):
    """As translate_texts does: a model given nothing still writes something. An empty list gives an empty one."""
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32)
    translator = TranslationPipeline(model=model, tokenizer=tiny_tokenizer, device="cpu")
    options = {"max_new_tokens": 3, "batch_size": 2}
    first, second = translator(["w5 w6", "w7"], **options)
    blank = {"translation_text": ""}
    assert translator(["w5 w6", "", "w7", " \t"], **options) == [first, blank, second, blank]
    assert translator("", **options) == [{"translation_text": ""}] and translator([], **options) == []
    assert translator(["", "w7"], num_return_sequences=2, num_beams=2, **options)[0] == [{"translation_text": ""}] * 2
    texts = ["w5 w6", "", "w7", " \t"]
    with warnings.catch_warnings(record=True) as named:  # a blank input is not named as cut
        warnings.simplefilter("always", TruncatedTranslationWarning)
        translator(texts, **options)
    for streamed in ((text for text in texts), KeyDataset(Dataset.from_dict({"text": texts}), "text")):
        with warnings.catch_warnings(record=True) as named_streamed:
            warnings.simplefilter("always", TruncatedTranslationWarning)
            assert list(translator(streamed, **options)) == [[first], [blank], [second], [blank]]
        assert len(named_streamed) == len(named)
    for nothing_to_translate in ("", [], [" "]):  # a code this tokenizer lacks fails all the same
        with pytest.raises(ValueError, match="src_lang='spa_Latn' names a language code"):
            translator(nothing_to_translate, src_lang="spa_Latn", **options)


def test_the_pipeline_says_when_it_cuts_an_input(tiny_tokenizer):
    """It truncates at the tokenizer's limit, as Transformers 4's did, and warns: the cut text is not translated."""
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32)
    translator = TranslationPipeline(model=model, tokenizer=tiny_tokenizer, device="cpu")
    with pytest.warns(TruncatedInputWarning, match="an input of 9 tokens was cut to the first 5"):
        translator("w5 w6 w7 w8 w9 w10 w11 w12", max_length=5, max_new_tokens=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedInputWarning)
        translator("w5 w6 w7", max_length=5, max_new_tokens=3)  # fits: no warning


# Where a translation's length limit is set, and the limit in new tokens that generate() then decodes to
LENGTH_SETTINGS = {
    "call max_new_tokens": ({}, {}, {"max_new_tokens": 5}, 5),
    "init max_new_tokens": ({}, {"max_new_tokens": 4}, {}, 4),
    "model max_length": ({"max_length": 9}, {}, {}, 8),
    "model max_new_tokens": ({"max_new_tokens": 6}, {}, {}, 6),
    "call over model": ({"max_length": 9}, {}, {"max_new_tokens": 3}, 3),
    "call generation_config": ({"max_length": 9}, {}, {"generation_config": GenerationConfig(max_new_tokens=7)}, 7),
}


def _recording_generate(model) -> list[int]:
    """Wrap ``model.generate`` to record the new tokens of each call's output (its start token not counted)."""
    lengths, generate = [], model.generate

    def recorded(*args, **kwargs):
        output = generate(*args, **kwargs)
        lengths.append(output.shape[-1] - 1)
        return output

    model.generate = recorded
    return lengths


@pytest.mark.parametrize("setting", LENGTH_SETTINGS)
def test_the_pipeline_names_translations_cut_at_the_limit_generate_used(family, tiny_tokenizer, setting):
    model_length, init_kwargs, call_kwargs, expected = LENGTH_SETTINGS[setting]
    model = tiny_model(family, OPTION_MATRIX["al-both"], dtype=torch.float32)
    model.generation_config.update(**model_length)
    lengths = _recording_generate(model)
    translator = TranslationPipeline(model=model, tokenizer=tiny_tokenizer, device="cpu", **init_kwargs)
    never_ends = {"suppress_tokens": [model.config.eos_token_id]}
    if "generation_config" in call_kwargs:
        call_kwargs = {
            "generation_config": GenerationConfig(**call_kwargs["generation_config"].to_diff_dict(), **never_ends)
        }
    else:
        call_kwargs = {**call_kwargs, **never_ends}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = translator(["w5 w6 w7", "w8 w9", "w10"], batch_size=2, num_beams=2, **call_kwargs)
    cut = [w.message for w in caught if w.category is TruncatedTranslationWarning]
    assert lengths == [expected, expected]  # two batches, every row run to the limit
    assert [w.limit for w in cut] == [expected] * 3, [str(w) for w in cut]
    assert [repr(o["translation_text"])[:40] in str(w) for o, w in zip(out, cut)] == [True] * 3
    assert f"the length limit of {expected} new tokens" in str(cut[0]) and "larger max_new_tokens" in str(cut[0])


def test_the_pipeline_is_quiet_about_translations_that_end_and_refuses_a_limit_past_the_positions(tiny_tokenizer):
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32)
    with torch.no_grad():
        model.final_logits_bias[0, model.config.eos_token_id] = 1e4  # ends every translation at once
    translator = TranslationPipeline(model=model, tokenizer=tiny_tokenizer, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedTranslationWarning)
        assert translator(["w5 w6 w7", "w8 w9"], max_new_tokens=5) == [{"translation_text": ""}] * 2
    most = model.config.max_position_embeddings - 1
    with pytest.raises(ValueError, match=f"a length limit of {most + 1} new tokens is more than this model's decoder"):
        translator("w5 w6", max_new_tokens=most + 1)
    with pytest.warns(
        TruncatedTranslationWarning, match=f"limit of {most} new tokens .* the model's decoder reads no more"
    ):
        translator("w5 w6", max_new_tokens=most, suppress_tokens=[model.config.eos_token_id])
    assert most < DEFAULT_MAX_NEW_TOKENS  # the pipeline's default, then, is the most the decoder reads
    with pytest.warns(TruncatedTranslationWarning, match=f"limit of {most} new tokens"):
        translator("w5 w6", suppress_tokens=[model.config.eos_token_id], num_beams=1)


@pytest.mark.filterwarnings("ignore:Using the model-agnostic default")  # the case it tests
@pytest.mark.parametrize(
    "call_kwargs, expected",
    [({}, 20), ({"max_length": 8}, 7), ({"decoder_input_ids": torch.tensor([[3, 5, 6]]), "max_length": 8}, 5)],
)
def test_the_seams_length_limit_is_the_one_generate_decodes_to(call_kwargs, expected):
    """Nothing set anywhere: generate()'s global default of 20 new tokens; a max_length counts the start tokens."""
    model = tiny_model("marian", OPTION_MATRIX["al-both"], dtype=torch.float32)
    model.generation_config.max_length = model.generation_config.max_new_tokens = None
    input_ids, attention_mask = source_batch()
    never_ends = {"suppress_tokens": [model.config.eos_token_id], "pad_token_id": PAD}
    if "decoder_input_ids" in call_kwargs:
        call_kwargs = {**call_kwargs, "decoder_input_ids": call_kwargs["decoder_input_ids"].expand(2, -1)}
    start = call_kwargs.get("decoder_input_ids", torch.zeros(2, 1)).shape[-1]
    assert new_token_limit(model, call_kwargs) == expected
    with torch.no_grad():
        output = model.generate(input_ids=input_ids, attention_mask=attention_mask, **call_kwargs, **never_ends)
    assert output.shape[-1] - start == expected


def test_importing_the_package_leaves_transformers_pipeline_tables_alone(tmp_path):
    script = tmp_path / "tables.py"
    script.write_text(_PIPELINE_TABLES)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "true"


@pytest.mark.parametrize("options", ["graph-gate", "graph-self_gate", "graph-sum"])
def test_graph_gates_output(family, options):
    model = tiny_model(family, OPTION_MATRIX[options])
    input_ids, attention_mask = source_batch()
    with torch.no_grad():
        full = model(**_inputs(), output_graph_gates=True)
        encoder_only = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask, output_graph_gates=True)
        plain = model(**_inputs())
    n_graph_layers = model.config.encoder_layers - 1
    fusion = model.config.graph_fusion
    if fusion == "sum":
        assert full.encoder_graph_gates == ()
    else:
        assert len(full.encoder_graph_gates) == n_graph_layers
        width = model.config.d_model if fusion == "gate" else 4
        assert full.encoder_graph_gates[0].shape == (*input_ids.shape, width)
        for gate, same in zip(full.encoder_graph_gates, encoder_only.graph_gates, strict=True):
            torch.testing.assert_close(gate, same)
        if fusion == "self_gate":  # weights of the four groups sum to one per position
            torch.testing.assert_close(full.encoder_graph_gates[0].sum(-1), torch.ones(input_ids.shape).double())
    torch.testing.assert_close(full.logits, plain.logits)
    as_tuple = model(**_inputs(), output_graph_gates=True, return_dict=False)
    assert isinstance(as_tuple, tuple)


@pytest.mark.parametrize("positions, dim", [(1024, 512), (40, 7), (3, 2)])
def test_marians_position_table_is_transformers_own_bit_for_bit(positions, dim):
    """Loading computes Marian's table again each time (it is never saved); ours computes it without the
    Python loop, and must give exactly the table Transformers' own code gives."""
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    from hf_graphtf.transformers_seam import MarianPositionTable

    ours = MarianPositionTable(positions, dim).create_weight()
    transformers_own = MarianSinusoidalPositionalEmbedding(positions, dim).create_weight()
    assert ours.dtype == transformers_own.dtype
    assert torch.equal(ours, transformers_own)


def test_a_loaded_marian_model_uses_the_fast_table_and_has_transformers_values(tmp_path):
    from transformers import MarianMTModel

    from hf_graphtf.transformers_seam import MarianPositionTable

    tiny_model("marian", OPTION_MATRIX["al-both-cum"]).save_pretrained(tmp_path)
    ours = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    transformers_own = MarianMTModel.from_pretrained(tmp_path)
    for stack in ("encoder", "decoder"):
        table = getattr(ours.model, stack).embed_positions
        assert isinstance(table, MarianPositionTable)
        assert torch.equal(table.weight, getattr(transformers_own.model, stack).embed_positions.weight)
