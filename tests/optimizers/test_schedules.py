import keras
import numpy as np
import pytest

from keras_gmlp.optimizers.schedules import WarmupCosineDecay
from keras_gmlp.optimizers.schedules import WarmupLinearDecay
from keras_gmlp.optimizers.schedules import warmup_cosine
from keras_gmlp.optimizers.schedules import warmup_linear


def values(schedule, steps):
    return np.array([float(schedule(step)) for step in steps])


def test_warmup_cosine_matches_closed_form():
    peak, total, warmup = 1e-3, 100, 10
    schedule = warmup_cosine(peak, total, warmup)
    steps = np.arange(0, total + 1, 5)
    expected = np.where(
        steps < warmup,
        peak * steps / warmup,
        peak
        * 0.5
        * (
            1
            + np.cos(np.pi * np.clip(steps - warmup, 0, 90) / (total - warmup))
        ),
    )
    np.testing.assert_allclose(values(schedule, steps), expected, atol=1e-9)


def test_warmup_cosine_decays_to_alpha_of_the_peak():
    peak, total, warmup, alpha = 0.2, 30, 5, 0.1
    schedule = warmup_cosine(peak, total, warmup, alpha=alpha)
    steps = np.arange(0, 41)
    cosine = 0.5 * (1 + np.cos(np.pi * np.clip(steps - warmup, 0, 25) / 25))
    expected = np.where(
        steps < warmup,
        peak * steps / warmup,
        peak * ((1 - alpha) * cosine + alpha),
    )
    np.testing.assert_allclose(values(schedule, steps), expected, rtol=1e-6)


def test_warmup_cosine_serializes():
    schedule = warmup_cosine(1e-3, 100, 10, alpha=0.01)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(schedule)
    )
    assert isinstance(restored, WarmupCosineDecay)
    assert restored.get_config() == schedule.get_config()


def test_warmup_cosine_without_warmup_starts_at_peak():
    schedule = warmup_cosine(0.1, 10, 0)
    assert float(schedule(0)) == pytest.approx(0.1)
    assert float(schedule(10)) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize(
    "make_schedule",
    [
        lambda: warmup_cosine(1e-3, 100, 10),
        lambda: warmup_cosine(1e-3, 100, 0),
        lambda: warmup_linear(1e-3, 100, 10),
    ],
    ids=["cosine", "cosine without warmup", "linear"],
)
def test_eager_calls_compile_nothing_after_the_first(make_schedule):
    # Keras' `TensorBoard` reads the learning rate eagerly every epoch. A
    # schedule with `ops.cond` traced and compiled a new JAX function at
    # each call (its branches are new closures): 50 ms an epoch.
    if keras.backend.backend() != "jax":
        pytest.skip("JAX compiles eager calls")
    import jax

    schedule = make_schedule()
    iterations = keras.Variable(0, dtype="int32", trainable=False)
    schedule(iterations)
    compiles = []

    def count(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        for step in (3, 20, 70):
            iterations.assign(step)
            schedule(iterations)
    finally:
        jax.monitoring.unregister_event_duration_listener(count)
    assert compiles == []


def test_warmup_linear_matches_closed_form():
    peak, total, warmup = 2e-4, 50, 10
    schedule = warmup_linear(peak, total, warmup)
    steps = np.arange(0, 61)
    expected = np.where(
        steps < warmup,
        peak * steps / warmup,
        peak * (1 - np.clip((steps - warmup) / (total - warmup), 0, 1)),
    )
    np.testing.assert_allclose(values(schedule, steps), expected, atol=1e-9)


def test_warmup_linear_serializes():
    schedule = warmup_linear(1e-3, 100, 10, end_learning_rate=1e-5)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(schedule)
    )
    assert isinstance(restored, WarmupLinearDecay)
    assert restored.get_config() == schedule.get_config()


@pytest.mark.parametrize(
    "total, warmup, match",
    [(0, 0, "total_steps"), (10, 11, "warmup_steps"), (10, -1, "warmup")],
)
def test_bad_steps_name_the_value(total, warmup, match):
    with pytest.raises(ValueError, match=match):
        warmup_cosine(1e-3, total, warmup)
    with pytest.raises(ValueError, match=match):
        warmup_linear(1e-3, total, warmup)
