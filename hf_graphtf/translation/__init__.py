"""The translation wing: what turns a saved model into translations and does not travel with checkpoints.

- `dtypes` (the ``--dtype`` records) and `dtype_choice` (``auto``'s rule, compiled decoding);
- `loading` (the eager load) and `inference` (`load_model` with its engine, batched decoding, references);
- `engines` (one record per ``--engine``) and `engine_choice` (which package ``auto`` takes, by the host's CPU);
- `packages` (what the engines' folders share), `aoti` with `package_store` (AOTInductor packages: code),
  `runtimes` (ONNX Runtime and OpenVINO through Transformers' exporters: data), `export_graphs` and
  `exported_decoding` (the two graphs, and how `generate` runs them);
- `file_translation` (resumable file jobs) and `int8_linear` (int8 products scaled per row).

Imports run one way, down this list's dependencies, with no circle (tests/test_translation_wing.py). The model
modules and ``translation_pipeline`` stay at the package's top level: they travel with a checkpoint for
``trust_remote_code``. The old flat paths (``hf_graphtf.inference``, ...) forward here until 0.3 (`_moved`).
"""
