import keras
import numpy as np
from keras import ops

from keras_gmlp.models.gmlp_task import GMLPTask


def is_token_ids(inputs):
    """Whether `inputs` is an integer array of token ids (not a dict)."""
    if isinstance(inputs, (list, tuple)):
        inputs = np.asarray(inputs)
    dtype = getattr(inputs, "dtype", None)
    if dtype is None:
        return False
    try:
        dtype = keras.backend.standardize_dtype(dtype)
    except ValueError:
        return False
    return "int" in dtype


def as_tensor(x):
    """`x` as a backend tensor, unless it is symbolic."""
    if isinstance(x, keras.KerasTensor):
        return x
    return ops.convert_to_tensor(x)


class GMLPTextTask(GMLPTask):
    """What every gMLP text task adds to its keras-hub task (a mixin).

    Besides `GMLPTask`'s additions, the task takes a bare integer tensor
    of token ids wherever it takes its dict of inputs (calling it, `fit()`,
    `predict()`, `evaluate()` without a preprocessor): the padding mask
    is `token_ids != 0` (`[PAD]` = 0), as keras-hub's text backbones
    define it. A dict missing `"padding_mask"` gets the same one.
    """

    def token_inputs(self, inputs):
        """The task's dict of inputs for `inputs`, ids or a dict.

        Args:
            inputs: int tensor `(batch, tokens)` of token ids, or a dict
                with `"token_ids"`. Anything else is returned as it is.
        """
        if isinstance(inputs, dict):
            if "token_ids" not in inputs or "padding_mask" in inputs:
                return inputs
            inputs = dict(inputs)
        elif is_token_ids(inputs):
            if isinstance(inputs, (list, tuple)):
                inputs = np.asarray(inputs)
            inputs = {"token_ids": inputs}
        else:
            return inputs
        # Keras takes tensors or arrays in a call, not a mix of both.
        inputs = {key: as_tensor(value) for key, value in inputs.items()}
        inputs["padding_mask"] = ops.cast(
            ops.not_equal(inputs["token_ids"], 0), "int32"
        )
        return inputs

    def __call__(self, *args, **kwargs):
        if args:
            args = (self.token_inputs(args[0]),) + args[1:]
        elif "inputs" in kwargs:
            kwargs["inputs"] = self.token_inputs(kwargs["inputs"])
        return super().__call__(*args, **kwargs)

    def call(self, inputs, training=None, mask=None):
        # `stateless_call` (JAX's `fit()` and `predict()`) calls `call()`.
        # `training` is declared: Keras' trainers pass `training=True` only
        # to a model whose `call` takes it (`_call_has_training_arg`).
        return super().call(
            self.token_inputs(inputs), training=training, mask=mask
        )
