"""Learning-rate schedules of the recipes: warmup then cosine or linear."""

import math

import keras


def warmup_cosine(peak_learning_rate, total_steps, warmup_steps, alpha=0.0):
    """Linear warmup from 0 to `peak_learning_rate`, then cosine decay.

    The image recipe's schedule (the paper: cosine decay after a warmup).

    Args:
        peak_learning_rate: float. Learning rate at the end of warmup.
        total_steps: int. Steps of the whole run, warmup included.
        warmup_steps: int. Steps of the linear warmup.
        alpha: float. Final learning rate as a fraction of the peak.
            Defaults to `0.0`.

    Returns:
        A `WarmupCosineDecay`.

    Example:

    >>> from keras_gmlp.optimizers.schedules import warmup_cosine
    >>> schedule = warmup_cosine(1e-3, total_steps=1000, warmup_steps=100)
    >>> round(float(schedule(100)), 8)
    0.001
    """
    _check_steps(total_steps, warmup_steps)
    return WarmupCosineDecay(
        peak_learning_rate, total_steps, warmup_steps, alpha
    )


def warmup_linear(
    peak_learning_rate, total_steps, warmup_steps, end_learning_rate=0.0
):
    """Linear warmup from 0 to `peak_learning_rate`, then linear decay.

    The masked-LM recipe's schedule (BERT and the paper's pretraining).

    Args:
        peak_learning_rate: float. Learning rate at the end of warmup.
        total_steps: int. Steps of the whole run, warmup included.
        warmup_steps: int. Steps of the linear warmup.
        end_learning_rate: float. Learning rate at `total_steps` and after.
            Defaults to `0.0`.

    Returns:
        A `WarmupLinearDecay` schedule.

    Example:

    >>> from keras_gmlp.optimizers.schedules import warmup_linear
    >>> schedule = warmup_linear(1e-4, total_steps=100, warmup_steps=10)
    >>> round(float(schedule(55)), 8)
    5e-05
    """
    _check_steps(total_steps, warmup_steps)
    return WarmupLinearDecay(
        peak_learning_rate, total_steps, warmup_steps, end_learning_rate
    )


class WarmupThenDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to a peak, then a decay over the other steps.

    Subclasses give `decayed(fraction)`, the rate at a `fraction` in [0, 1]
    of the decay. The branches are chosen with `ops.where`, not
    `ops.cond`: under JAX an eager call (Keras' `TensorBoard` reads the
    rate every epoch) reuses compiled functions, where `ops.cond`'s new
    branch closures are compiled anew at every call.

    Args:
        peak_learning_rate: float. Learning rate at `warmup_steps`.
        total_steps: int. Step at which the decay ends.
        warmup_steps: int. Steps of the warmup from 0.
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps):
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def decayed(self, fraction):
        raise NotImplementedError

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warmup = max(float(self.warmup_steps), 1.0)
        warming = self.peak_learning_rate * step / warmup
        decay_steps = max(self.total_steps - self.warmup_steps, 1)
        fraction = keras.ops.clip(
            (step - self.warmup_steps) / decay_steps, 0.0, 1.0
        )
        return keras.ops.where(
            step < self.warmup_steps, warming, self.decayed(fraction)
        )

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
        }


@keras.saving.register_keras_serializable(package="keras_gmlp")
class WarmupLinearDecay(WarmupThenDecay):
    """Linear warmup to a peak, then linear decay to an end value.

    Args:
        peak_learning_rate: float. Learning rate at `warmup_steps`.
        total_steps: int. Step at which `end_learning_rate` is reached.
        warmup_steps: int. Steps of the warmup from 0.
        end_learning_rate: float. Final learning rate. Defaults to `0.0`.
    """

    def __init__(
        self,
        peak_learning_rate,
        total_steps,
        warmup_steps,
        end_learning_rate=0.0,
    ):
        super().__init__(peak_learning_rate, total_steps, warmup_steps)
        self.end_learning_rate = end_learning_rate

    def decayed(self, fraction):
        peak = self.peak_learning_rate
        return peak + (self.end_learning_rate - peak) * fraction

    def get_config(self):
        return {
            **super().get_config(),
            "end_learning_rate": self.end_learning_rate,
        }


@keras.saving.register_keras_serializable(package="keras_gmlp")
class WarmupCosineDecay(WarmupThenDecay):
    """Linear warmup to a peak, then cosine decay to `alpha` times it.

    The values of Keras' `CosineDecay(0.0, total_steps - warmup_steps,
    alpha, warmup_target=peak_learning_rate, warmup_steps=warmup_steps)`,
    without its `ops.cond` (see `WarmupThenDecay`).

    Args:
        peak_learning_rate: float. Learning rate at `warmup_steps`.
        total_steps: int. Step at which `alpha * peak_learning_rate` is
            reached.
        warmup_steps: int. Steps of the warmup from 0.
        alpha: float. Final learning rate as a fraction of the peak.
            Defaults to `0.0`.
    """

    def __init__(
        self, peak_learning_rate, total_steps, warmup_steps, alpha=0.0
    ):
        super().__init__(peak_learning_rate, total_steps, warmup_steps)
        self.alpha = alpha

    def decayed(self, fraction):
        cosine = 0.5 * (1.0 + keras.ops.cos(math.pi * fraction))
        return self.peak_learning_rate * (
            (1.0 - self.alpha) * cosine + self.alpha
        )

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha}


def _check_steps(total_steps, warmup_steps):
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}.")
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"warmup_steps must be in [0, total_steps={total_steps}], got "
            f"{warmup_steps}."
        )
