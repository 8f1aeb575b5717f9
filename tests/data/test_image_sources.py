import os
import pickle

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_gmlp.data import image_sources
from keras_gmlp.data.image_sources import DataError


def collect(dataset):
    pairs = [(x.numpy(), int(y)) for x, y in dataset]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def write_cifar_pickles(folder, name, rng, per_file=4):
    spec = image_sources.CIFAR[name]
    train_files, test_files = spec["pickle"]
    os.makedirs(folder, exist_ok=True)
    written = {}
    for file in train_files + test_files:
        data = rng.integers(0, 256, size=(per_file, 3072), dtype=np.uint8)
        labels = rng.integers(0, spec["num_classes"], size=per_file).tolist()
        batch = {b"data": data, spec["label_key"]: labels}
        if name == "cifar100":
            batch[b"coarse_labels"] = [0] * per_file
        with open(os.path.join(folder, file), "wb") as handle:
            pickle.dump(batch, handle)
        written[file] = (data, labels)
    return written


def write_cifar_binaries(folder, name, rng, per_file=3):
    spec = image_sources.CIFAR[name]
    train_files, test_files = spec["binary"]
    os.makedirs(folder, exist_ok=True)
    written = {}
    for file in train_files + test_files:
        data = rng.integers(0, 256, size=(per_file, 3072), dtype=np.uint8)
        labels = rng.integers(0, spec["num_classes"], size=per_file)
        rows = []
        for row, label in zip(data, labels, strict=True):
            prefix = [label] if name == "cifar10" else [label // 5, label]
            rows.append(np.concatenate([np.array(prefix, np.uint8), row]))
        np.stack(rows).tofile(os.path.join(folder, file))
        written[file] = (data, labels.tolist())
    return written


def to_hwc(row):
    return row.reshape(3, 32, 32).transpose(1, 2, 0)


def write_jpeg(path, rng, size=(12, 10)):
    image = rng.integers(0, 256, size=size + (3,), dtype=np.uint8)
    with open(path, "wb") as handle:
        handle.write(tf.io.encode_jpeg(image).numpy())


def write_folder(root, rng, classes=("cat", "dog"), per_class=10):
    for name in classes:
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(per_class):
            write_jpeg(os.path.join(root, name, f"{i:03d}.jpg"), rng)


def test_digits_has_a_fixed_stratified_split():
    data = image_sources.load_images("digits")
    assert (data.num_train, data.num_validation) == (1437, 360)
    assert (data.num_classes, data.num_channels, data.image_size) == (
        10,
        1,
        (8, 8),
    )
    x, y = collect(data.validation)
    again = collect(image_sources.load_images("digits").validation)
    np.testing.assert_array_equal(np.stack(x), np.stack(again[0]))
    assert np.bincount(y).min() >= 35  # Stratified: 36 per class.
    assert x[0].dtype == np.uint8 and np.stack(x).max() == 255


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_pickles_decode_to_hwc(tmp_path, rng, name):
    folder = tmp_path / image_sources.CIFAR[name]["pickle_folder"]
    written = write_cifar_pickles(folder, name, rng)
    # data_dir may be the parent of the usual folder.
    data = image_sources.load_images(name, str(tmp_path))
    train_files, test_files = image_sources.CIFAR[name]["pickle"]
    assert data.num_train == 4 * len(train_files)
    assert data.num_validation == 4
    x, y = collect(data.validation)
    expected_data, expected_labels = written[test_files[0]]
    np.testing.assert_array_equal(x[2], to_hwc(expected_data[2]))
    assert y == expected_labels
    assert data.skipped() == {}


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_binaries_decode_to_hwc(tmp_path, rng, name):
    written = write_cifar_binaries(tmp_path, name, rng)
    data = image_sources.load_images(name, str(tmp_path))
    train_files, test_files = image_sources.CIFAR[name]["binary"]
    assert data.source.startswith("binary")
    assert data.num_train == 3 * len(train_files)
    x, y = collect(data.train)
    expected_data, expected_labels = written[train_files[0]]
    np.testing.assert_array_equal(x[1], to_hwc(expected_data[1]))
    assert y[:3] == expected_labels


def test_cifar_archive_is_extracted(tmp_path, rng):
    import tarfile

    source = tmp_path / "src"
    write_cifar_pickles(source / "cifar-10-batches-py", "cifar10", rng)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with tarfile.open(data_dir / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(source / "cifar-10-batches-py", "cifar-10-batches-py")
    data = image_sources.load_images("cifar10", str(data_dir))
    assert data.num_train == 20


def test_truncated_cifar_binary_names_file_and_size(tmp_path, rng):
    write_cifar_binaries(tmp_path, "cifar10", rng)
    path = tmp_path / "data_batch_3.bin"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DataError, match="data_batch_3.bin has 9209"):
        image_sources.load_images("cifar10", str(tmp_path))


def test_cifar_pickle_of_wrong_image_size(tmp_path, rng):
    write_cifar_pickles(tmp_path, "cifar10", rng)
    with open(tmp_path / "test_batch", "wb") as handle:
        pickle.dump(
            {b"data": np.zeros((2, 1024), np.uint8), b"labels": [0, 1]}, handle
        )
    with pytest.raises(DataError, match=r"shape \(2, 1024\).*3072"):
        image_sources.load_images("cifar10", str(tmp_path))


def test_cifar_empty_pickle_file(tmp_path, rng):
    write_cifar_pickles(tmp_path, "cifar10", rng)
    (tmp_path / "data_batch_2").write_bytes(b"")
    with pytest.raises(DataError, match="data_batch_2 is not a CIFAR"):
        image_sources.load_images("cifar10", str(tmp_path))


def test_folder_skips_and_counts_corrupt_images(tmp_path, rng):
    write_folder(tmp_path, rng)
    (tmp_path / "cat" / "002.jpg").write_bytes(b"not a jpeg at all")
    (tmp_path / "dog" / "004.jpg").write_bytes(b"")
    data = image_sources.load_images(f"folder:{tmp_path}")
    assert data.class_names == ["cat", "dog"]
    assert (data.num_train, data.num_validation) == (18, 2)
    x, y = collect(data.train)
    assert len(x) == 16 and sorted(set(y)) == [0, 1]
    assert x[0].shape == (12, 10, 3) and x[0].dtype == np.uint8
    collect(data.validation)
    assert data.skipped() == {"train": 2, "validation": 0}


def test_a_folder_of_one_class_is_refused(tmp_path, rng):
    write_folder(tmp_path, rng, classes=("cat",))
    with pytest.raises(DataError) as error:
        image_sources.load_images(f"folder:{tmp_path}")
    assert str(error.value).startswith(f"{tmp_path}: one class ('cat')")


def test_mostly_corrupt_images_stop_unless_allowed(tmp_path, rng):
    write_folder(tmp_path, rng)
    for name in ("cat", "dog"):
        for i in range(6):
            (tmp_path / name / f"{i:03d}.jpg").write_bytes(b"no image")
    data = image_sources.load_images(f"folder:{tmp_path}")
    collect(data.train)
    collect(data.validation)
    with pytest.raises(ValueError) as error:
        data.check_skipped()
    message = str(error.value)
    assert "(train): 12 of 18 records skipped" in message
    assert "--allow-skipped" in message
    data.check_skipped(allow=True)


def test_imagenet_folders_with_train_and_val(tmp_path, rng):
    write_folder(tmp_path / "train", rng, ("n01", "n02", "n03"), per_class=2)
    write_folder(tmp_path / "val", rng, ("n01", "n02", "n03"), per_class=1)
    data = image_sources.load_images("imagenet2012", str(tmp_path))
    assert (data.num_train, data.num_validation, data.num_classes) == (6, 3, 3)
    _, y = collect(data.validation)
    assert y == [0, 1, 2]


def test_empty_folder_says_what_is_expected(tmp_path):
    with pytest.raises(DataError, match="No images found.*<class name>"):
        image_sources.load_images(f"folder:{tmp_path}")
    with pytest.raises(DataError, match="does not exist"):
        image_sources.load_images(f"folder:{tmp_path}/missing")


def write_tfrecords(path, rng, labels, corrupt_index=None):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, label in enumerate(labels):
            image = rng.integers(0, 256, size=(9, 7, 3), dtype=np.uint8)
            encoded = tf.io.encode_jpeg(image).numpy()
            if i == corrupt_index:
                encoded = encoded[:20]
            feature = {
                "image/encoded": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[encoded])
                ),
                "image/class/label": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[label])
                ),
            }
            example = tf.train.Example(
                features=tf.train.Features(feature=feature)
            )
            writer.write(example.SerializeToString())


def test_imagenet_tfrecords_with_one_based_labels(tmp_path, rng):
    write_tfrecords(tmp_path / "train-00000-of-00002", rng, [1, 2, 3])
    write_tfrecords(
        tmp_path / "train-00001-of-00002", rng, [1000, 5, 6], corrupt_index=1
    )
    # Label 0 (background in 1-based files) is out of range: skipped.
    write_tfrecords(tmp_path / "validation-00000-of-00001", rng, [0, 10])
    data = image_sources.load_images("imagenet2012", str(tmp_path))
    assert (data.num_train, data.num_validation) == (6, 2)
    x, y = collect(data.train)
    assert sorted(y) == [0, 1, 2, 5, 999]
    assert x[0].shape == (9, 7, 3)
    _, y = collect(data.validation)
    assert y == [9]
    assert data.skipped() == {"train": 1, "validation": 1}


@pytest.mark.parametrize(
    "name, splits, classes",
    [("cifar10", (8, 8), 10), ("imagenet2012", (8, 8), 1000)],
)
def test_tfds_sources_through_mock_data(tmp_path, name, splits, classes):
    with tfds.testing.mock_data(num_examples=8):
        data = image_sources.load_images(name, str(tmp_path))
        assert (data.num_train, data.num_validation) == splits
        assert data.num_classes == classes
        x, y = collect(data.train.take(2))
    assert x[0].dtype == np.uint8 and x[0].shape[-1] == 3
    assert all(0 <= label < classes for label in y)


def test_any_tfds_image_dataset_by_name(tmp_path):
    with tfds.testing.mock_data(num_examples=8):
        data = image_sources.load_images("tfds:mnist", str(tmp_path))
        assert (data.num_train, data.num_validation) == (8, 8)
        assert data.num_classes == 10 and data.num_channels == 1
        x, _ = collect(data.train.take(1))
    assert x[0].shape == (28, 28, 1)


def test_tfds_imagenet_without_archives_fails_fast(tmp_path):
    with pytest.raises(DataError, match="downloads/manual"):
        image_sources.load_images("imagenet2012", str(tmp_path))


def test_tfds_cifar_offline_fails_fast(tmp_path, monkeypatch):
    monkeypatch.setattr(image_sources, "_reachable", lambda host: False)
    with pytest.raises(
        DataError,
        match="cannot be reached.*cifar-10-binary.tar.gz",
    ):
        image_sources.load_images("cifar10", str(tmp_path))


def test_unknown_dataset_lists_the_choices():
    with pytest.raises(ValueError, match="'mnist'.*digits.*folder:PATH"):
        image_sources.load_images("mnist")
