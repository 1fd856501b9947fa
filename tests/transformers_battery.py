"""Transformers' own model test battery (`ModelTesterMixin`) over this package's option matrix.

Transformers tests every model with the mixin in its ``tests/test_modeling_common.py``, which its sdist
ships; the mixin's own helpers from other test folders (export and generation mixins) are not in the
sdist and are not needed here, so they are stood in for by empty classes. `battery_case(family,
options)` builds one `unittest.TestCase` class per variant, with a tester that makes tiny configs and
inputs the way Transformers' Marian, BART and M2M100 testers do. The slow suite runs it
(``tests/test_transformers_battery.py``) and requires every variant to pass wherever vanilla does.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tarfile
import tempfile
import types
import unittest
from pathlib import Path

import torch
import transformers

CACHE = Path.home() / ".cache" / "hf_graphtf" / f"transformers-{transformers.__version__}-tests"
COMMON_FILES = ("test_modeling_common.py", "test_configuration_common.py")


def common_tests_folder() -> Path:
    """The sdist's top-level test files for the installed Transformers version (downloaded once, from PyPI)."""
    if all((CACHE / name).is_file() for name in COMMON_FILES):
        return CACHE
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"transformers=={transformers.__version__}", "-d", folder],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        (archive,) = Path(folder).glob("transformers-*.tar.gz")
        CACHE.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if Path(member.name).parent.name == "tests" and name in COMMON_FILES:
                    (CACHE / name).write_bytes(tar.extractfile(member).read())
    return CACHE


def import_model_tester_mixin() -> type:
    """`ModelTesterMixin` from the sdist's test file, imported as the package ``tf_common``."""
    if "tf_common.test_modeling_common" in sys.modules:
        return sys.modules["tf_common.test_modeling_common"].ModelTesterMixin
    folder = common_tests_folder()
    package = types.ModuleType("tf_common")
    package.__path__ = [str(folder)]
    sys.modules["tf_common"] = package
    stubs = (("exporters.test_export", "ExportTesterMixin"), ("generation.test_utils", "GenerationTesterMixin"))
    for stub, mixin in stubs:
        parent = f"tf_common.{stub.split('.')[0]}"
        sys.modules.setdefault(parent, types.ModuleType(parent)).__path__ = []
        module = types.ModuleType(f"tf_common.{stub}")
        setattr(module, mixin, type(mixin, (), {}))
        sys.modules[f"tf_common.{stub}"] = module
    return importlib.import_module("tf_common.test_modeling_common").ModelTesterMixin


class GraphModelTester:
    """Tiny configs and inputs, as Transformers' Marian/BART/M2M100 testers make them."""

    batch_size, seq_length, vocab_size, hidden_size = 4, 7, 99, 16
    num_hidden_layers, num_attention_heads, intermediate_size = 2, 4, 4
    is_training = True

    def __init__(self, parent: unittest.TestCase, config_class: type, options: dict):
        self.parent, self.config_class, self.options = parent, config_class, options
        self.encoder_seq_length = self.decoder_seq_length = self.seq_length

    def get_config(self):
        return self.config_class(
            vocab_size=self.vocab_size, d_model=self.hidden_size, encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers, encoder_attention_heads=self.num_attention_heads,
            decoder_attention_heads=self.num_attention_heads, encoder_ffn_dim=self.intermediate_size,
            decoder_ffn_dim=self.intermediate_size, max_position_embeddings=20, eos_token_id=2, pad_token_id=1,
            bos_token_id=0, decoder_start_token_id=2, dropout=0.1, attention_dropout=0.1, **self.options,
        )  # fmt: skip

    def prepare_config_and_inputs_for_common(self):
        input_ids = torch.randint(3, self.vocab_size, (self.batch_size, self.seq_length))
        input_ids[:, -1] = 2  # eos
        decoder_input_ids = torch.randint(3, self.vocab_size, (self.batch_size, self.seq_length))
        inputs = {
            "input_ids": input_ids,
            "decoder_input_ids": decoder_input_ids,
            "attention_mask": input_ids.ne(1),
            "decoder_attention_mask": decoder_input_ids.ne(1),
        }
        return self.get_config(), inputs


def battery_case(family: str, name: str, options: dict) -> type:
    """A `unittest.TestCase` running `ModelTesterMixin` on one family and option setting."""
    from hf_graphtf.families import FAMILIES

    config_class = FAMILIES[family].config_class
    base_class, seq2seq_class = FAMILIES[family].base_model_class, FAMILIES[family].seq2seq_class
    mixin = import_model_tester_mixin()

    def set_up(self):
        self.model_tester = GraphModelTester(self, config_class, options)

    return type(
        f"Battery_{family}_{name}",
        (mixin, unittest.TestCase),
        {
            "all_model_classes": (base_class, seq2seq_class),
            "is_encoder_decoder": True,
            "has_attentions": True,
            "test_resize_embeddings": True,
            "setUp": set_up,
        },
    )
