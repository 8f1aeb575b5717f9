import argparse
import dataclasses

import pytest

from keras_gmlp.training import arguments
from keras_gmlp.training.run_config import ImageClassificationConfig
from keras_gmlp.training.run_config import PretrainingConfig
from keras_gmlp.training.run_config import TextClassificationConfig
from keras_gmlp.training.run_config import TrainingConfig
from keras_gmlp.training.run_config import global_batch_size
from keras_gmlp.training.run_config import scaled_learning_rate
from keras_gmlp.training.run_config import warmup_steps
from keras_gmlp.workflows import image_classification
from keras_gmlp.workflows import pretraining
from keras_gmlp.workflows import text_classification

WORKFLOWS = [image_classification, pretraining, text_classification]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w.JOB)
def test_no_flags_give_the_config_defaults(workflow):
    # One place decides each default: the config's fields. Every field has
    # a flag, and parsing no flag gives exactly the default config.
    assert workflow.config_from_argv([]) == workflow.CONFIG_CLASS()


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w.JOB)
def test_every_field_has_its_flag(workflow):
    parser = workflow.build_parser()
    flags = {
        option for action in parser._actions for option in action.option_strings
    }
    for field in dataclasses.fields(workflow.CONFIG_CLASS):
        assert "--" + field.name.replace("_", "-") in flags, field.name


def test_flags_reach_the_fields():
    config = image_classification.config_from_argv(
        ["--dataset", "cifar10", "--no-flip", "--mixup", "0", "--epochs", "3"]
        + ["--no-tensorboard", "--no-export", "--jit-compile", "false"]
    )
    assert config.flip is False and config.mixup == 0.0
    assert config.epochs == 3 and not config.tensorboard
    assert not config.export and config.plots
    assert config.keras_jit_compile() is False
    assert image_classification.config_from_argv(["--flip"]).flip is True
    assert image_classification.config_from_argv([]).flip is None
    config = pretraining.config_from_argv(["--cased", "--attention-dim", "0"])
    assert config.cased and config.model_config(50)["attention_dim"] is None


def test_dataset_defaults_fill_only_unset_fields():
    digits = ImageClassificationConfig().resolved()
    assert digits.epochs == 20 and digits.learning_rate == 3e-3
    assert digits.preset is None and digits.hidden_dim == 64
    assert digits.flip is False and digits.translate == 0.1
    cifar = ImageClassificationConfig(dataset="cifar10", mixup=0.0)
    cifar = cifar.resolved()
    assert cifar.preset == "gmlp_s4_32" and cifar.hidden_dim is None
    assert cifar.mixup == 0.0 and cifar.cutmix == 1.0
    assert cifar.learning_rate_batch_size == 512
    imagenet = ImageClassificationConfig(
        dataset="imagenet2012", preset="gmlp_ti16_224", epochs=5
    ).resolved()
    assert imagenet.random_resized_crop and imagenet.epochs == 5
    assert imagenet.warmup == 10000 and imagenet.preset == "gmlp_ti16_224"
    augment = digits.augment_config()
    assert augment.translate == 0.1 and augment.randaugment_ops == 0


def test_a_folder_takes_the_small_image_recipe():
    # Not the paper's ImageNet recipe (224 px, 300 epochs, 10,000 warm-up
    # steps, a learning rate given for batches of 4096).
    config = ImageClassificationConfig(dataset="folder:images")
    resolved = config.resolved()
    assert resolved.preset == "gmlp_s4_32" and resolved.epochs == 100
    assert resolved.learning_rate_batch_size == 512
    assert resolved.warmup == 0.05
    assert resolved.peak_learning_rate(128) == pytest.approx(2.5e-4)
    # A preset of the user's keeps the recipe's training settings.
    chosen = dataclasses.replace(config, preset="gmlp_ti16_224").resolved()
    assert chosen.preset == "gmlp_ti16_224" and chosen.epochs == 100
    line = image_classification.describe_defaults(config)
    assert "folder recipe" in line and "--preset gmlp_s4_32" in line
    assert "--epochs 100" in line and "--learning-rate 0.001" in line


def test_batch_learning_rate_and_warmup_arithmetic():
    assert global_batch_size(2, 64) == 128
    assert global_batch_size(2, 64, batch_size=96) == 96
    with pytest.raises(ValueError, match="--batch-size 7 .* 2 replicas"):
        global_batch_size(2, 64, batch_size=7)
    assert scaled_learning_rate(1e-3, 1024, 512) == pytest.approx(2e-3)
    assert warmup_steps(0.1, 1000) == 100
    assert warmup_steps(300, 1000) == 300
    assert warmup_steps(5000, 1000) == 1000
    config = TrainingConfig(per_replica_batch_size=32, learning_rate=1e-3)
    assert config.global_batch_size(4) == 128
    assert config.peak_learning_rate(128) == pytest.approx(4e-3)
    config = dataclasses.replace(config, learning_rate_batch_size=256)
    assert config.peak_learning_rate(128) == pytest.approx(5e-4)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: TrainingConfig(mixed_precision="fp8"), "mixed_precision"),
        (lambda: TrainingConfig(strategy="horovod"), "'horovod'"),
        (lambda: TrainingConfig(epochs=0), "epochs=0"),
        (lambda: PretrainingConfig(objective="t5"), "objective='t5'"),
        (lambda: PretrainingConfig(spatial_unit="gated"), "'gated'"),
    ],
)
def test_bad_values_name_the_value(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_round_trip_through_a_dict_ignores_old_keys():
    config = TextClassificationConfig(epochs=2, train_file="a.csv")
    values = dict(config.to_dict(), no_tensorboard=True)
    assert TextClassificationConfig.from_dict(values) == config


def test_config_from_args_needs_every_field():
    namespace = argparse.Namespace(epochs=3)
    with pytest.raises(ValueError, match="fields \\['batch_size'"):
        arguments.config_from_args(TrainingConfig, namespace)
    parser = arguments.common_parser("Train.", TrainingConfig)
    config = arguments.config_from_args(
        TrainingConfig, parser.parse_args(["--epochs", "3"])
    )
    assert config == TrainingConfig(epochs=3)


def test_remat_flag_makes_the_models_under_its_scope():
    from keras_gmlp.kernels.gmlp_block import rematerializes_activations
    from keras_gmlp.layers import GMLPBlock

    def block_made_under(config):
        with config.remat_scope():
            block = GMLPBlock(ffn_dim=8)
        block.build((1, 4, 4))  # the unit is made here, out of the scope
        return block

    config = image_classification.config_from_argv(["--remat", "activations"])
    assert config.remat == "activations"
    assert rematerializes_activations(block_made_under(config))
    default = image_classification.config_from_argv([])
    assert not rematerializes_activations(block_made_under(default))
    with pytest.raises(ValueError, match="remat='all'"):
        TrainingConfig(remat="all")
