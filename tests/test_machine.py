"""The machine record that tells whether two CPU runs can be bit-identical."""

from __future__ import annotations

import platform

import torch

from hf_graphtf.machine import cpu_model, float_fingerprint


def test_the_float_fingerprint_is_one_threads_and_leaves_the_caller_as_it_was():
    """The grid runner takes it in a parent process with any thread count; the digest must not depend
    on that, nor disturb the caller's threads or random state."""
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one_thread = float_fingerprint()
        torch.set_num_threads(2)
        torch.manual_seed(7)
        expected_draw = torch.rand(3)
        torch.manual_seed(7)
        assert float_fingerprint() == one_thread
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.rand(3), expected_draw)
    finally:
        torch.set_num_threads(threads)
    assert len(one_thread) == 16 and int(one_thread, 16) >= 0


def test_the_cpu_model_is_named(tmp_path):
    """The name from /proc/cpuinfo's first ``model name`` line; where there is none (another OS, an
    ARM kernel that names no model) or no readable file, what ``platform`` knows."""
    assert cpu_model().strip()
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Example CPU @ 2.10GHz\nprocessor\t: 1\nmodel name\t: Other\n",
        encoding="utf-8",
    )
    assert cpu_model(cpuinfo) == "Example CPU @ 2.10GHz"
    cpuinfo.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n", encoding="utf-8")
    assert cpu_model(cpuinfo) == (platform.processor() or platform.machine())
    assert cpu_model(tmp_path / "absent") == (platform.processor() or platform.machine())
