"""AdamW whose update is one kernel a variable (TensorFlow) or one for all
(torch).

Keras' `AdamW` writes its update as about 45 graph nodes a variable under
TensorFlow (casts, the bias-correction powers, four element-wise passes
and three assignments, each variable on its own), and its weight decay
evaluates the learning rate (a whole schedule) again for every decayed
variable: most of a gMLP-Ti/16 training step's graph nodes are the
optimizer's. With this optimizer that step traces to half the nodes, and
its first step is faster and holds less memory; later steps are as fast.

`FusedAdamW` is `keras.optimizers.AdamW` with the same variables, state and
config. Under TensorFlow its step computes the learning rate, the decay
factor and the bias-correction powers once per step and dtype, and updates
each variable with TensorFlow's own fused kernels: `ResourceApplyAdam`
(Adam's update of the moments and the variable in one pass) after
`ResourceApplyGradientDescent` (the decoupled decay, `variable -= lr *
weight_decay * variable`). Adam's arithmetic is the same; the kernel forms
`1 - beta` in the variable's dtype where Keras rounds `1 - beta` from
Python's double, so updates agree to about 1e-5 relative, not bitwise.
AMSGrad, and dtypes the kernels do not take, keep Keras' update.

Under torch its step is torch's fused AdamW kernel (`torch._fused_adamw_`,
the decay and Adam's update of every variable in one pass over its
arrays), once for the decayed variables and once for the others. Keras'
torch `AdamW` updates all variables in a few multi-tensor passes, but its
subclasses fall back to the base optimizer's loop, about 30 ops a
variable; for gMLP-Ti/16 the fused kernel's update is about 4x faster than
Keras' multi-tensor one. torch places Adam's
epsilon after the bias correction; the kernel is given
`epsilon / sqrt(1 - beta_2^t)`, which is Keras' formula. bfloat16
variables, which torch's kernel updates in float32 where Keras rounds
`beta_2` to 1, keep Keras' update, and so does a step compiled by
`torch.compile` (Keras' `jit_compile=True` under torch), whose tracing
fails on the kernel's in-place update of the variables. JAX runs Keras'
update (XLA fuses it).
"""

import keras

# The dtypes TensorFlow's CPU and GPU kernels of ResourceApplyAdam take.
FUSED_DTYPES = ("float16", "bfloat16", "float32", "float64")
# torch's kernel takes bfloat16 too, but computes it in float32, where
# Keras (and TensorFlow's kernel) round `beta_2 = 0.999` to 1.
TORCH_FUSED_DTYPES = ("float16", "float32", "float64")


@keras.saving.register_keras_serializable(package="keras_gmlp")
class FusedAdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` updating each variable with one kernel.

    The arguments are `keras.optimizers.AdamW`'s. Under TensorFlow, the
    update of a variable is TensorFlow's fused Adam kernel (and the decay's
    fused kernel), with the per-step scalars computed once: the traced
    training step has 7 nodes a variable instead of about 45, which makes
    the first step trace faster and hold less memory. Under torch, the
    update of all variables is torch's fused AdamW kernel (two calls: the
    decayed variables and the others), 4x as fast as Keras' torch update,
    outside `torch.compile`. JAX runs Keras' own update.

    Example:

    >>> optimizer = keras_gmlp.kernels.FusedAdamW(
    ...     learning_rate=1e-3, weight_decay=0.05)
    >>> variable = keras.Variable([1.0, 2.0])
    >>> gradient = keras.ops.convert_to_tensor([0.5, -0.5])
    >>> for _ in range(2):
    ...     optimizer.apply([gradient], [variable])
    >>> [round(float(value), 4) for value in variable.numpy()]
    [0.9979, 2.0018]
    """

    def _fuses(self, variable):
        return (
            keras.backend.backend() == "tensorflow"
            and not self.amsgrad
            and keras.backend.standardize_dtype(variable.dtype) in FUSED_DTYPES
        )

    def _fuses_in_torch(self, variables):
        if keras.backend.backend() != "torch" or self.amsgrad:
            return False
        import torch

        return not torch.compiler.is_compiling() and all(
            keras.backend.standardize_dtype(variable.dtype)
            in TORCH_FUSED_DTYPES
            for variable in variables
        )

    def _apply_weight_decay(self, variables):
        if self._fuses_in_torch(variables):
            return  # In the update's kernel.
        if self.weight_decay is None or not all(map(self._fuses, variables)):
            return super()._apply_weight_decay(variables)
        import tensorflow as tf

        def decay_all(distribution, variables):
            # The learning rate (a schedule's value) once for every variable.
            learning_rate = self.learning_rate
            factors = {}

            def decay(variable):
                if not self._use_weight_decay(variable):
                    return
                dtype = variable.dtype
                if dtype not in factors:
                    factors[dtype] = tf.cast(learning_rate, dtype) * tf.cast(
                        self.weight_decay, dtype
                    )
                tf.raw_ops.ResourceApplyGradientDescent(
                    var=variable.handle,
                    alpha=factors[dtype],
                    delta=variable.read_value(),
                )

            for variable in variables:
                distribution.extended.update(
                    _tf_variable(variable), decay, group=False
                )

        tf.__internal__.distribute.interim.maybe_merge_call(
            decay_all, self._distribution_strategy, variables
        )

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if self._fuses_in_torch(trainable_variables):
            return self._torch_fused_update(
                grads, trainable_variables, learning_rate
            )
        if not all(map(self._fuses, trainable_variables)):
            return super()._backend_update_step(
                grads, trainable_variables, learning_rate
            )
        import tensorflow as tf

        variables = [_tf_variable(v) for v in trainable_variables]
        grads_and_vars = self._all_reduce_sum_gradients(
            list(zip(grads, variables, strict=True))
        )
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._fused_update_all,
            self._distribution_strategy,
            grads_and_vars,
            learning_rate,
        )

    def _fused_update_all(self, distribution, grads_and_vars, learning_rate):
        import tensorflow as tf

        # Computed in each replica (a `PerReplica` here under a strategy),
        # the same value in all.
        learning_rate = distribution.experimental_local_results(learning_rate)
        learning_rate = learning_rate[0]
        scalars = {}

        def step_scalars(dtype):
            if dtype not in scalars:
                step = tf.cast(self.iterations + 1, dtype)
                beta_1 = tf.cast(self.beta_1, dtype)
                beta_2 = tf.cast(self.beta_2, dtype)
                scalars[dtype] = {
                    "beta1_power": tf.pow(beta_1, step),
                    "beta2_power": tf.pow(beta_2, step),
                    "lr": tf.cast(learning_rate, dtype),
                    "beta1": beta_1,
                    "beta2": beta_2,
                    "epsilon": tf.cast(self.epsilon, dtype),
                }
            return scalars[dtype]

        def update(variable, gradient):
            index = self._get_variable_index(variable)
            gradient = tf.cast(tf.convert_to_tensor(gradient), variable.dtype)
            tf.raw_ops.ResourceApplyAdam(
                var=variable.handle,
                m=self._momentums[index].value.handle,
                v=self._velocities[index].value.handle,
                grad=gradient,
                **step_scalars(variable.dtype),
            )

        for gradient, variable in grads_and_vars:
            if gradient is None:
                continue
            distribution.extended.update(
                variable, update, args=(gradient,), group=False
            )

    def _torch_fused_update(self, grads, trainable_variables, learning_rate):
        import torch

        # The step's scalars as Python numbers: one read of the step count.
        step = int(keras.ops.convert_to_numpy(self.iterations)) + 1
        epsilon = self.epsilon / (1 - self.beta_2**step) ** 0.5
        learning_rate = float(keras.ops.convert_to_numpy(learning_rate))
        decay = self.weight_decay or 0.0
        groups = {}
        for gradient, variable in zip(grads, trainable_variables, strict=True):
            if gradient is None:
                continue
            value = variable.value
            index = self._get_variable_index(variable)
            key = (
                decay if self._use_weight_decay(variable) else 0.0,
                value.device,
                value.dtype,
            )
            values, gradients, momentums, velocities = groups.setdefault(
                key, ([], [], [], [])
            )
            values.append(value)
            gradients.append(gradient.to(value.dtype))
            momentums.append(self._momentums[index].value)
            velocities.append(self._velocities[index].value)
        with torch.no_grad():
            for (group_decay, device, _), arrays in groups.items():
                steps = torch.full((), step, dtype=torch.float32, device=device)
                torch._fused_adamw_(
                    *arrays,
                    [],
                    [steps] * len(arrays[0]),
                    lr=learning_rate,
                    beta1=self.beta_1,
                    beta2=self.beta_2,
                    weight_decay=group_decay,
                    eps=epsilon,
                    amsgrad=False,
                    maximize=False,
                )


def _tf_variable(variable):
    """The `tf.Variable` behind a `keras.Variable`."""
    return variable.value if isinstance(variable, keras.Variable) else variable
