"""`FusedAdamW`: AdamW's arithmetic (a numpy reference, Keras' `AdamW`)
with TensorFlow's one-kernel update, and optimizers built before the
first training step is traced."""

import collections
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_gmlp.kernels.fused_adamw import FusedAdamW
from keras_gmlp.optimizers import build_optimizer_before_tracing
from tests.models.test_gmlp_task import TASKS
from tests.models.test_gmlp_task import task_and_data

BACKEND = keras.config.backend()
SHAPES = ((3, 4), (5,), (2, 3, 2))


def numpy_adamw(
    values,
    gradient_steps,
    learning_rates,
    weight_decay,
    decays,
    clipnorm=None,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-7,
):
    """AdamW as Keras defines it, in float64: the gradients clipped to a
    global norm, `w -= lr * wd * w` for the decayed variables, then Adam's
    bias-corrected step. `learning_rates[t]` is the rate of step `t`."""
    values = [np.array(v, "float64") for v in values]
    m = [np.zeros_like(v) for v in values]
    v2 = [np.zeros_like(v) for v in values]
    for t, (grads, lr) in enumerate(
        zip(gradient_steps, learning_rates, strict=True), 1
    ):
        grads = [np.array(g, "float64") for g in grads]
        if clipnorm:
            norm = np.sqrt(sum(np.sum(g**2) for g in grads))
            grads = [g * min(1.0, clipnorm / norm) for g in grads]
        for i, grad in enumerate(grads):
            if decays[i]:
                values[i] = values[i] - lr * weight_decay * values[i]
            m[i] = beta_1 * m[i] + (1 - beta_1) * grad
            v2[i] = beta_2 * v2[i] + (1 - beta_2) * grad**2
            alpha = lr * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)
            values[i] = values[i] - alpha * m[i] / (np.sqrt(v2[i]) + epsilon)
    return values


def random_problem(steps=4, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    values = [rng.normal(size=s).astype("float32") for s in SHAPES]
    gradient_steps = [
        [scale * rng.normal(size=s).astype("float32") for s in SHAPES]
        for _ in range(steps)
    ]
    return values, gradient_steps


def apply_steps(optimizer, variables, gradient_steps, traced=False):
    def apply(grads):
        optimizer.apply(grads, variables)

    if traced:
        import tensorflow as tf

        apply = tf.function(apply)
    for grads in gradient_steps:
        apply([keras.ops.convert_to_tensor(g) for g in grads])
    return [keras.ops.convert_to_numpy(v) for v in variables]


TRACED = [False, True] if BACKEND == "tensorflow" else [False]


@pytest.mark.parametrize("traced", TRACED)
@pytest.mark.parametrize("schedule", [False, True])
@pytest.mark.parametrize("clipnorm", [None, 1.0])
def test_matches_numpy_adamw(traced, schedule, clipnorm):
    values, gradient_steps = random_problem(scale=3.0)
    rates = [1e-2, 2e-2, 5e-3, 1e-3]
    learning_rate = 1e-2
    if schedule:
        learning_rate = keras.optimizers.schedules.PiecewiseConstantDecay(
            [0, 1, 2], rates
        )
    else:
        rates = [1e-2] * 4
    variables = [keras.Variable(v, name=f"w{i}") for i, v in enumerate(values)]
    optimizer = FusedAdamW(
        learning_rate=learning_rate, weight_decay=0.5, global_clipnorm=clipnorm
    )
    # The second variable (a bias-like vector) keeps its value's scale.
    optimizer.exclude_from_weight_decay(var_names=["w1"])
    got = apply_steps(optimizer, variables, gradient_steps, traced)
    expected = numpy_adamw(
        values, gradient_steps, rates, 0.5, [True, False, True], clipnorm
    )
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)


# JAX without x64 keeps float64 variables in float32.
TOLERANCES = {"float16": 3e-3, "bfloat16": 1e-2, "float64": 2e-5}


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the fused kernel")
def test_float16_matches_numpy_adamw():
    # Keras' own update rounds each of its steps to float16 (and drifts
    # further); TensorFlow's kernel computes in float16 too, in one pass.
    values, gradient_steps = random_problem(steps=3)
    variables = [keras.Variable(v, dtype="float16") for v in values]
    rounded = [
        keras.ops.convert_to_numpy(v).astype("float64") for v in variables
    ]
    optimizer = FusedAdamW(learning_rate=0.05, weight_decay=0.1, epsilon=1e-3)
    got = apply_steps(optimizer, variables, gradient_steps)
    expected = numpy_adamw(
        rounded, gradient_steps, [0.05] * 3, 0.1, [True] * 3, epsilon=1e-3
    )
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g.astype("float64"), e, rtol=3e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_other_dtypes_match_keras_adamw(dtype):
    # In bfloat16 both round beta_2 = 0.999 to 1 (no second moment at all):
    # the same update, however little it means.
    values, gradient_steps = random_problem(steps=3)
    results = []
    for optimizer_class in (FusedAdamW, keras.optimizers.AdamW):
        variables = [keras.Variable(v, dtype=dtype) for v in values]
        optimizer = optimizer_class(
            learning_rate=0.05, weight_decay=0.1, epsilon=1e-3
        )
        results.append(apply_steps(optimizer, variables, gradient_steps))
    for got, expected in zip(*results, strict=True):
        np.testing.assert_allclose(
            got.astype("float64"),
            expected.astype("float64"),
            rtol=TOLERANCES[dtype],
            atol=TOLERANCES[dtype],
        )


@pytest.mark.parametrize(
    "options",
    [{"amsgrad": True}, {"gradient_accumulation_steps": 2}, {"use_ema": True}],
)
def test_keras_options_match_keras_adamw(options):
    values, gradient_steps = random_problem(steps=4)
    results = []
    for optimizer_class in (FusedAdamW, keras.optimizers.AdamW):
        variables = [keras.Variable(v) for v in values]
        optimizer = optimizer_class(
            learning_rate=1e-2, weight_decay=0.2, **options
        )
        results.append(apply_steps(optimizer, variables, gradient_steps))
    for got, expected in zip(*results, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's kernels")
@pytest.mark.parametrize("amsgrad", [False, True])
def test_tensorflow_update_is_one_kernel_a_variable(amsgrad):
    import tensorflow as tf

    values, gradient_steps = random_problem(steps=1)
    variables = [keras.Variable(v) for v in values]
    optimizer = FusedAdamW(learning_rate=1e-3, amsgrad=amsgrad)
    optimizer.build(variables)
    grads = [tf.constant(g) for g in gradient_steps[0]]
    graph = (
        tf.function(lambda: optimizer.apply(grads, variables))
        .get_concrete_function()
        .graph
    )
    ops = collections.Counter(op.type for op in graph.get_operations())
    if amsgrad:
        # Keras' own update (no fused kernel for AMSGrad's maximum).
        assert ops["ResourceApplyAdam"] == 0
        return
    assert ops["ResourceApplyAdam"] == len(variables)
    assert ops["ResourceApplyGradientDescent"] == len(variables)
    # The bias corrections once a step, not once a variable.
    assert ops["Pow"] == 2
    # Keras' AdamW: about 45 nodes a variable.
    assert sum(ops.values()) < 15 * len(variables) + 30, ops


def torch_ops_of_one_update(variable_count):
    """The aten ops one `FusedAdamW.apply` dispatches under torch, for
    `variable_count` small variables (every third exempt from decay)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counted(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    rng = np.random.default_rng(3)
    variables = [
        keras.Variable(rng.normal(size=(4, 3)).astype("float32"), name=f"w{i}")
        for i in range(variable_count)
    ]
    optimizer = FusedAdamW(1e-3, weight_decay=0.1)
    optimizer.exclude_from_weight_decay(
        var_names=[f"w{i}" for i in range(0, variable_count, 3)]
    )
    optimizer.build(variables)
    grads = [keras.ops.ones((4, 3)) for _ in variables]
    optimizer.apply(grads, variables)  # Anything done once, done.
    with Counted() as counted:
        optimizer.apply(grads, variables)
    return counted.ops


@pytest.mark.skipif(BACKEND != "torch", reason="torch's kernels")
def test_torch_update_does_not_grow_with_the_variables():
    # Keras' torch AdamW updates every variable in a few multi-tensor
    # kernels, but a subclass of it falls back to the base optimizer's
    # loop, about 20 ops a variable.
    few, many = torch_ops_of_one_update(3), torch_ops_of_one_update(30)
    assert sum(many.values()) == sum(few.values()), (few, many)
    assert sum(many.values()) < 40, many


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's slices")
def test_tensorflow_sparse_gradient_equals_dense():
    import tensorflow as tf

    rng = np.random.default_rng(1)
    table = rng.normal(size=(6, 3)).astype("float32")
    rows = rng.normal(size=(2, 3)).astype("float32")
    sparse = tf.IndexedSlices(tf.constant(rows), tf.constant([4, 1]), (6, 3))
    dense = np.zeros((6, 3), "float32")
    dense[[4, 1]] = rows
    results = []
    for gradient in (sparse, tf.constant(dense)):
        variable = keras.Variable(table)
        FusedAdamW(learning_rate=0.1, weight_decay=0.1).apply(
            [gradient], [variable]
        )
        results.append(keras.ops.convert_to_numpy(variable))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
    assert not np.allclose(results[0], table)


# XLA compiles TensorFlow's fused kernels too; under `torch.compile` the
# torch update is Keras' own (the fused kernel does not compile).
@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_model_trains_as_with_keras_adamw(jit_compile):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 5)).astype("float32")
    y = rng.normal(size=(16, 2)).astype("float32")
    weights = []
    for optimizer_class in (FusedAdamW, keras.optimizers.AdamW):
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.Input((5,)), keras.layers.Dense(8), keras.layers.Dense(2)]
        )
        model.compile(
            optimizer=optimizer_class(1e-2, weight_decay=0.1),
            loss="mse",
            jit_compile=jit_compile,
        )
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        weights.append([keras.ops.convert_to_numpy(w) for w in model.weights])
    for got, expected in zip(*weights, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.distribute")
def test_mirrored_strategy_trains_as_keras_adamw():
    script = os.path.join(os.path.dirname(__file__), "fused_adamw_mirrored.py")
    process = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=300
    )
    assert process.returncode == 0, process.stderr[-4000:]
    result = json.loads(process.stdout.splitlines()[-1])
    assert result["replicas"] == 2
    assert result["smallest_move"] > 1e-3
    # Keras' AdamW with and without the strategy: `1 - beta_2` rounded
    # apart (the module's docstring) leaves about 2e-5 after 8 steps.
    assert result["from_keras_mirrored"] < 1e-4
    assert result["from_keras_alone"] < 1e-4


def test_config_round_trip():
    optimizer = FusedAdamW(learning_rate=3e-4, weight_decay=0.02, beta_2=0.98)
    restored = keras.optimizers.deserialize(
        keras.optimizers.serialize(optimizer)
    )
    assert type(restored) is FusedAdamW
    assert restored.get_config() == optimizer.get_config()


@pytest.mark.parametrize("name", TASKS)
def test_task_default_optimizers_are_fused(name):
    task, _, _ = task_and_data(name)
    task.compile()
    assert type(task.optimizer) is FusedAdamW


@pytest.mark.parametrize("name", TASKS)
def test_first_training_step_is_traced_once(name):
    # Keras' TensorFlow trainer built the optimizer while tracing the
    # first step, so tf.function traced the step twice.
    task, x, y = task_and_data(name)
    task.compile(
        optimizer=FusedAdamW(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    calls = []
    train_step = task.train_step

    def counted_train_step(*args):
        calls.append(1)
        return train_step(*args)

    task.train_step = counted_train_step
    task.train_on_batch(x, y)
    assert len(calls) == 1
    assert task.optimizer.built


def test_build_before_tracing_is_a_no_op_where_it_has_nothing_to_do():
    model = keras.Sequential([keras.layers.Dense(2)])
    build_optimizer_before_tracing(model)  # Not compiled.
    model.compile(optimizer=FusedAdamW(1e-3), loss="mse")
    build_optimizer_before_tracing(model)  # Not built.
    assert not model.optimizer.built
    model.build((None, 3))
    build_optimizer_before_tracing(model)
    assert model.optimizer.built == (BACKEND == "tensorflow")
