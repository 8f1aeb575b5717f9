"""The recipes' optimizer: AdamW without decay of norms and biases."""

import keras

from keras_gmlp.kernels.fused_adamw import FusedAdamW

# The variable names exempt from weight decay when no model is given.
NO_DECAY_NAMES = ("bias", "gamma", "beta")

NORMALIZATION_LAYERS = (
    keras.layers.LayerNormalization,
    keras.layers.BatchNormalization,
    keras.layers.GroupNormalization,
    keras.layers.RMSNormalization,
    keras.layers.UnitNormalization,
)


def no_decay_variables(model):
    """Returns the trainable variables of `model` exempt from weight decay.

    Exempt by role: the `bias` of every layer that has one (`Dense`,
    `EinsumDense`, convolutions, the spatial gating unit's per-token bias)
    and every variable of a normalisation layer (`LayerNormalization`'s
    `gamma` and `beta`, ...). Kernels, embeddings and the spatial weights,
    dense `(n, n)` or Toeplitz `(2n - 1,)`, are not exempt.

    Args:
        model: `keras.Model` or `keras.layers.Layer`, built.

    Returns:
        A list of variables.
    """
    exempt = []
    for layer in model._flatten_layers(include_self=True):
        own = layer._trainable_variables
        if isinstance(layer, NORMALIZATION_LAYERS):
            exempt.extend(own)
            continue
        bias = getattr(layer, "bias", None)
        if any(bias is variable for variable in own):
            exempt.append(bias)
    return exempt


def adamw(
    learning_rate,
    weight_decay=0.05,
    global_clipnorm=1.0,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-8,
    model=None,
):
    """Returns AdamW with decoupled weight decay and global-norm clipping.

    Weight decay applies to every kernel, embedding and spatial weight
    (the dense `(n, n)` one and the Toeplitz `(2n - 1,)` one alike), and
    not to biases or normalisation scales and offsets, as in the paper's
    (and timm's) recipes. With `model`, the exempt variables are found by
    role (see `no_decay_variables`): every layer's `bias` (dense,
    convolution, the spatial gating unit's per-token bias) and every
    variable of a normalisation layer. Without it, the variables named
    exactly `bias`, `gamma` or `beta` are exempt.

    The gradients are clipped together: when the global norm of all of
    them exceeds `global_clipnorm`, each is scaled by `global_clipnorm /
    global_norm` (as timm and the DeiT recipe do). The optimizer is a
    `FusedAdamW`: Keras' `AdamW` whose TensorFlow update is one kernel a
    variable (`keras_gmlp.kernels.fused_adamw`).

    Args:
        learning_rate: float or `LearningRateSchedule`.
        weight_decay: float. Decoupled weight decay. Defaults to `0.05`
            (the paper's image recipe).
        global_clipnorm: float or `None`. Largest global norm of the
            gradients; `None` or `0` disables clipping. Defaults to `1.0`.
        beta_1: float. Defaults to `0.9`.
        beta_2: float. Defaults to `0.999`.
        epsilon: float. Defaults to `1e-8`.
        model: `keras.Model` or `None`. The built model to train, whose
            biases and normalisation variables are exempt from weight
            decay. Defaults to `None` (exempt by name).

    Returns:
        A `FusedAdamW` (a `keras.optimizers.AdamW`).

    Example:

    >>> from keras_gmlp.optimizers import adamw
    >>> model = keras_gmlp.models.masked_lm(
    ...     vocabulary_size=10, sequence_length=4, num_layers=1,
    ...     hidden_dim=4, ffn_dim=8)
    >>> optimizer = adamw(1e-3, weight_decay=0.05, model=model)
    >>> model.compile(optimizer=optimizer, loss="mse")
    >>> optimizer.global_clipnorm
    1.0
    """
    optimizer = FusedAdamW(
        learning_rate=learning_rate,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=global_clipnorm or None,
    )
    if model is None:
        # The last part of the name (TensorFlow may give the optimizer its
        # own variables, named like `norm/gamma:0`).
        names = "|".join(NO_DECAY_NAMES)
        optimizer.exclude_from_weight_decay(
            var_names=[rf"(^|/)({names})(:\d+)?$"]
        )
    else:
        optimizer.exclude_from_weight_decay(var_list=no_decay_variables(model))
    return optimizer


def build_optimizer_before_tracing(model):
    """Creates a compiled model's optimizer variables before its first step.

    Without a distribution strategy, Keras' TensorFlow trainer leaves the
    optimizer unbuilt until the training step is first traced, so the
    step creates variables as it traces: `tf.function` then traces it
    twice and keeps both graphs: for a gMLP-Ti/16 step at batch 32, about
    a third of the first step's time and 390 MiB of its peak memory.
    Keras builds the optimizer ahead
    itself under a strategy and on the other backends; this does it for
    TensorFlow without one. A no-op where the optimizer is built already,
    missing, or the model not built.

    Args:
        model: `keras.Model`, compiled.
    """
    optimizer = getattr(model, "optimizer", None)
    if (
        keras.config.backend() != "tensorflow"
        or optimizer is None
        or optimizer.built
        or not model.built
    ):
        return
    with model.distribute_strategy.scope():
        optimizer.build(model.trainable_variables)
