"""What every gMLP task shares: its `.keras` file restores its own compiled
optimizer, and a mixed-precision preset loads through `from_preset`."""

import warnings

import keras
import numpy as np
import pytest

from keras_gmlp import models
from keras_gmlp.models.gmlp_text.text_metrics import TokenAccuracy
from tests.backends import in_turn

TEXT = dict(
    vocabulary_size=20,
    sequence_length=6,
    num_layers=1,
    hidden_dim=4,
    ffn_dim=8,
    attention_dim=2,
)
IMAGE = dict(image_size=8, patch_size=4, num_layers=1, hidden_dim=4, ffn_dim=8)
TASKS = ("causal_lm", "image_classifier", "masked_lm", "text_classifier")


def task_and_data(name, **kwargs):
    """A tiny task of builder `name` and a batch `(x, y)` it trains on."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 20, size=(4, 6)).astype("int32")
    labels = np.arange(4) % 3
    if name == "image_classifier":
        task = models.image_classifier(num_classes=3, **IMAGE, **kwargs)
        return task, rng.normal(size=(4, 8, 8, 3)).astype("float32"), labels
    if name == "text_classifier":
        task = models.text_classifier(
            num_classes=3, **{"dropout": 0.0, **TEXT, **kwargs}
        )
        return task, ids, labels
    return getattr(models, name)(**TEXT, **kwargs), ids, ids


def as_numpy(values):
    return [keras.ops.convert_to_numpy(v) for v in values]


def decays(task):
    """Whether the task's optimizer decays each trainable variable."""
    return {
        v.path: task.optimizer._use_weight_decay(v)
        for v in task.trainable_variables
    }


@pytest.mark.parametrize("name", in_turn(TASKS))
def test_checkpoint_restores_the_compiled_optimizer(name, tmp_path):
    task, x, y = task_and_data(name)
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=10, warmup_target=1e-2, warmup_steps=3
    )
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=0.3)
    # Not a default exclusion: it has to be saved to come back.
    optimizer.exclude_from_weight_decay(var_names=["gamma"])
    extra = {"sampler": "greedy"} if name == "causal_lm" else {}
    task.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **extra,
    )
    task.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
    path = str(tmp_path / "task.keras")
    task.save(path)

    loaded = keras.saving.load_model(path)

    restored = loaded.optimizer
    assert isinstance(restored, keras.optimizers.AdamW)
    assert restored.weight_decay == pytest.approx(0.3)
    assert isinstance(
        restored._learning_rate, keras.optimizers.schedules.CosineDecay
    )
    assert restored._learning_rate.get_config() == schedule.get_config()
    assert int(keras.ops.convert_to_numpy(restored.iterations)) == 2
    for saved, back in zip(
        as_numpy(optimizer.variables), as_numpy(restored.variables), strict=True
    ):
        np.testing.assert_array_equal(back, saved)
    assert decays(loaded) == decays(task)
    assert not all(decays(loaded).values())
    if name == "causal_lm":
        assert type(loaded.sampler).__name__ == "GreedySampler"
    # Training goes on from the same state.
    task.train_on_batch(x[:2], y[:2])
    loaded.train_on_batch(x[:2], y[:2])
    for expected, got in zip(
        as_numpy(task.weights), as_numpy(loaded.weights), strict=True
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name, options",
    [(name, {"drop_path_rate": 0.5}) for name in TASKS]
    + [("text_classifier", {"dropout": 0.5})],
)
def test_fit_runs_the_task_in_training_mode(name, options):
    # Keras' trainers pass `training=True` only to a model whose `call`
    # declares `training`: a text task whose `call` hid it behind
    # `*args, **kwargs` trained with its stochastic depth and dropout off.
    task, x, y = task_and_data(name, **options)
    task.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0))
    assert task._call_has_training_arg
    keras.utils.set_random_seed(0)
    trained = task.train_on_batch(x, y, return_dict=True)["loss"]
    tested = task.test_on_batch(x, y, return_dict=True)["loss"]
    # A kept block's branch is scaled by 1 / (1 - rate) in training: the
    # losses differ whichever branches the draw keeps.
    assert abs(trained - tested) > 1e-4 * abs(tested), (trained, tested)
    assert task.test_on_batch(x, y, return_dict=True)["loss"] == tested


@pytest.mark.parametrize("name", TASKS)
def test_an_untrained_checkpoint_keeps_the_default_optimizer(name, tmp_path):
    task, _, _ = task_and_data(name)
    path = str(tmp_path / "task.keras")
    task.save(path)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        loaded = keras.saving.load_model(path)
    # Neither "compile() was not called" nor "Skipping variable loading".
    messages = [str(w.message) for w in record]
    assert not [m for m in messages if "optimizer" in m], messages
    assert type(loaded.optimizer) is type(task.optimizer)
    assert not loaded.optimizer.built
    assert decays(loaded) == decays(task)


@pytest.mark.parametrize("name", TASKS + ("text_backbone", "image_backbone"))
def test_mixed_bfloat16_preset_loads_with_equal_outputs(name, tmp_path):
    builder = {
        "text_backbone": "masked_lm",
        "image_backbone": "image_classifier",
    }
    task, x, _ = task_and_data(builder.get(name, name), dtype="mixed_bfloat16")
    model = task.backbone if name.endswith("backbone") else task
    if name == "text_backbone":
        x = {"token_ids": x, "padding_mask": np.ones_like(x)}
    rng = np.random.default_rng(1)
    for variable in model.weights:
        variable.assign(rng.normal(0.0, 0.5, variable.shape))
    expected = keras.ops.convert_to_numpy(model(x))
    folder = str(tmp_path / "preset")
    model.save_to_preset(folder)

    loaded = type(model).from_preset(folder)

    assert type(loaded) is type(model)
    assert loaded.dtype_policy.name == "mixed_bfloat16"
    outputs = keras.ops.convert_to_numpy(loaded(x))
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"
    np.testing.assert_array_equal(
        outputs.astype("float32"), expected.astype("float32")
    )
    # Another policy when asked.
    loaded = type(model).from_preset(folder, dtype="float32")
    assert loaded.dtype_policy.name == "float32"


@pytest.mark.parametrize("jit_compile", ["auto", True, False])
@pytest.mark.parametrize("name", TASKS)
def test_saved_compile_config_keeps_the_requested_jit_compile(
    name, jit_compile, tmp_path
):
    """`"auto"` is saved as `"auto"`, not as this backend's resolution:
    a file compiled by default on JAX (XLA) must not load on torch with
    `torch.compile` switched on."""
    task, _, _ = task_and_data(name)
    task.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    assert task.get_compile_config()["jit_compile"] == jit_compile
    path = str(tmp_path / "task.keras")
    task.save(path)

    loaded = keras.saving.load_model(path)

    assert loaded.get_compile_config()["jit_compile"] == jit_compile
    expected = (
        loaded._resolve_auto_jit_compile()
        if jit_compile == "auto"
        else jit_compile
    )
    assert loaded.jit_compile == expected


@pytest.mark.parametrize("name", ["causal_lm", "masked_lm"])
def test_default_metric_is_keras_hubs_weighted_accuracy(name):
    # keras-hub's `SparseCategoricalAccuracy` by name and value (computed
    # without an `argmax` under JAX); the figure is numpy's.
    task, _, _ = task_and_data(name)
    task.compile()
    (config,) = task.get_compile_config()["weighted_metrics"]
    metric = keras.saving.deserialize_keras_object(config)
    assert isinstance(metric, TokenAccuracy)
    assert metric.name == "sparse_categorical_accuracy"
    rng = np.random.default_rng(2)
    logits = rng.integers(0, 3, size=(4, 6, 20)).astype("float32")
    labels = rng.integers(0, 20, size=(4, 6))
    labels[:, ::2] = np.argmax(logits, axis=-1)[:, ::2]
    weights = rng.integers(0, 2, size=(4, 6)).astype("float32")
    metric.update_state(labels, logits, sample_weight=weights)
    right = np.argmax(logits, axis=-1) == labels
    expected = (right * weights).sum() / weights.sum()
    assert float(metric.result()) == pytest.approx(expected)


@pytest.mark.parametrize("name", ["causal_lm", "masked_lm"])
def test_default_loss_is_keras_hubs_token_mean(name):
    # keras-hub's default, a sparse cross-entropy from logits averaged over
    # every position (`sum_over_batch_size`), here without reshaping
    # copies; the figure is the numpy formula's.
    task, ids, labels = task_and_data(name)
    task.compile()
    logits = np.random.default_rng(1).normal(size=(4, 6, 20)) * 3
    logits = logits.astype("float32")
    weights = (np.arange(24).reshape(4, 6) % 3 != 0).astype("float32")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(
        np.exp(shifted).sum(axis=-1, keepdims=True)
    )
    losses = -np.take_along_axis(log_probabilities, labels[..., None], -1)
    expected = (losses[..., 0] * weights).sum() / weights.size
    value = task.loss(labels, logits, sample_weight=weights)
    assert float(value) == pytest.approx(expected, rel=1e-5)


# JAX's dispatch: not a `one_backend` case, which `-m large` runs under
# every backend.
@pytest.mark.skipif(keras.config.backend() != "jax", reason="JAX's dispatch")
@pytest.mark.parametrize("name", ["image_classifier", "masked_lm"])
def test_steps_get_their_batch_on_the_device_without_async_dispatch(name):
    # With JAX's asynchronous dispatch off (`reuse_freed_memory`), fit,
    # evaluate and predict hand each step its batch as ready device
    # arrays, so that the step runs on the calling thread (`GMLPTask`,
    # for every task; an array batch and a dict one here).
    import jax

    task, x, y = task_and_data(name)
    task.compile(optimizer="sgd")
    asynchronous = jax.config.read("jax_cpu_enable_async_dispatch")
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    try:
        task.fit(x, y, batch_size=2, verbose=0)
        task.evaluate(x, y, batch_size=2, verbose=0)
        task.predict(x, batch_size=2, verbose=0)
    finally:
        jax.config.update("jax_cpu_enable_async_dispatch", asynchronous)
    for function in ("train_function", "test_function", "predict_function"):
        assert getattr(getattr(task, function), "waits_for_inputs", False)


@pytest.mark.skipif(keras.config.backend() != "jax", reason="JAX's dispatch")
def test_steps_take_their_kernel_only_where_the_kernels_run():
    import jax

    from keras_gmlp import kernels
    from keras_gmlp.models.gmlp_task import unchanged

    def step(state, batches):
        return {}, state

    asynchronous = jax.config.read("jax_cpu_enable_async_dispatch")
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    try:
        kernels.configure("off")
        assert kernels.dispatch("step_function", unchanged, step) is step
        kernels.configure("on")
        wrapped = kernels.dispatch("step_function", unchanged, step)
        assert wrapped is not step and wrapped.waits_for_inputs
    finally:
        kernels.configure("auto")
        jax.config.update("jax_cpu_enable_async_dispatch", asynchronous)
