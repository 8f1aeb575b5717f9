import keras
import pytest

from keras_gmlp.training import keras_patches

BACKEND = keras.config.backend()


@pytest.mark.parametrize(
    "text, version",
    [("3.15.1", (3, 15, 1)), ("3.16.0.dev2026", (3, 16, 0)), ("4.0", (4, 0))],
)
def test_keras_version_parses_release_strings(monkeypatch, text, version):
    monkeypatch.setattr(keras, "version", lambda: text)
    assert keras_patches.keras_version() == version


def test_patches_apply_only_to_the_affected_keras_versions():
    assert keras_patches.needs_patches((3, 15, 1))
    assert keras_patches.needs_patches((3, 10, 0))
    assert not keras_patches.needs_patches((3, 9, 2))
    assert not keras_patches.needs_patches((3, 16, 0))
    assert not keras_patches.needs_patches((4, 0, 0))


def test_a_keras_without_the_bugs_is_left_alone(monkeypatch):
    from keras.src.saving import saving_lib

    monkeypatch.setattr(keras_patches, "keras_version", lambda: (3, 16, 0))
    monkeypatch.setattr(keras_patches, "_WORKAROUNDS_INSTALLED", False)
    monkeypatch.setattr(keras_patches, "_JAX_WORKAROUNDS_INSTALLED", False)
    monkeypatch.setattr(keras_patches, "_SKIPSET_CACHE_INSTALLED", False)
    from keras.src.backend.tensorflow import trainer

    skipset = saving_lib.get_attr_skipset
    reduce = trainer.reduce_per_replica
    assert not keras_patches.install_multi_worker_workarounds()
    assert not keras_patches.install_jax_multi_process_workarounds()
    assert not keras_patches.install_saving_skipset_cache()
    assert saving_lib.get_attr_skipset is skipset
    assert trainer.reduce_per_replica is reduce


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow only")
def test_multi_worker_workarounds_patch_keras_once():
    from keras.src.backend.tensorflow import trainer

    from keras_gmlp.training.keras_patches import (
        install_multi_worker_workarounds,
    )

    assert install_multi_worker_workarounds()
    patched = trainer.reduce_per_replica
    install_multi_worker_workarounds()
    assert trainer.reduce_per_replica is patched
    # Outside multi-worker training the original reduction is used.
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    value = tf.constant([1.0, 3.0])
    assert patched(value, strategy, "auto") is value


@pytest.mark.skipif(BACKEND != "jax", reason="jax only")
def test_jax_multi_process_workarounds_patch_keras_once(monkeypatch):
    from keras.src.backend.common import global_state
    from keras.src.optimizers import optimizer
    from keras.src.saving import saving_lib

    from keras_gmlp.training.keras_patches import (
        install_jax_multi_process_workarounds,
    )

    assert install_jax_multi_process_workarounds()
    patched = saving_lib.get_attr_skipset
    install_jax_multi_process_workarounds()
    assert saving_lib.get_attr_skipset is patched
    # Saving's reference optimizer is built with no distribution set (no
    # cross-process variables), and the distribution in force comes back.
    seen = []

    class Reference(optimizer.Optimizer):
        def __init__(self, *args, **kwargs):
            seen.append(keras.distribution.distribution())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(optimizer, "Optimizer", Reference)
    # Neither Keras' cache nor the skipset cache's (when a recipe test
    # installed it) holds the optimizer's set.
    monkeypatch.setattr(keras_patches, "_SAVING_SKIPSETS", {})
    global_state.set_global_attribute("saving_attr_skiplist_Optimizer", None)
    distribution = keras.distribution.DataParallel()
    with distribution.scope():
        assert "variables" not in patched("Optimizer")
        assert keras.distribution.distribution() is distribution
    assert seen == [None]
    global_state.set_global_attribute("saving_attr_skiplist_Optimizer", None)


def test_the_recipes_saves_build_no_reference_objects_after_the_first(
    tmp_path, monkeypatch
):
    # Keras 3.15's saving builds a `Layer()` (and an `Optimizer`, a
    # `Metric`...) to list the attributes it skips, for every object it
    # walks; with the recipes' callbacks made, each type's list is built
    # once. The saved model loads with its weights.
    import numpy as np
    from keras.src.layers import layer

    from keras_gmlp.training import training_callbacks

    training_callbacks(str(tmp_path / "run"), tensorboard=False)
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
    built = []
    original = layer.Layer.__init__

    def counted(self, *args, **kwargs):
        if type(self) is layer.Layer:
            built.append(self)
        original(self, *args, **kwargs)

    path = str(tmp_path / "model.keras")
    model.save(path)
    monkeypatch.setattr(layer.Layer, "__init__", counted)
    model.save(path)
    monkeypatch.undo()
    assert built == []
    loaded = keras.saving.load_model(path)
    for got, want in zip(
        loaded.get_weights(), model.get_weights(), strict=True
    ):
        np.testing.assert_array_equal(got, want)
