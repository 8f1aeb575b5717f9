import contextlib

import keras

from keras_gmlp import kernels
from keras_gmlp.layers.toeplitz_matrix import FFT_FREE_FORMATS
from keras_gmlp.layers.toeplitz_matrix import materialised_toeplitz
from keras_gmlp.models.preset_loader import FromPreset
from keras_gmlp.optimizers import build_optimizer_before_tracing
from keras_gmlp.optimizers import no_decay_variables

# Entries a task adds to its compile config: the trainable variables (by
# path) its optimizer leaves out of weight decay (Keras saves an
# optimizer's configuration but not its exclusions), and whether the
# optimizer was built (had state to save).
NO_WEIGHT_DECAY = "no_weight_decay"
OPTIMIZER_BUILT = "optimizer_built"


def unchanged(step_function):
    """The reference of the `"step_function"` operation: `step_function`."""
    return step_function


class PortableExport:
    """`export()` traces the backend's own ops, no XLA function.

    Under TensorFlow the blocks compute their GELU and LayerNormalizations
    as XLA functions (`keras_gmlp.kernels.xla_functions`), which TF Serving
    (without `--xla_cpu_compilation_enabled`), ONNX and LiteRT cannot run;
    an exported artifact holds TensorFlow's kernels instead. ONNX and
    LiteRT take no FFT either: there the Toeplitz units trace their
    materialised product (`materialised_toeplitz`).
    """

    def export(self, filepath, format="tf_saved_model", **kwargs):
        fft_free = format in FFT_FREE_FORMATS
        with (
            kernels.reference_only(),
            materialised_toeplitz() if fft_free else contextlib.nullcontext(),
        ):
            return super().export(filepath, format=format, **kwargs)


class GMLPTask(FromPreset, PortableExport):
    """What every gMLP task adds to its keras-hub task class (a mixin).

    - `get_layer(name)` also finds the backbone's layers (`"block_0"`,
      `"final_norm"`, `"token_embedding"` ...), as in the flat functional
      models of earlier versions.
    - A `.keras` file restores the task's own compiled optimizer (its
      class, learning-rate schedule, state and the variables it leaves out
      of weight decay), loss and metrics: Keras does not call an
      overridden `compile()` when loading, so `compile_from_config` does.
      `jit_compile="auto"` (the default) is saved as `"auto"`, so each
      backend resolves it where the file loads (Keras saves the saving
      backend's answer: XLA's True would become `torch.compile`).
    - Under TensorFlow, the optimizer's variables are made before the
      training step is traced, not while it is (which traces the step
      twice; `keras_gmlp.optimizers.build_optimizer_before_tracing`).
    - Each step function is handed to the `"step_function"` kernel
      (`keras_gmlp.kernels.dispatch`): under JAX with asynchronous
      dispatch off (`keras_gmlp.kernels.reuse_freed_memory`), each step
      then gets its batch already on the device, so that it runs on the
      calling thread and reuses the previous step's memory
      (`keras_gmlp.kernels.allocator.with_ready_inputs`).
    - `from_preset()` builds the named configurations of `PRESETS` too,
      and keeps the mixed-precision policy a preset was saved with
      (`keras_gmlp.models.preset_loader.FromPreset`).
    """

    def make_train_function(self, force=False):
        build_optimizer_before_tracing(self)
        super().make_train_function(force=force)
        return self._step_with_ready_inputs("train_function")

    def make_test_function(self, force=False):
        super().make_test_function(force=force)
        return self._step_with_ready_inputs("test_function")

    def make_predict_function(self, force=False):
        super().make_predict_function(force=force)
        return self._step_with_ready_inputs("predict_function")

    def _step_with_ready_inputs(self, name):
        """Sets the step function `name` to its `"step_function"` kernel's
        (under JAX, `with_ready_inputs`)."""
        step_function = kernels.dispatch(
            "step_function", unchanged, getattr(self, name)
        )
        setattr(self, name, step_function)
        return step_function

    def get_layer(self, name=None, index=None):
        """Returns a layer of the task or, by name, of its backbone."""
        if name is None or index is not None:
            return super().get_layer(name=name, index=index)
        if any(layer.name == name for layer in self.layers):
            return super().get_layer(name=name)
        return self.backbone.get_layer(name=name)

    def compile(self, *args, jit_compile="auto", **kwargs):
        super().compile(*args, jit_compile=jit_compile, **kwargs)
        self._jit_compile_requested = jit_compile

    def get_compile_config(self):
        config = super().get_compile_config()
        if config and getattr(self, "_jit_compile_requested", None) == "auto":
            # Keras saves this backend's resolution of "auto" (True on JAX
            # and TensorFlow), so a file compiled by default would switch
            # torch.compile on where it loads under torch.
            config["jit_compile"] = "auto"
        optimizer = getattr(self, "optimizer", None)
        if config and optimizer is not None:
            config[OPTIMIZER_BUILT] = bool(optimizer.built)
        if config and getattr(optimizer, "weight_decay", None):
            config[NO_WEIGHT_DECAY] = [
                variable.path
                for variable in self.trainable_variables
                if not optimizer._use_weight_decay(variable)
            ]
        return config

    def compile_from_config(self, config):
        config = keras.saving.deserialize_keras_object(config)
        exempt = config.pop(NO_WEIGHT_DECAY, None)
        optimizer_built = config.pop(OPTIMIZER_BUILT, True)
        optimizer = config.get("optimizer")
        if isinstance(optimizer, keras.optimizers.Optimizer) and getattr(
            optimizer, "weight_decay", None
        ):
            if exempt is None:
                # Saved before the exclusions were: the defaults' own.
                variables = no_decay_variables(self)
            else:
                exempt = set(exempt)
                variables = [
                    v for v in self.trainable_variables if v.path in exempt
                ]
            optimizer.exclude_from_weight_decay(var_list=variables)
        self.compile(**config)
        if self.built and optimizer_built:
            # Create the optimizer's variables: the file's state loads next.
            self.optimizer.build(self.trainable_variables)
