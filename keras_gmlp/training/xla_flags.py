"""XLA:CPU's code generation settings for TensorFlow's XLA functions."""

import os

import keras

# Set to "0", it turns `prefer_wide_vectors` off.
ENV_VARIABLE = "KERAS_GMLP_WIDE_VECTORS"
WIDE_VECTORS_FLAG = "--xla_cpu_prefer_vector_width=512"


def prefer_wide_vectors(cpuinfo_path="/proc/cpuinfo"):
    """Makes XLA:CPU write TensorFlow's XLA functions with 512-bit vectors
    on a CPU with AVX-512.

    XLA:CPU vectorises with 256-bit registers unless told otherwise
    (`--xla_cpu_prefer_vector_width`). Under TensorFlow the layers' XLA
    functions (the GELUs, the norms, the spatial gating unit's training
    gate) are the element-wise third of a training step; with 512-bit
    vectors, on an idle 2-core AMD EPYC with AVX-512 at batch 32, float32
    training steps ran 1.07x (gMLP-Ti/16) and 1.04x (gMLP-S/16) as fast,
    `mixed_bfloat16` ones 0.99x and 1.02x, the `gmlp_tiny` masked LM's
    1.05x and 1.01x at n = 128 and 512 (`benchmarks/xla_vector_width.py`,
    each form in processes of its own). This function appends the flag to
    `XLA_FLAGS` unless that already sets the width. Under JAX, whose
    steps did not move with it (stop 44, `benchmarks/README.md`), and
    under torch, on a CPU without AVX-512, or with
    `KERAS_GMLP_WIDE_VECTORS=0` in the environment, it does nothing. The
    `keras-gmlp` command and the recipes call it before training. Call it
    before TensorFlow's first XLA compilation, which reads `XLA_FLAGS`
    once.

    Args:
        cpuinfo_path: path of a Linux `/proc/cpuinfo`-format file.

    Returns:
        bool. Whether the flag was added.

    Example:

    ```python
    from keras_gmlp.training import prefer_wide_vectors

    prefer_wide_vectors()  # first: before the first XLA function runs
    ```
    """
    from keras_gmlp.layers.cpu_features import has_avx512

    if keras.config.backend() != "tensorflow":
        return False
    if os.environ.get(ENV_VARIABLE) == "0" or not has_avx512(cpuinfo_path):
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_cpu_prefer_vector_width" in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {WIDE_VECTORS_FLAG}".strip()
    return True
