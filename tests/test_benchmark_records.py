"""What the benchmarks record of the machine (`benchmarks/common.py`)."""

from benchmarks import common

# The first processor of /proc/cpuinfo on two 2-core machines of this
# workplace, cut to the fields `cpu_info` reads and a few around them.
EPYC = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 26
model		: 2
model name	: AMD EPYC
stepping	: 1
flags		: fpu fma avx2 avx512f avx512_vnni avx512_bf16 avx512_vp2intersect

processor	: 1
vendor_id	: AuthenticAMD
cpu family	: 26
model		: 2
model name	: AMD EPYC
"""
XEON = """processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 143
model name	: Intel(R) Xeon(R) Processor
flags		: fma avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""
# An Arm machine's: no family, model or flags lines.
ARM = """processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32
CPU implementer	: 0x41
"""


def write(tmp_path, text):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


def test_the_family_and_model_number_tell_like_named_machines_apart(
    tmp_path,
):
    machine = common.cpu_info(write(tmp_path, EPYC))
    assert (machine["model"], machine["family"], machine["model_number"]) == (
        "AMD EPYC",
        26,
        2,
    )
    assert machine["flags"] == [
        "fma",
        "avx2",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
    ]
    assert machine["native_bfloat16"]
    assert common.cpu_name(machine) == "AMD EPYC (family 26, model 2)"


def test_amx_flags_and_intel_model_numbers_are_recorded(tmp_path):
    machine = common.cpu_info(write(tmp_path, XEON))
    assert (machine["family"], machine["model_number"]) == (6, 143)
    assert {"amx_bf16", "amx_tile", "amx_int8"} <= set(machine["flags"])
    assert common.cpu_name(machine) == (
        "Intel(R) Xeon(R) Processor (family 6, model 143)"
    )


def test_a_cpuinfo_without_family_or_flags_records_none(tmp_path):
    machine = common.cpu_info(write(tmp_path, ARM))
    assert machine["family"] is None and machine["model_number"] is None
    assert machine["flags"] == [] and not machine["native_bfloat16"]
    assert common.cpu_name(machine) == machine["model"]


def test_an_unreadable_cpuinfo_records_none(tmp_path):
    machine = common.cpu_info(tmp_path / "missing")
    assert machine["family"] is None and machine["flags"] == []
