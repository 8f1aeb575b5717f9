"""The recipes' optimizer: AdamW without decay of norms and biases."""

import keras

NO_DECAY_NAMES = ("bias", "gamma", "beta")


def adamw(
    learning_rate,
    weight_decay=0.05,
    clipnorm=1.0,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-8,
    model=None,
):
    """Returns AdamW with decoupled weight decay and gradient clipping.

    Biases, normalisation scales and offsets (every variable of rank <= 1,
    and every variable named `bias`, `gamma` or `beta`) are excluded from
    weight decay, as in the paper's (and timm's) recipes. This includes the
    per-token bias of the spatial gating unit.

    Args:
        learning_rate: float or `LearningRateSchedule`.
        weight_decay: float. Decoupled weight decay. Defaults to `0.05`
            (the paper's image recipe).
        clipnorm: float or `None`. Clip each gradient to this norm.
            Defaults to `1.0`.
        beta_1: float. Defaults to `0.9`.
        beta_2: float. Defaults to `0.999`.
        epsilon: float. Defaults to `1e-8`.
        model: `keras.Model` or `None`. A built model whose rank <= 1
            variables are excluded by identity as well as by name.

    Returns:
        A `keras.optimizers.AdamW`.

    Example:

    >>> optimizer = adamw(1e-3, weight_decay=0.05, model=model)
    >>> model.compile(optimizer=optimizer, loss="mse")
    """
    optimizer = keras.optimizers.AdamW(
        learning_rate=learning_rate,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        clipnorm=clipnorm or None,
    )
    variables = None
    if model is not None:
        variables = [v for v in model.trainable_variables if len(v.shape) <= 1]
    optimizer.exclude_from_weight_decay(
        var_list=variables, var_names=list(NO_DECAY_NAMES)
    )
    return optimizer
