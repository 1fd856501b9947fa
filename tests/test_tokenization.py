"""Joint subword tokenizer: Marian token layout, lossless round trips, and save/load."""

from __future__ import annotations

import datasets
import pytest
from transformers import AutoTokenizer

from hf_graphtf.tokenization import iter_corpus_texts, train_joint_tokenizer

SPANISH = [
    "En el principio crió Dios los cielos y la tierra.",
    "¿Dónde está el niño? Él comió piña y jalapeños con su señora madre.",
    "Y dijo Dios: Sea la luz; y fué la luz.",
    "El corazón alegre hermosea el rostro; mas por el dolor de corazón el espíritu se abate.",
    "¡Oh Jehová, cuán grande es tu misericordia! Acuérdate de mí, pingüino de la montaña.",
    "Bienaventurados los pobres en espíritu: porque de ellos es el reino de los cielos.",
]
ENGLISH = [
    "In the beginning, God created the heavens and the earth.",
    "Where is the child? He ate pineapple and jalapeños with his mother.",
    "God said, “Let there be light,” and there was light.",
    "A glad heart makes a cheerful face, but an aching heart breaks the spirit.",
    "Oh Yahweh, how great is your loving kindness! Remember me, penguin of the mountain.",
    "Blessed are the poor in spirit, for theirs is the Kingdom of Heaven.",
]
TEXTS = [*SPANISH, *ENGLISH] * 20


@pytest.fixture(scope="module", params=["unigram", "bpe"])
def tokenizer(request):
    return train_joint_tokenizer(
        TEXTS, src_lang="es", tgt_lang="en", vocab_size=400, model=request.param, show_progress=False
    )


def test_special_tokens_follow_the_marian_layout(tokenizer):
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == ("<pad>", 0)
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == ("</s>", 1)
    assert (tokenizer.unk_token, tokenizer.unk_token_id) == ("<unk>", 2)
    assert tokenizer.model_max_length == 512
    assert 3 < len(tokenizer) <= 400


@pytest.mark.parametrize("text", [*SPANISH, *ENGLISH, "Ñandú y cigüeña: ¡Ésta es la acción!"])
def test_round_trip_recovers_the_text(tokenizer, text):
    ids = tokenizer(text)["input_ids"]
    assert ids[-1] == tokenizer.eos_token_id and ids.count(tokenizer.eos_token_id) == 1
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_targets_and_padding(tokenizer):
    batch = tokenizer(SPANISH[:2], text_target=ENGLISH[:2], padding=True)
    shorter = min(range(2), key=lambda i: sum(batch["attention_mask"][i]))
    assert batch["input_ids"][shorter][-1] == tokenizer.pad_token_id
    for labels in batch["labels"]:
        assert tokenizer.eos_token_id in labels


def test_save_and_autotokenizer_round_trip(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.init_kwargs["src_lang"] == "es" and loaded.init_kwargs["tgt_lang"] == "en"
    assert (loaded.pad_token_id, loaded.eos_token_id, loaded.unk_token_id) == (0, 1, 2)
    assert loaded.model_max_length == 512
    for text in (SPANISH[1], ENGLISH[2]):
        assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_trains_from_a_dataset_dict_train_split_only(tmp_path):
    rows = {"translation": [{"es": es, "en": en} for es, en in zip(SPANISH, ENGLISH)]}
    held_out = {"translation": [{"es": "zzqx ñoño", "en": "zzqx"}]}
    corpus = datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict(rows), "test": datasets.Dataset.from_dict(held_out)}
    )
    texts = list(iter_corpus_texts(corpus, src_lang="es", tgt_lang="en"))
    assert texts[:2] == [SPANISH[0], ENGLISH[0]] and len(texts) == 2 * len(SPANISH)
    trained = train_joint_tokenizer(
        corpus, src_lang="es", tgt_lang="en", vocab_size=300, output_dir=tmp_path / "tok", show_progress=False
    )
    assert (tmp_path / "tok" / "tokenizer.json").is_file()
    assert (tmp_path / "tok" / "tokenizer_config.json").is_file()
    assert trained.decode(trained(SPANISH[3])["input_ids"], skip_special_tokens=True) == SPANISH[3]


def test_bad_arguments():
    with pytest.raises(ValueError, match="'unigram' or 'bpe'"):
        train_joint_tokenizer(TEXTS, src_lang="es", tgt_lang="en", model="wordpiece")
    with pytest.raises(ValueError, match="vocab_size"):
        train_joint_tokenizer(TEXTS, src_lang="es", tgt_lang="en", vocab_size=3)
    with pytest.raises(TypeError, match="not a single string"):
        train_joint_tokenizer("just one string", src_lang="es", tgt_lang="en")
