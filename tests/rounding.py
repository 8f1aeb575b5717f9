"""Values rounded to a dtype, as float64 numpy, for tolerances of one
rounding."""

import keras


def as_float64(values):
    """A tensor or array as float64 numpy (through float32)."""
    return keras.ops.convert_to_numpy(keras.ops.cast(values, "float32")).astype(
        "float64"
    )


def rounded(values, dtype):
    """numpy values rounded to `dtype`, back in float64."""
    tensor = keras.ops.convert_to_tensor(values)
    return as_float64(keras.ops.cast(tensor, dtype))
