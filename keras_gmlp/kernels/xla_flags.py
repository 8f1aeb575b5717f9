"""XLA:CPU's settings for TensorFlow's XLA functions."""

import os

import keras

# Set to "0", it turns `prefer_wide_vectors` off.
ENV_VARIABLE = "KERAS_GMLP_WIDE_VECTORS"
WIDE_VECTORS_FLAG = "--xla_cpu_prefer_vector_width=512"
# Set to "1", it turns `skip_ynn_fusions` off.
YNN_ENV_VARIABLE = "KERAS_GMLP_YNN_FUSIONS"
NO_YNN_FUSIONS_FLAG = "--xla_cpu_experimental_ynn_fusion_type="


def prefer_wide_vectors(cpuinfo_path="/proc/cpuinfo"):
    """Makes XLA:CPU write TensorFlow's XLA functions with 512-bit vectors
    on a CPU with AVX-512.

    XLA:CPU vectorises with 256-bit registers unless told otherwise
    (`--xla_cpu_prefer_vector_width`). Under TensorFlow the layers' XLA
    functions (the GELUs, the norms, the spatial gating unit's training
    gate) are the element-wise third of a training step; with 512-bit
    vectors float32 gMLP-Ti/16 training at batch 32 runs 1.07x faster on
    an AMD EPYC with AVX-512 (`benchmarks/vision.py`). This function
    appends the flag to `XLA_FLAGS` unless that already sets the width.
    Under JAX, whose steps do not gain from it, and under torch, on a CPU
    without AVX-512, or with `KERAS_GMLP_WIDE_VECTORS=0` in the
    environment, it does nothing. The
    `keras-gmlp` command and the recipes call it before training. Call it
    before TensorFlow's first XLA compilation, which reads `XLA_FLAGS`
    once.

    Args:
        cpuinfo_path: path of a Linux `/proc/cpuinfo`-format file.

    Returns:
        bool. Whether the flag was added.

    Example:

    ```python
    from keras_gmlp.kernels import prefer_wide_vectors

    prefer_wide_vectors()  # first: before the first XLA function runs
    ```
    """
    from keras_gmlp.kernels.cpu_features import has_avx512

    if keras.config.backend() != "tensorflow":
        return False
    if os.environ.get(ENV_VARIABLE) == "0" or not has_avx512(cpuinfo_path):
        return False
    return _append_flag(WIDE_VECTORS_FLAG)


def skip_ynn_fusions():
    """Keeps XLA:CPU from handing TensorFlow's XLA functions' reductions to
    YNNPACK.

    TensorFlow 2.21's XLA:CPU writes some reductions (a masked LM's loss
    over the vocabulary, the bias gradients' sums) as YNNPACK fusions,
    each built into an executable when it first runs. On an AMD EPYC of
    family 25 about one TensorFlow masked-LM process in 30 dies of a
    segmentation fault in that building (`EmitYnnSubgraph`, growing a
    vector) while another thread runs a YNNPACK reduction, gMLP and
    keras-hub's BERT alike. With `--xla_cpu_experimental_ynn_fusion_type=`
    (no fusion kind) XLA:CPU writes those reductions itself and builds no
    YNNPACK executable, and the steps run as fast. This function
    appends that flag to `XLA_FLAGS` unless that already names the
    fusion kinds. Under JAX (whose processes do not fault, and whose
    bfloat16 step is slower without YNNPACK's reductions) and
    torch, or with `KERAS_GMLP_YNN_FUSIONS=1` in the environment, it
    does nothing. The `keras-gmlp` command and the recipes call it before
    training. Call it before TensorFlow's first XLA compilation, which
    reads `XLA_FLAGS` once.

    Returns:
        bool. Whether the flag was added.

    Example:

    ```python
    from keras_gmlp.kernels import skip_ynn_fusions

    skip_ynn_fusions()  # first: before the first XLA function runs
    ```
    """
    if keras.config.backend() != "tensorflow":
        return False
    if os.environ.get(YNN_ENV_VARIABLE) == "1":
        return False
    return _append_flag(NO_YNN_FUSIONS_FLAG)


def set_job_xla_flags(cpuinfo_path="/proc/cpuinfo"):
    """Sets XLA:CPU's flags for TensorFlow's XLA functions as the jobs set
    them: `prefer_wide_vectors()` (512-bit vectors on a CPU with AVX-512)
    and `skip_ynn_fusions()` (no YNNPACK fusions). A new flag for the jobs
    goes here, so the command, the recipes and the benchmarks that run
    "as the jobs do" all take it.

    Each does nothing under JAX and torch, or where its environment
    variable turns it off (their docstrings). Call it before TensorFlow's
    first XLA compilation, which reads `XLA_FLAGS` once.

    Args:
        cpuinfo_path: path of a Linux `/proc/cpuinfo`-format file, for
            `prefer_wide_vectors`.

    Returns:
        tuple of str. The flags added to `XLA_FLAGS`.

    Example:

    ```python
    from keras_gmlp.kernels import set_job_xla_flags

    set_job_xla_flags()  # first: before the first XLA function runs
    ```
    """
    added = []
    if prefer_wide_vectors(cpuinfo_path):
        added.append(WIDE_VECTORS_FLAG)
    if skip_ynn_fusions():
        added.append(NO_YNN_FUSIONS_FLAG)
    return tuple(added)


def _append_flag(flag):
    """Appends `flag` (`--option=value`) to `XLA_FLAGS` unless that sets
    its option already; returns whether it did."""
    option = flag.split("=", 1)[0]
    flags = os.environ.get("XLA_FLAGS", "")
    if option in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
    return True
