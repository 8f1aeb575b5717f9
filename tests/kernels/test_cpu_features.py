"""`keras_gmlp.kernels.cpu_features`: what it reads of the CPU."""

from keras_gmlp.kernels.cpu_features import cpu_family
from keras_gmlp.kernels.cpu_features import has_amx
from keras_gmlp.kernels.cpu_features import has_avx512
from keras_gmlp.kernels.cpu_features import is_amd

XEON = """processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model name	: Intel(R) Xeon(R) Processor
flags		: fpu fma avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""
EPYC = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 26
model name	: AMD EPYC
flags		: fpu fma avx2 avx512f avx512_vnni avx512_bf16
"""
# AMX's tiles for int8 only, and a flag that only contains the name.
INT8_ONLY = """processor	: 0
vendor_id	: AuthenticAMDish
cpu family	: 25x
flags		: fpu avx512f amx_tile amx_int8 not_amx_bf16
"""
ARM = """processor	: 0
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32
"""
# AVX-512's extensions without its foundation's own flag.
AVX2 = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
flags		: fpu fma avx2 avx512_bf16x avx_vnni
"""


CPUS = {
    "xeon": XEON,
    "epyc": EPYC,
    "int8": INT8_ONLY,
    "arm": ARM,
    "avx2": AVX2,
}


def answers(read, tmp_path):
    """`read` of a written cpuinfo file of each of `CPUS`."""
    found = {}
    for name, text in CPUS.items():
        path = tmp_path / name
        path.write_text(text)
        found[name] = read(str(path))
    return found


def test_amx_bfloat16_is_read_from_the_flags(tmp_path):
    assert answers(has_amx, tmp_path) == {
        "xeon": True,
        "epyc": False,
        "int8": False,
        "arm": False,
        "avx2": False,
    }


def test_avx512_is_read_from_the_flags(tmp_path):
    assert answers(has_avx512, tmp_path) == {
        "xeon": True,
        "epyc": True,
        "int8": True,
        "arm": False,
        "avx2": False,
    }


def test_the_vendor_is_read_from_its_line(tmp_path):
    # The int8 CPU's vendor line only starts with AMD's name.
    assert answers(is_amd, tmp_path) == {
        "xeon": False,
        "epyc": True,
        "int8": False,
        "arm": False,
        "avx2": True,
    }


def test_the_family_is_read_from_its_line(tmp_path):
    # A malformed family reads as none.
    assert answers(cpu_family, tmp_path) == {
        "xeon": 6,
        "epyc": 26,
        "int8": 0,
        "arm": 0,
        "avx2": 25,
    }


def test_an_unreadable_cpuinfo_has_no_amx(tmp_path):
    assert has_amx(str(tmp_path / "missing")) is False
    assert is_amd(str(tmp_path / "missing")) is False
    assert has_avx512(str(tmp_path / "missing")) is False
    assert cpu_family(str(tmp_path / "missing")) == 0
