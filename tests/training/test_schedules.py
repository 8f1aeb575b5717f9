import keras
import numpy as np
import pytest

from keras_gmlp.training.schedules import WarmupLinearDecay
from keras_gmlp.training.schedules import warmup_cosine
from keras_gmlp.training.schedules import warmup_linear


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


def test_warmup_cosine_without_warmup_starts_at_peak():
    schedule = warmup_cosine(0.1, 10, 0)
    assert float(schedule(0)) == pytest.approx(0.1)
    assert float(schedule(10)) == pytest.approx(0.0, abs=1e-7)


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
