"""What the CPU offers the layers' kernel choices."""

import functools
import pathlib


@functools.cache
def has_amx(cpuinfo_path="/proc/cpuinfo"):
    """Whether the CPU has AMX's bfloat16 tiles (`amx_bf16` among the
    flags of `cpuinfo_path`).

    TensorFlow's oneDNN runs a plain bfloat16 `MatMul` on AMX, but the
    product fused with its bias and GELU on `inner_product`, which does
    not use AMX; a CPU with AVX512-BF16 and no AMX runs both on the same
    units. So the spatial gating unit's TensorFlow bfloat16 inference
    gate, which leaves the products plain, is taken only where this is
    true (`SpatialGatingUnit.takes_tensorflow_inference_gate`). Where
    `cpuinfo_path` cannot be read (not Linux), `False`.

    Args:
        cpuinfo_path: path of a Linux `/proc/cpuinfo`-format file.

    Returns:
        bool.

    Example:

    >>> from keras_gmlp.kernels.cpu_features import has_amx
    >>> isinstance(has_amx(), bool)
    True
    """
    return "amx_bf16" in _first_value(cpuinfo_path, "flags").split()


@functools.cache
def is_amd(cpuinfo_path="/proc/cpuinfo"):
    """Whether the CPU is AMD's (`vendor_id` `AuthenticAMD` in
    `cpuinfo_path`).

    There Intel's MKL, which torch's CPU wheels call for float32
    matmuls, takes a path slower than oneDNN's, which the same wheels
    carry (`keras_gmlp.kernels.torch_linear`). Where `cpuinfo_path` cannot
    be read (not Linux), `False`.

    Args:
        cpuinfo_path: path of a Linux `/proc/cpuinfo`-format file.

    Returns:
        bool.

    Example:

    >>> from keras_gmlp.kernels.cpu_features import is_amd
    >>> isinstance(is_amd(), bool)
    True
    """
    return _first_value(cpuinfo_path, "vendor_id") == "AuthenticAMD"


@functools.cache
def has_avx512(cpuinfo_path="/proc/cpuinfo"):
    """Whether the CPU has AVX-512's foundation (`avx512f` among the flags
    of `cpuinfo_path`), where XLA:CPU can write 512-bit vectors
    (`keras_gmlp.kernels.prefer_wide_vectors`). Where `cpuinfo_path`
    cannot be read (not Linux), `False`.

    Args:
        cpuinfo_path: path of a Linux `/proc/cpuinfo`-format file.

    Returns:
        bool.

    Example:

    >>> from keras_gmlp.kernels.cpu_features import has_avx512
    >>> isinstance(has_avx512(), bool)
    True
    """
    return "avx512f" in _first_value(cpuinfo_path, "flags").split()


@functools.cache
def cpu_family(cpuinfo_path="/proc/cpuinfo"):
    """The CPU's family number (`cpu family` in `cpuinfo_path`; 0 where
    there is none or the file cannot be read).

    On AMD's, family 26 (Zen 5) runs AVX-512 at its full width, family 25
    (Zen 4) on two 256-bit halves. torch's token product takes oneDNN
    from family 26 only (`keras_gmlp.kernels.torch_linear
    .takes_onednn_over_tokens`).

    Args:
        cpuinfo_path: path of a Linux `/proc/cpuinfo`-format file.

    Returns:
        int.

    Example:

    >>> from keras_gmlp.kernels.cpu_features import cpu_family
    >>> cpu_family() >= 0
    True
    """
    value = _first_value(cpuinfo_path, "cpu family")
    return int(value) if value.isdigit() else 0


def _first_value(cpuinfo_path, key):
    """The value of the first `key` line of `cpuinfo_path`, stripped; `""`
    where there is none or the file cannot be read."""
    try:
        text = pathlib.Path(cpuinfo_path).read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return ""
