"""Fine-tuning a pretrained vanilla checkpoint (an opus-mt, BART or NLLB stand-in saved locally) with the options on."""

from __future__ import annotations

import io
import json
import textwrap

import pytest
import torch
from recipe_fixtures import (
    BLOCK_PACKAGE,
    LANGUAGE_CODES,
    REPO_ROOT,
    one_thread,  # noqa: F401  (autouse fixture)
    run_python,
    tiny_recipe,
    write_opus_mt_stand_in,
    write_recipe,
)
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, MarianTokenizer, T5Config

from hf_graphtf import cli
from hf_graphtf.configuration import GRAPH_OPTION_DEFAULTS
from hf_graphtf.families import FAMILIES
from hf_graphtf.training import parse_recipe_args, run_translation
from hf_graphtf.training.pretrained import load_pretrained_with_options
from hf_graphtf.translation.file_translation import FileTranslation, PartialOutputError, translate_file
from hf_graphtf.translation.inference import TranslationLanguageError, translate_texts, use_language_codes

OPTIONS = {
    "al-both": {"attention_link": "both"},
    "graph-gate": {"graph_attention": True, "graph_fusion": "gate"},
    "al-both-learned-gate": {"attention_link": "both", "attention_link_gate": "learned"},
    "graph-shared-self_gate+al-dec": {
        "graph_attention": True,
        "graph_shared_qkv": True,
        "graph_fusion": "self_gate",
        "attention_link": "decoder",
    },
}
#: parameter names a graph layer adds next to the vanilla layer's (layer 0 stays vanilla)
GRAPH_MODULES = ("mid_attn_inc", "mid_attn_prev", "low_proj", "self_gate")


def _skip_unless_defined(family: str, options: dict) -> None:
    if options.get("graph_attention") and not FAMILIES[family].supports_graph_attention:
        pytest.skip(f"graph-group attention is not defined for {family} (pre-LN); its refusal is tested")


def _requested(**options):
    return {**GRAPH_OPTION_DEFAULTS, **options}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_pretrained_weights_land_unchanged_and_only_option_modules_are_new(stand_in, name):
    family, folder = stand_in
    _skip_unless_defined(family, OPTIONS[name])
    vanilla = AutoModelForSeq2SeqLM.from_pretrained(folder).state_dict()
    loaded_family, model = load_pretrained_with_options(str(folder), _requested(**OPTIONS[name]), "eager")
    assert loaded_family == family
    assert isinstance(model, FAMILIES[family].seq2seq_class)
    state = model.state_dict()
    for key, weight in vanilla.items():
        assert torch.equal(state[key], weight), key  # bit for bit
    new = set(state) - set(vanilla)
    if OPTIONS[name].get("graph_attention"):
        assert new and all(any(f".{m}." in key for m in GRAPH_MODULES) for key in new), sorted(new)
        assert not any(".layers.0." in key for key in new)
        for key in new:  # initialised, not left empty
            assert torch.isfinite(state[key]).all(), key
    elif OPTIONS[name].get("attention_link_gate") == "learned":
        assert new and all(key.endswith(".link_gate") and ".layers.0." not in key for key in new), sorted(new)
        assert all(torch.equal(state[key], torch.zeros_like(state[key])) for key in new)  # zeros, not memory
    else:
        assert not new, sorted(new)  # the paper's attention link adds no parameters
    for option, value in OPTIONS[name].items():
        assert getattr(model.config, option) == value


@pytest.mark.parametrize("name", ["al-both", "graph-gate"])
def test_recipe_fine_tunes_saves_and_reloads_with_and_without_the_package(stand_in, corpus, name, tmp_path):
    family, folder = stand_in
    _skip_unless_defined(family, OPTIONS[name])
    out = tmp_path / "out"
    recipe = tiny_recipe(
        corpus, out, model_name_or_path=str(folder), model_family="marian", max_steps=2, eval_steps=1, save_steps=1,
        **{"attention_link": "none", **OPTIONS[name]}, **LANGUAGE_CODES.get(family, {}),
    )  # fmt: skip
    results = run_translation(*parse_recipe_args([str(write_recipe(tmp_path / "recipe.yaml", recipe))]))
    assert results["train"]["global_step"] == 2
    assert results["model"]["family"] == family  # the checkpoint's, whatever the recipe says
    assert results["model"]["sizes"]["d_model"] == 32 and results["model"]["sizes"]["encoder_ffn_dim"] == 64
    for option, value in OPTIONS[name].items():
        assert results["model"]["options"][option] == value
    assert {"bleu", "chrf"} <= set(results["test"])
    if family == "marian":
        assert isinstance(AutoTokenizer.from_pretrained(out), MarianTokenizer)  # the checkpoint's own tokenizer
    if family in LANGUAGE_CODES:  # saved so that the model translates es->en again after reloading
        saved = AutoTokenizer.from_pretrained(out)
        assert saved.src_lang == "spa_Latn" and saved.tgt_lang == "eng_Latn"
        assert saved("El rey")["input_ids"][0] == saved.convert_tokens_to_ids("spa_Latn")
        generation = json.loads((out / "generation_config.json").read_text())
        assert generation["forced_bos_token_id"] == saved.convert_tokens_to_ids("eng_Latn")
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == f"graph_{family}"

    reloaded = AutoModelForSeq2SeqLM.from_pretrained(out, attn_implementation="eager").eval()
    inputs = AutoTokenizer.from_pretrained(out)(["El rey vio la casa."], return_tensors="pt")
    with torch.no_grad():
        expected = reloaded(**inputs, decoder_input_ids=inputs["input_ids"][:, :3]).logits
    torch.save({"inputs": dict(inputs), "expected": expected}, tmp_path / "io.pt")
    script = BLOCK_PACKAGE + textwrap.dedent(
        """
        import torch
        from transformers import AutoModelForSeq2SeqLM
        folder, io_file = sys.argv[1:3]
        data = torch.load(io_file)
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True, attn_implementation="eager")
        with torch.no_grad():
            logits = model.eval()(**data["inputs"], decoder_input_ids=data["inputs"]["input_ids"][:, :3]).logits
        assert "hf_graphtf" not in sys.modules
        assert torch.equal(logits, data["expected"]), (logits - data["expected"]).abs().max()
        """
    )
    result = run_python("-c", script, str(out), str(tmp_path / "io.pt"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


def test_half_dim_cannot_reuse_pretrained_attention(stand_in):
    family, folder = stand_in
    _skip_unless_defined(family, {"graph_attention": True})
    with pytest.raises(ValueError, match="graph_half_dim replaces the pretrained self-attention"):
        load_pretrained_with_options(str(folder), _requested(graph_attention=True, graph_half_dim=True))


def test_a_checkpoint_of_ours_keeps_its_options_and_refuses_others(stand_in, tmp_path):
    _, folder = stand_in
    _, linked = load_pretrained_with_options(str(folder), _requested(attention_link="both"))
    linked.save_pretrained(tmp_path / "linked")
    _, kept = load_pretrained_with_options(str(tmp_path / "linked"), dict(GRAPH_OPTION_DEFAULTS))
    assert kept.config.attention_link == "both"
    _, same = load_pretrained_with_options(str(tmp_path / "linked"), _requested(attention_link="both"))
    assert same.config.attention_link == "both"
    with pytest.raises(ValueError, match="attention_link: checkpoint 'both', recipe 'encoder'"):
        load_pretrained_with_options(str(tmp_path / "linked"), _requested(attention_link="encoder"))


def test_a_checkpoint_of_ours_with_every_option_off_takes_options_like_a_vanilla_one(stand_in, tmp_path):
    _, folder = stand_in
    _, plain = load_pretrained_with_options(str(folder), dict(GRAPH_OPTION_DEFAULTS))
    plain.save_pretrained(tmp_path / "plain")  # our model type, every option off
    _, linked = load_pretrained_with_options(str(tmp_path / "plain"), _requested(attention_link="both"))
    assert linked.config.attention_link == "both"


def test_other_model_types_are_refused_before_loading_weights(tmp_path):
    T5Config(d_model=8, num_layers=1, num_heads=1, d_ff=8, d_kv=8).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model type 't5' cannot be fine-tuned"):
        load_pretrained_with_options(str(tmp_path), dict(GRAPH_OPTION_DEFAULTS))


def test_committed_fine_tuning_recipe_runs_on_a_local_copy_of_the_hub_model(corpus, tmp_path):
    """The recipe as a user runs it, with the Hub id swapped for a locally saved stand-in (no network here)."""
    folder = write_opus_mt_stand_in(tmp_path / "opus-mt-es-en", corpus, "marian")
    recipe = REPO_ROOT / "recipes" / "configs" / "finetune_opus_mt_es_en_10k_al_both.yaml"
    overrides = {
        "model_name_or_path": folder, "corpus": corpus, "train_split": "train", "output_dir": tmp_path / "out",
        "max_steps": 2, "eval_steps": 1, "save_steps": 1, "per_device_train_batch_size": 8,
        "max_source_length": 32, "max_target_length": 24, "test_num_beams": 2, "use_cpu": "true",
        "disable_tqdm": "true",
    }  # fmt: skip
    argv = [str(recipe)] + [item for name, value in overrides.items() for item in (f"--{name}", str(value))]
    results = run_translation(*parse_recipe_args(argv))
    assert results["model"]["options"]["attention_link"] == "both"
    assert results["train"]["global_step"] == 2 and "bleu" in results["test"]


def test_language_codes_are_required_known_and_only_for_tokenizers_that_have_them(corpus, tmp_path):
    """NLLB marks each side with a language code: a recipe without them, or with one the tokenizer does not
    know, is refused before anything is tokenized; codes given to a tokenizer without any are refused too."""
    nllb = write_opus_mt_stand_in(tmp_path / "nllb", corpus, "m2m_100")
    marian = write_opus_mt_stand_in(tmp_path / "opus", corpus, "marian")
    cases = [
        (nllb, {}, "src_lang_code and tgt_lang_code must be set"),
        (nllb, {"src_lang_code": "spa_Latn", "tgt_lang_code": "en"}, "tgt_lang_code='en' is not a language code"),
        (marian, {"src_lang_code": "spa_Latn"}, "src_lang_code is set, but this tokenizer"),
    ]
    for index, (folder, codes, message) in enumerate(cases):
        out = tmp_path / f"out{index}"
        recipe = tiny_recipe(corpus, out, model_name_or_path=str(folder), max_steps=1, attention_link="both", **codes)
        with pytest.raises(ValueError, match=message):
            run_translation(*parse_recipe_args([str(write_recipe(tmp_path / f"recipe{index}.yaml", recipe))]))
        assert not (out / "checkpoint-1").exists()


def test_a_base_nllb_checkpoint_translates_only_into_a_named_language(corpus, tmp_path, monkeypatch, capsys):
    """A base NLLB-200 names no target language (no forced_bos_token_id): translating with it is refused, before
    decoding, until the target's code is given (--tgt-lang-code, `use_language_codes`); a fine-tuned model saved
    its codes. Codes that do not fit the tokenizer are refused too."""
    nllb = write_opus_mt_stand_in(tmp_path / "nllb", corpus, "m2m_100")
    marian = write_opus_mt_stand_in(tmp_path / "opus", corpus, "marian")

    def translate(folder, *codes: str) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO("hola mundo\n"))
        argv = ["translate", "--model", str(folder), "--max-new-tokens", "3", "--dtype", "fp32", "--quiet", *codes]
        status = cli.main(argv)
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    status, out, err = translate(nllb)
    assert status == 2 and out == "" and "names no language to translate into" in err and "--tgt-lang-code" in err
    assert translate(nllb, "--src-lang-code", "spa_Latn", "--tgt-lang-code", "eng_Latn")[0] == 0
    status, _, err = translate(nllb, "--tgt-lang-code", "en")
    assert status == 2 and "error: tgt_lang_code='en' is not a language code of this tokenizer" in err
    status, _, err = translate(marian, "--tgt-lang-code", "eng_Latn")
    assert status == 2 and "error: tgt_lang_code given, but this tokenizer (MarianTokenizer) has no language" in err

    tokenizer, model = AutoTokenizer.from_pretrained(nllb), AutoModelForSeq2SeqLM.from_pretrained(nllb)
    with pytest.raises(TranslationLanguageError, match="names no language to translate into"):
        translate_texts(tokenizer, model, ["hola"], max_new_tokens=3, progress=False)
    use_language_codes(tokenizer, model, "spa_Latn", "nya_Latn")
    spanish, chichewa = tokenizer.convert_tokens_to_ids(["spa_Latn", "nya_Latn"])
    outputs, generate = [], model.generate
    model.generate = lambda **kwargs: outputs.append((kwargs["input_ids"], generate(**kwargs))) or outputs[-1][1]
    translate_texts(tokenizer, model, ["hola mundo", "el"], max_new_tokens=3, progress=False)
    ((sources, generated),) = outputs
    assert sources[:, 0].tolist() == [spanish] * 2 and generated[:, 1].tolist() == [chichewa] * 2

    # a file job records the codes given: a partial file into English is not resumed into Chichewa
    model.generate, output, texts = generate, tmp_path / "out.txt", ["hola mundo", "el"]
    job = FileTranslation(texts, output, model=model.name_or_path, beam_size=None, max_new_tokens=3, dtype="fp32",
                          batch_size=32, language_codes={"tgt_lang_code": "eng_Latn"})  # fmt: skip
    job.resume()
    job.partial.write_text("one\n", encoding="utf-8")
    with pytest.raises(PartialOutputError, match="tgt_lang_code"):
        translate_file(tokenizer, model, texts, output, max_new_tokens=3, tgt_lang_code="nya_Latn")
    assert translate_file(tokenizer, model, texts, output, max_new_tokens=3, tgt_lang_code="eng_Latn") == 1
    assert model.generation_config.forced_bos_token_id == tokenizer.convert_tokens_to_ids("eng_Latn")


@pytest.mark.parametrize("lora_r", [0, 4])
def test_committed_nllb_recipe_runs_on_a_local_copy_of_the_hub_model(corpus, tmp_path, lora_r):
    """The NLLB recipe as a user runs it, with the Hub id swapped for a local stand-in and the toy es-en corpus
    for the Chichewa one (its columns and codes overridden as a user would); as it is, and with LoRA
    (``--lora_r``, as docs/training.md runs it)."""
    recipe = REPO_ROOT / "recipes" / "configs" / "finetune_nllb_ny_en_10k_al_both_gate.yaml"
    assert "model_name_or_path: facebook/nllb-200-distilled-600M" in recipe.read_text(encoding="utf-8")
    folder = write_opus_mt_stand_in(tmp_path / "nllb-200-distilled-600M", corpus, "m2m_100")
    overrides = {
        "model_name_or_path": folder, "corpus": corpus, "src_lang": "es", "src_lang_code": "spa_Latn",
        "train_split": "train", "output_dir": tmp_path / "out", "max_steps": 2, "eval_steps": 2, "save_steps": 2,
        "per_device_train_batch_size": 8, "max_source_length": 32, "max_target_length": 24, "test_num_beams": 2,
        "use_cpu": "true", "disable_tqdm": "true", "warmup_steps": 1,  # (step 1 runs at learning rate 0)
        "lora_r": lora_r,
    }  # fmt: skip
    argv = [str(recipe)] + [item for name, value in overrides.items() for item in (f"--{name}", str(value))]
    results = run_translation(*parse_recipe_args(argv))
    assert results["model"]["family"] == "m2m_100"
    assert results["model"]["options"]["attention_link_gate"] == "learned"
    assert results["train"]["global_step"] == 2 and "bleu" in results["test"]
    assert (results["model"]["lora"] or {}).get("r", 0) == lora_r
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out")
    gates = {name: p for name, p in model.named_parameters() if name.endswith("link_gate")}
    assert gates and any(p.abs().sum() > 0 for p in gates.values())  # trained away from zero


def test_the_learned_gate_starts_exactly_where_the_pretrained_model_was(stand_in):
    """At step 0 a vanilla checkpoint with the gated link computes the vanilla logits (bit for bit with the
    score sum; to float rounding with the concat kernel); the paper's link changes them."""
    family, folder = stand_in
    vanilla = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    batch = {"input_ids": torch.tensor([[5, 6, 7, 8, vanilla.config.eos_token_id]])}
    batch["decoder_input_ids"] = torch.tensor([[vanilla.config.decoder_start_token_id, 9, 10, 11]])
    with torch.no_grad():
        expected = vanilla(**batch).logits
        for implementation, kernel in (("eager", "auto"), ("sdpa", "auto"), ("sdpa", "concat")):
            gated = _requested(attention_link="both", attention_link_gate="learned", attention_link_kernel=kernel)
            _, model = load_pretrained_with_options(str(folder), gated, implementation)
            logits = model.eval()(**batch).logits
            if kernel == "concat":
                torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
            else:
                assert torch.equal(logits, expected), (implementation, kernel)
        _, paper = load_pretrained_with_options(str(folder), _requested(attention_link="both"), "eager")
        assert not torch.allclose(paper.eval()(**batch).logits, expected)


def test_the_gentle_start_page_is_generated_from_its_record(tmp_path):
    """docs/gentle_start.md is what recipes/experiments/gentle_start.py renders from docs/gentle_start.json."""
    page = tmp_path / "page.md"
    result = run_python(
        str(REPO_ROOT / "recipes" / "experiments" / "gentle_start.py"),
        "--render-only", "--record", str(REPO_ROOT / "docs" / "gentle_start.json"), "--page", str(page),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert page.read_text(encoding="utf-8") == (REPO_ROOT / "docs" / "gentle_start.md").read_text(encoding="utf-8")
