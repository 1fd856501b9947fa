"""The translation wing: what turns a saved model into translations and does not travel with checkpoints.

Its first occupant is `runtimes`, the ONNX Runtime and OpenVINO engines built on Transformers' own exporters;
the rest of the wing (formats, engines, loading, batching, file translation, AOTInductor export) still sits at
the package's top level and is to move here (docs/internals.md, "Runtime engines: ONNX Runtime and OpenVINO").
The model modules and ``translation_pipeline`` stay flat: they travel with a checkpoint for ``trust_remote_code``.
"""
