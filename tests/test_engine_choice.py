"""``--engine auto`` and a left-out ``--dtype`` (`translation.engine_choice`): the model's exported packages,
ordered by what the host's CPU has, with the line saying the choice and why. No package is built here: the
folders hold the manifests the engines look for, and the decoding itself is the slow runtime tests' part."""

from __future__ import annotations

import json

import pytest

from hf_graphtf.translation import engine_choice, runtimes
from hf_graphtf.translation.engine_choice import Host, dtype_order, engine_order, pick_package, resolve_setup
from hf_graphtf.translation.packages import MANIFEST, export_dir

AMD_AVX512 = Host(frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}), "AuthenticAMD")
INTEL_AMX = Host(frozenset({"avx2", "avx512f", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile"}), "GenuineIntel")
AVX2_ONLY = Host(frozenset({"sse2", "avx2", "fma"}), "GenuineIntel")


def test_the_dtype_the_cpu_computes_in_hardware_comes_first():
    everything = ["fp32", "bf16", "int8"]
    assert dtype_order(AMD_AVX512, everything) == ["int8", "bf16", "fp32"]
    assert dtype_order(INTEL_AMX, everything) == ["int8", "bf16", "fp32"]
    assert dtype_order(Host(frozenset({"avx512_bf16"}), ""), everything) == ["bf16", "fp32", "int8"]
    # without int8 dot products or bf16 ones: fp32, then int8 (integer products still), then emulated bf16
    assert dtype_order(AVX2_ONLY, everything) == ["fp32", "int8", "bf16"]
    assert dtype_order(AVX2_ONLY, ["bf16", "int8"]) == ["int8", "bf16"]
    assert AVX2_ONLY.computes("int8") == (False, "no avx512_vnni/avx_vnni/amx_int8 on this CPU")


def test_aoti_comes_first_then_the_cpu_vendors_runtime():
    registered = ["aoti", "onnx", "openvino"]
    assert engine_order(AMD_AVX512, registered) == ["aoti", "onnx", "openvino"]
    assert engine_order(INTEL_AMX, registered) == ["aoti", "openvino", "onnx"]
    assert engine_order(INTEL_AMX, ["onnx", "openvino"]) == ["openvino", "onnx"]
    assert engine_order(Host(frozenset(), ""), ["onnx", "openvino"]) == ["onnx", "openvino"]


def test_the_host_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx2 avx512_vnni\n", encoding="utf-8")
    assert Host.read(cpuinfo) == Host(frozenset({"fpu", "sse2", "avx2", "avx512_vnni"}), "AuthenticAMD")
    assert Host.read(tmp_path / "absent") == Host(frozenset(), "")


def _runtime_export(folder, engine: str, dtype: str) -> None:
    target = runtimes.runtime_dir(folder, engine, dtype)
    target.mkdir(parents=True)
    (target / runtimes.EXPORTERS_MANIFEST).write_text("{}", encoding="utf-8")


@pytest.fixture
def model_folder(tmp_path, monkeypatch):
    """A folder with an onnx int8 and fp32 export and an openvino fp32 one, on a host with both runtimes."""
    real = runtimes.importlib.util.find_spec
    monkeypatch.setattr(runtimes.importlib.util, "find_spec", lambda name, *a: real(name, *a) or object())
    folder = tmp_path / "model"
    folder.mkdir()
    for engine, dtype in (("onnx", "int8"), ("onnx", "fp32"), ("openvino", "fp32")):
        _runtime_export(folder, engine, dtype)
    return folder


def _host(monkeypatch, host: Host) -> None:
    monkeypatch.setattr(Host, "read", classmethod(lambda cls, cpuinfo=None: host))


def test_a_left_out_dtype_takes_the_models_best_package_and_says_why(model_folder, monkeypatch):
    _host(monkeypatch, AMD_AVX512)
    pick = pick_package(model_folder)
    assert (pick.dtype, pick.engines) == ("int8", ("onnx",))
    assert pick.reason == (
        "translating in int8, as the model's onnx export (int8 first: avx512_vnni; also there: onnx fp32, "
        "openvino fp32)"
    )
    _host(monkeypatch, AVX2_ONLY)
    pick = pick_package(model_folder)
    assert (pick.dtype, pick.engines) == ("fp32", ("openvino", "onnx"))
    assert pick.reason.startswith("translating in fp32, as the model's openvino and onnx exports (the dtype of its")
    assert "openvino first on this GenuineIntel CPU: its vendor's runtime" in pick.reason
    assert pick_package(model_folder, engine="openvino").engines == ("openvino",)  # a named engine: its own


def test_the_setup_carries_the_pick_and_only_auto_is_replaced(model_folder, monkeypatch):
    _host(monkeypatch, AMD_AVX512)
    setup = resolve_setup("auto", "cpu", model_folder)
    assert (setup.dtype, setup.requested, setup.engines) == ("int8", "auto", ("onnx",))
    assert setup.reason.startswith("translating in int8, as the model's onnx export")
    for requested, engine, compile in (("fp32", "auto", "off"), ("auto", "eager", "off"), ("auto", "auto", "on")):
        setup = resolve_setup(requested, "cpu", model_folder, engine=engine, compile=compile)
        assert setup.engines == () and setup.dtype != "int8", (requested, engine, compile)


def test_a_folder_without_packages_translates_in_autos_float(tmp_path, monkeypatch):
    _host(monkeypatch, AMD_AVX512)
    (tmp_path / "model").mkdir()
    assert pick_package(tmp_path / "model") is None
    assert pick_package("Helsinki-NLP/opus-mt-es-en") is None  # a Hub id holds no package
    setup = resolve_setup("auto", "cpu", tmp_path / "model")
    assert setup.dtype in ("fp32", "bf16") and setup.engines == ()


def test_a_runtime_not_installed_does_not_count(model_folder, monkeypatch):
    _host(monkeypatch, AMD_AVX512)
    real = runtimes.importlib.util.find_spec
    monkeypatch.setattr(
        runtimes.importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a)
    )
    pick = pick_package(model_folder)
    assert (pick.dtype, pick.engines) == ("fp32", ("openvino",))


def test_an_aoti_package_the_folder_carries_counts_only_where_trusted(tmp_path, monkeypatch):
    """A carried AOTInductor package is code: it is a candidate only where the user trusts it (or built it),
    and choosing opens nothing."""
    from hf_graphtf.translation import package_store

    _host(monkeypatch, AMD_AVX512)
    monkeypatch.setenv(package_store.CACHE_ENV, str(tmp_path / "store"))
    monkeypatch.delenv(package_store.TRUST_ENV, raising=False)
    folder = tmp_path / "model"
    carried = export_dir(folder, "int8")
    carried.mkdir(parents=True)
    (carried / MANIFEST).write_text(json.dumps({"dtype": "int8"}), encoding="utf-8")
    assert pick_package(folder) is None
    assert pick_package(folder, trust_exported=True) == engine_choice.PackagePick(
        "int8", ("aoti",), "translating in int8, as the model's aoti export (int8 first: avx512_vnni)"
    )
    monkeypatch.setenv(package_store.TRUST_ENV, "1")
    assert pick_package(folder).engines == ("aoti",)
