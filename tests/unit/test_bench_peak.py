"""The bench's peak (tools/bench/peak.py): from the hardware where the machine reports it, raised
to the fastest kernel the bench timed, so that no fraction of peak exceeds 100%."""

from __future__ import annotations

import pytest

CPUINFO = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx fma avx2 avx512f\nbogomips\t: 5192.26\n"


def test_the_hardware_peak_is_cores_clock_width_and_says_what_it_assumed():
    from tools.bench.peak import hardware_peak

    hw = hardware_peak(2, cpuinfo=CPUINFO, lscpu="Thread(s) per core: 1\n", max_khz=None, logical_cpus=2)
    assert hw["flops"] == pytest.approx(2 * 2.59613e9 * 16 * 2 * 2)
    assert "ASSUMED" in hw["clock_source"] and "ASSUMED" in hw["fma_units_source"]
    reported = hardware_peak(8, cpuinfo=CPUINFO.replace("avx512f", ""), lscpu="CPU max MHz: 3700.0\n",
                             max_khz=None, logical_cpus=4)
    assert reported["flops"] == pytest.approx(4 * 3.7e9 * 8 * 2 * 2) and reported["clock_source"] == "lscpu CPU max MHz"
    assert hardware_peak(2, cpuinfo="flags: avx2\n", lscpu="", max_khz=None, logical_cpus=2) is None


def test_no_row_can_exceed_the_peak_a_faster_kernel_becomes_it():
    """A task measured faster than the hardware's and the matmul's peak (a Winograd convolution,
    charged the direct FLOPs) raises the peak to its own rate; the report says so, and no
    fraction of peak is above 1."""
    from tools.bench.peak import honest_peak
    from tools.bench.report import _peak_lines, add_fractions, named_records, side_record

    tasks = {"standard_epoch": {"engine": side_record(1000, 1.0, 4e8, "fp32"),  # 400 GFLOP/s
                                "reference": side_record(1000, 2.0, 4e8, "fp32")},
             "pgd20_eval": {"failed": True, "error": "x"}}
    measured = {"flops": {"fp32": 230e9}, "method": "matmul"}
    hardware = {"flops": 332e9, "method": "2 cores x ..."}
    peak = honest_peak(measured, hardware, named_records(tasks))
    assert peak["flops"]["fp32"] == pytest.approx(400e9) and peak["source"]["fp32"] == "task"
    assert peak["raised_by"]["fp32"]["task"] == "standard_epoch" and peak["matmul"] == {"fp32": 230e9}
    add_fractions(tasks, peak["flops"])
    assert tasks["standard_epoch"]["engine"]["fraction_of_peak"] == pytest.approx(1.0)
    assert all(r["fraction_of_peak"] <= 1 for r in named_records(tasks))
    assert any("its kernel is the peak" in line for line in _peak_lines(peak))
    # slower tasks: the hardware's peak, the higher of the two known ones
    slow = {"standard_epoch": {"engine": side_record(1000, 10.0, 4e8, "fp32"),
                               "reference": side_record(1000, 20.0, 4e8, "fp32")}}
    peak = honest_peak(measured, hardware, named_records(slow))
    assert peak["source"]["fp32"] == "hardware" and peak["flops"]["fp32"] == 332e9 and not peak["raised_by"]
