import json
import os
import signal
import socket
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_gmlp import cli
from keras_gmlp.data import image_sources
from keras_gmlp.data.image_sources import DataError
from keras_gmlp.workflows import image_classification
from tests.backends import xla_flags

BACKEND = keras.config.backend()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RECIPE = os.path.join(ROOT, "recipes", "image_classification.py")
TINY = [
    "--num-layers", "1",
    "--hidden-dim", "16",
    "--ffn-dim", "32",
    "--image-size", "8",
    "--patch-size", "4",
    "--verbose", "0",
]  # fmt: skip


def tiny_digits(output_dir, *extra):
    return [
        "--dataset", "digits",
        "--epochs", "2",
        "--steps-per-epoch", "2",
        "--output-dir", str(output_dir),
        *TINY,
        *extra,
    ]  # fmt: skip


def run_recipe(argv, env=None, check=True, **kwargs):
    env = dict(os.environ, **(env or {}))
    process = subprocess.run(
        [sys.executable, RECIPE, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        **kwargs,
    )
    if check:
        assert process.returncode == 0, process.stderr[-5000:]
    return process


def read_results(output_dir):
    with open(os.path.join(output_dir, "results.json")) as file:
        return json.load(file)


def train(argv, callbacks=None):
    """Runs the job in this process, as the recipe and the CLI do."""
    config = image_classification.config_from_argv(argv)
    return image_classification.run(config, callbacks=callbacks)


def test_digits_run_writes_every_output(tmp_path, capsys):
    output_dir = tmp_path / "run"
    assert cli.main(["train-image-classifier", *tiny_digits(output_dir)]) == 0
    results = read_results(output_dir)
    assert results["backend"] == BACKEND
    assert results["epochs"] == 2 and results["device_count"] >= 1
    assert 0 <= results["metrics"]["val_accuracy"] <= 1
    assert (
        results["metrics"]["val_top5_accuracy"]
        >= (results["metrics"]["val_accuracy"])
    )
    assert results["wall_time_seconds"] > 0
    assert results["counts"]["skipped_records"] == {}
    assert results["counts"]["validation_examples"] == 360
    assert results["arguments"]["dataset"] == "digits"
    assert len(results["history"]["val_accuracy"]) == 2
    for name in (
        "best.keras",
        "last.keras",
        "curves.png",
        "spatial_filters.png",
    ):
        assert (output_dir / name).exists(), name
    assert os.listdir(output_dir / "tensorboard")

    # The SavedModel: uint8 images in, the Keras model's probabilities out.
    model = keras.saving.load_model(output_dir / "model.keras")
    pixels = np.random.default_rng(0).integers(0, 256, (4, 8, 8, 1), np.uint8)
    expected = keras.ops.convert_to_numpy(
        keras.ops.softmax(model(pixels.astype("float32") / 127.5 - 1))
    )
    loaded = tf.saved_model.load(str(output_dir / "saved_model"))
    served = loaded.serve(tf.constant(pixels))
    np.testing.assert_allclose(served.numpy(), expected, atol=2e-5)

    # The preset folder: keras-hub's generic class finds the gMLP task, and
    # its preprocessor takes the raw uint8 images.
    import keras_hub

    task = keras_hub.models.ImageClassifier.from_preset(
        str(output_dir / "preset")
    )
    assert type(task).__name__ == "GMLPImageClassifier"
    logits = task.predict(pixels, verbose=0)
    capsys.readouterr()
    assert cli.main(["info", str(output_dir / "preset")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["task"] == "GMLPImageClassifier"
    assert summary["parameters"] == model.count_params()
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.ops.softmax(logits)),
        expected,
        atol=2e-5,
    )

    # The run through the other commands: scored again as in training,
    # an image file classified as the held-out images are, re-exported.
    capsys.readouterr()
    assert cli.main(["evaluate", str(output_dir)]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["accuracy"] == pytest.approx(
        results["metrics"]["val_accuracy"], abs=1e-6
    )
    image = pixels[0]
    path = tmp_path / "digit.png"
    path.write_bytes(tf.io.encode_png(image).numpy())
    assert cli.main(["predict", str(output_dir), "--image", str(path)]) == 0
    top = json.loads(capsys.readouterr().out)
    assert [entry["label"] for entry in top] == [
        str(i) for i in np.argsort(-expected[0], kind="stable")[:5]
    ]
    assert top[0]["probability"] == pytest.approx(expected[0].max(), 1e-5)
    assert cli.main(["export", str(output_dir), str(tmp_path / "again")]) == 0
    # Keep the loaded object: its variables go with it.
    again = tf.saved_model.load(str(tmp_path / "again"))
    np.testing.assert_allclose(
        again.serve(tf.constant(pixels)).numpy(), expected, atol=2e-5
    )


@pytest.mark.one_backend("torch")
@pytest.mark.one_backend("jax")
def test_held_out_images_are_scored_in_equal_batches(tmp_path, monkeypatch):
    # 360 held-out digits in batches of 64 end with a batch of 40, whose
    # shape JAX compiles a second test step for (0.5 s of the
    # quick-start); batches of 60 score the same images with one.
    from keras_gmlp.data import images

    pipelines = {}
    make_batches = images.batches

    def recording_batches(data, split, *args, **kwargs):
        pipelines[split] = make_batches(data, split, *args, **kwargs)
        return pipelines[split]

    monkeypatch.setattr(images, "batches", recording_batches)
    train(tiny_digits(tmp_path / "run", "--batch-size", "64", "--epochs", "1"))
    sizes = [len(labels) for _, labels in pipelines["validation"]]
    assert sum(sizes) == 360
    assert set(sizes) == {60}
    image_classification.evaluate_run(str(tmp_path / "run"))
    sizes = [len(labels) for _, labels in pipelines["validation"]]
    assert set(sizes) == {60}


@pytest.mark.one_backend("torch")
def test_killed_run_resumes_from_its_last_epoch(tmp_path):
    output_dir = tmp_path / "run"
    argv = tiny_digits(output_dir, "--no-export", "--no-plots")
    argv[argv.index("--epochs") + 1] = "3"
    # The first attempt kills itself (SIGKILL) at the end of epoch 2.
    killer = (
        "import os, signal, sys, keras\n"
        f"sys.argv[0] = {RECIPE!r}\n"
        f"sys.path.insert(0, {ROOT!r})\n"
        "from keras_gmlp.workflows import image_classification as job\n"
        "class Kill(keras.callbacks.Callback):\n"
        "    def on_epoch_end(self, epoch, logs=None):\n"
        "        if epoch == 1:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        f"job.run(job.config_from_argv({argv!r}), callbacks=[Kill()])\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", killer], capture_output=True, timeout=600
    )
    assert process.returncode == -signal.SIGKILL
    assert not (output_dir / "results.json").exists()
    history = json.load(open(output_dir / "history.json"))
    assert [record["epoch"] for record in history] == [0, 1]

    # The same command again finishes the run from epoch 3.
    run_recipe(argv)
    results = read_results(output_dir)
    assert results["epochs"] == 3
    assert len(results["history"]["loss"]) == 3
    assert results["history"]["loss"][:2] == [r["loss"] for r in history]
    assert not (output_dir / "backup" / "latest.weights.h5").exists()


def write_jpeg_folder(root, corrupt):
    rng = np.random.default_rng(0)
    for label in ("a", "b"):
        os.makedirs(root / label)
        for i in range(10):
            image = rng.integers(0, 256, (10, 10, 3), dtype=np.uint8)
            data = tf.io.encode_jpeg(image).numpy()
            (root / label / f"{i}.jpg").write_bytes(data)
    for path in corrupt:
        (root / path).write_bytes(b"\xff\xd8\xff broken")


@pytest.mark.one_backend("tensorflow")
def test_folder_run_counts_corrupt_images(tmp_path):
    folder = tmp_path / "images"
    write_jpeg_folder(folder, corrupt=["a/3.jpg", "b/9.jpg"])
    output_dir = tmp_path / "run"
    argv = [
        "--dataset", f"folder:{folder}",
        "--epochs", "1",
        "--batch-size", "4",
        "--randaugment-ops", "0",
        "--output-dir", str(output_dir),
        "--no-export", "--no-plots", "--no-tensorboard",
        *TINY,
    ]  # fmt: skip
    results = train(argv)
    assert results["counts"]["skipped_records"] == {
        "train": 1,
        "validation": 1,
    }
    assert results["counts"]["train_examples"] == 18


@pytest.mark.one_backend("torch")
def test_tfds_cifar10_run_with_the_paper_recipe(tmp_path):
    # RandAugment takes ~30 s to trace under JAX; it runs on the others.
    randaugment = "0" if BACKEND == "jax" else "2"
    argv = [
        "--dataset", "cifar10",
        "--data-dir", str(tmp_path / "tfds"),
        "--epochs", "1",
        "--batch-size", "8",
        "--randaugment-ops", randaugment,
        "--random-erasing", "0.25",
        "--drop-path-rate", "0.1",
        "--output-dir", str(tmp_path / "run"),
        "--no-export", "--no-plots", "--no-tensorboard",
        *TINY,
    ]  # fmt: skip
    with tfds.testing.mock_data(num_examples=16):
        results = train(argv)
    assert results["model_config"]["preset"] == "gmlp_s4_32"
    assert results["model_config"]["num_layers"] == 1
    assert results["arguments"]["mixup"] == 0.8
    assert results["arguments"]["cutmix"] == 1.0
    assert results["counts"]["steps_per_epoch"] == 2


@pytest.mark.parametrize(
    "argv, error, match",
    [
        (["--dataset", "mnist"], ValueError, "Unknown dataset 'mnist'"),
        (
            ["--image-size", "10", "--patch-size", "4"],
            ValueError,
            "height 10 is not divisible by patch size 4",
        ),
        (["--preset", "gmlp_base"], ValueError, "'gmlp_base' is a text"),
        (["--batch-size", "4096"], DataError, "fewer than one batch"),
    ],
)
def test_bad_inputs_name_the_value(tmp_path, argv, error, match):
    base = [
        "--dataset",
        "digits",
        "--output-dir",
        str(tmp_path),
        "--verbose",
        "0",
    ]
    with pytest.raises(error, match=match):
        train(base + argv)


def test_bad_flag_values_are_rejected(capsys):
    with pytest.raises(SystemExit):
        assert cli.main(["train-image-classifier", "--epochs", "0"]) == 0
    assert "expected an integer >= 1, got 0" in capsys.readouterr().err


def test_missing_cifar_files_offline_fail_fast(tmp_path, monkeypatch):
    monkeypatch.setattr(image_sources, "_reachable", lambda host: False)
    argv = ["--dataset", "cifar10", "--data-dir", str(tmp_path)]
    with pytest.raises(DataError, match="downloads/manual"):
        train(argv + ["--output-dir", str(tmp_path)])


@pytest.mark.skipif(BACKEND != "torch", reason="torch only")
def test_torch_states_plainly_what_it_supports(tmp_path):
    with pytest.raises(ValueError, match="PyTorch backend trains on one"):
        train(tiny_digits(tmp_path, "--strategy", "mirrored"))


@pytest.mark.one_backend("jax")
@pytest.mark.skipif(BACKEND == "torch", reason="one device on torch")
def test_two_device_strategy(tmp_path):
    strategy = "mirrored" if BACKEND == "tensorflow" else "data_parallel"
    output_dir = tmp_path / "run"
    run_recipe(
        tiny_digits(output_dir, "--strategy", strategy, "--split-cpu", "2"),
        env={"XLA_FLAGS": xla_flags(cpu_devices=2)},
    )
    results = read_results(output_dir)
    assert results["distribution"]["strategy"] == strategy
    assert results["distribution"]["num_replicas"] == 2
    # Per-replica batch 64 by default: the global batch doubles, and so
    # does the learning rate.
    assert results["counts"]["global_batch_size"] == 128
    assert results["peak_learning_rate"] == pytest.approx(2 * 3e-3)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TF_CONFIG is TF only")
def test_two_workers_on_localhost(tmp_path):
    output_dir = tmp_path / "run"
    workers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    argv = tiny_digits(output_dir, "--no-export", "--no-plots")
    processes = []
    for index in range(2):
        config = {
            "cluster": {"worker": workers},
            "task": {"type": "worker", "index": index},
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, RECIPE, *argv],
                env=dict(os.environ, TF_CONFIG=json.dumps(config)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for process in processes:
        _, errors = process.communicate(timeout=600)
        assert process.returncode == 0, errors[-5000:]
    results = read_results(output_dir)
    assert results["distribution"]["strategy"] == "multi_worker"
    assert results["distribution"]["num_replicas"] == 2
    chief = json.load(open(output_dir / "history.json"))
    other = json.load(open(output_dir / "workers" / "1" / "history.json"))
    assert [r["loss"] for r in chief] == pytest.approx(
        [r["loss"] for r in other]
    )


def wait_for_all(processes, timeout=300):
    """Waits for every process; stops the others when one fails."""
    deadline = time.monotonic() + timeout
    while any(process.poll() is None for process in processes):
        failed = [p for p in processes if p.poll() not in (None, 0)]
        if failed or time.monotonic() > deadline:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            break
        time.sleep(0.2)
    return [process.returncode for process in processes]


@pytest.mark.skipif(BACKEND != "jax", reason="KERAS_DISTRIBUTION_* is JAX")
def test_two_jax_processes_on_localhost(tmp_path):
    # Two processes of one CPU device each form one 2-device DataParallel
    # mesh (JAX's distributed runtime, gloo collectives). Each feeds its
    # half of every global batch (Keras' auto-sharding of the tf.data
    # pipeline): checked against one process on two devices in
    # tests/training/test_distribution.py (-m large).
    output_dir = tmp_path / "run"
    argv = tiny_digits(output_dir, "--no-export", "--no-plots")
    argv += ["--no-tensorboard", "--strategy", "data_parallel"]
    # One CPU device each.
    env = dict(os.environ, XLA_FLAGS=xla_flags())
    env.update(
        KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{free_port()}",
        KERAS_DISTRIBUTION_NUM_PROCESSES="2",
    )
    processes, logs = [], []
    for index in range(2):
        logs.append(tmp_path / f"process{index}.log")
        with open(logs[-1], "w") as log:
            processes.append(
                subprocess.Popen(
                    [sys.executable, RECIPE, *argv],
                    env=dict(env, KERAS_DISTRIBUTION_PROCESS_ID=str(index)),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    returncodes = wait_for_all(processes)
    outputs = [log.read_text() for log in logs]
    for returncode, output in zip(returncodes, outputs, strict=True):
        assert returncode == 0, output[-5000:]
        assert "num_replicas=2, num_processes=2); global batch 128" in output
    results = read_results(output_dir)
    assert results["distribution"]["strategy"] == "data_parallel"
    assert results["distribution"]["num_replicas"] == 2
    assert results["distribution"]["num_processes"] == 2
    assert results["device_count"] == 2
    # As for two devices: the global batch and the learning rate double.
    assert results["counts"]["global_batch_size"] == 128
    assert results["peak_learning_rate"] == pytest.approx(2 * 3e-3)
    # Only the chief writes results and checkpoints; the other process
    # keeps its history under workers/1/.
    for name in ("model.keras", "best.keras", "last.keras"):
        assert (output_dir / name).exists(), name
    worker = output_dir / "workers" / "1"
    assert sorted(os.listdir(worker)) == ["history.json", "wall_time.json"]
    chief = json.load(open(output_dir / "history.json"))
    other = json.load(open(worker / "history.json"))
    assert len(chief) == 2
    assert [r["loss"] for r in chief] == [r["loss"] for r in other]
    assert results["history"]["loss"] == [r["loss"] for r in chief]


@pytest.mark.one_backend("tensorflow")
def test_mixed_precision_run_has_float32_outputs(tmp_path):
    output_dir = tmp_path / "run"
    argv = tiny_digits(output_dir, "--no-export", "--no-plots")
    argv += ["--mixed-precision", "mixed_bfloat16", "--no-tensorboard"]
    results = train(argv)
    assert results["arguments"]["mixed_precision"] == "mixed_bfloat16"
    model = keras.saving.load_model(output_dir / "model.keras")
    assert model.get_layer("block_0").compute_dtype == "bfloat16"
    assert model.outputs[0].dtype == "float32"


@pytest.mark.one_backend("torch")
def test_vit_trains_through_the_same_pipeline(tmp_path):
    from keras_gmlp.baselines import LEARNING_RATES

    output_dir = tmp_path / "vit"
    # A gMLP large enough for a two-layer ViT of its width. "deit" is the
    # ViT's alias.
    flags = ["--architecture", "deit", "--num-layers", "2", "--ffn-dim", "128"]
    results = train(tiny_digits(output_dir, *flags))
    model = results["model"]
    assert results["arguments"]["architecture"] == "deit"
    assert model["architecture"] == "vit"
    assert model["trainable_parameters"] == pytest.approx(
        model["gmlp_trainable_parameters"], rel=0.03
    )
    # No --learning-rate: ViT's digits default, at the dataset's batch.
    assert results["peak_learning_rate"] == pytest.approx(
        LEARNING_RATES["image"]["vit"]["digits"]
    )
    assert 0 <= results["metrics"]["val_accuracy"] <= 1
    assert results["spatial_locality"] is None
    again = image_classification.evaluate_run(str(output_dir))
    assert again["accuracy"] == pytest.approx(
        results["metrics"]["val_accuracy"], abs=1e-6
    )
