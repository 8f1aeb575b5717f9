"""The behaviour test every layer goes through, on keras-hub's TestCase.

`LayerTestCase.run_layer_test` checks that `get_config` names every
constructor argument, runs keras-hub's own checks (config round trip,
build and weight counts, symbolic and eager call shapes and dtypes, one
compiled `fit` step, mixed-precision policies followed by the outputs, the
weights and every sublayer), runs those precision checks on torch as well
(keras-hub skips torch without CUDA), and saves a model of the layer with
random weights to `.keras` and reloads it with equal outputs.
"""

import inspect
import os

import keras
import numpy as np
from keras import tree
from keras_hub.src.tests.test_case import TestCase


def is_float(x):
    return "float" in keras.backend.standardize_dtype(x.dtype)


def randomize_weights(layer, rng, scale=1.0):
    """Replaces every float weight by normal noise, so no term hides.

    Initial weights can hide a term: the spatial weight starts near zero
    and biases at zero or one. Random ones make every weight count.
    """
    for weight in layer.weights:
        if is_float(weight):
            noise = rng.normal(size=weight.shape) * scale
            weight.assign(noise.astype(weight.dtype))


class LayerTestCase(TestCase):
    """keras-hub's layer checks, plus torch precision and `.keras` saving."""

    # Inherited from tf.test.TestCase, where it is a context manager that
    # pytest would otherwise collect and skip as "Not a test".
    test_session = None

    def run_layer_test(
        self,
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        padding_mask=None,
        **kwargs,
    ):
        """Runs every check on `cls(**init_kwargs)(input_data)`.

        `padding_mask`, when given, is also passed in the save and reload
        check. Other keyword arguments go to keras-hub's `run_layer_test`:
        the expected weight counts, `run_training_check`,
        `run_precision_checks`.
        """
        self.run_config_arguments_test(cls, init_kwargs)
        # keras-hub reads shapes from backend tensors, not numpy arrays.
        input_data = keras.ops.convert_to_tensor(input_data)
        super().run_layer_test(
            cls, init_kwargs, input_data, expected_output_shape, **kwargs
        )
        self.run_layer_saving_test(
            cls, init_kwargs, input_data, padding_mask=padding_mask
        )

    def run_config_arguments_test(self, cls, init_kwargs):
        """Every argument of the class's own constructor is in its config.

        A round trip alone cannot see an argument left out of `get_config`:
        both configs lack it. Constructors inherited from Keras (as
        `TiedEmbedding`'s) follow Keras's own config.
        """
        if "__init__" not in vars(cls):
            return
        config = cls(**init_kwargs).get_config()
        parameters = inspect.signature(cls.__init__).parameters.values()
        missing = [
            parameter.name
            for parameter in parameters
            if parameter.name != "self"
            and parameter.kind == parameter.POSITIONAL_OR_KEYWORD
            and parameter.name not in config
        ]
        self.assertEqual(missing, [], msg="Arguments missing from get_config")

    def run_precision_test(self, cls, init_kwargs, input_data):
        if keras.config.backend() != "torch":
            super().run_precision_test(cls, init_kwargs, input_data)
            return
        # keras-hub returns early on torch without CUDA; these policies run
        # on a CPU, so check them there too.
        for name in ("mixed_float16", "mixed_bfloat16", "bfloat16"):
            policy = keras.dtype_policies.get(name)
            layer = cls(**init_kwargs, dtype=policy)
            outputs = layer(input_data)
            spec = layer.compute_output_spec(input_data)
            for tensor in tree.flatten(outputs) + tree.flatten(spec):
                if is_float(tensor):
                    self.assertDTypeEqual(tensor, policy.compute_dtype)
            for weight in layer.weights:
                if is_float(weight):
                    self.assertDTypeEqual(weight, policy.variable_dtype)
            for sublayer in layer._flatten_layers():
                self.assertEqual(sublayer.dtype_policy.name, name)

    def run_layer_saving_test(
        self, cls, init_kwargs, input_data, padding_mask=None, seed=0
    ):
        """Saves a model of the layer with random weights, and reloads it."""
        layer = cls(**init_kwargs)
        inputs = keras.Input(
            batch_shape=input_data.shape, dtype=input_data.dtype
        )
        if padding_mask is None:
            model = keras.Model(inputs, layer(inputs))
            data = input_data
        else:
            mask = keras.Input(batch_shape=padding_mask.shape, dtype="bool")
            model = keras.Model(
                [inputs, mask], layer(inputs, padding_mask=mask)
            )
            data = [input_data, keras.ops.convert_to_tensor(padding_mask)]
        randomize_weights(model, np.random.default_rng(seed), scale=0.5)
        restored = self.run_saving_round_trip(model, data)
        restored_layer = restored.get_layer(layer.name)
        self.assertIsInstance(restored_layer, cls)
        self.assertEqual(restored_layer.get_config(), layer.get_config())

    def run_saving_round_trip(self, model, data):
        """Saves `model` to `.keras`, reloads it, compares outputs on `data`.

        Returns the reloaded model.
        """
        expected = model(data)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        restored = keras.models.load_model(path)
        self.assertAllClose(expected, restored(data))
        return restored
