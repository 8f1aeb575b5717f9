import keras
import pytest

from keras_gmlp import PRESETS
from keras_gmlp import models
from tests.backends import in_turn

# The paper's exact ImageNet counts (1000 classes) and its rounded language
# model counts (32K vocabulary, 512 tokens, Toeplitz spatial weights).
IMAGE_PARAMETERS = {
    "gmlp_ti16_224": 5_867_328,
    "gmlp_s16_224": 19_422_656,
    "gmlp_b16_224": 73_075_392,
}
TEXT_PARAMETERS = {
    "gmlp_base": 130e6,
    "amlp_base": 109e6,
    "gmlp_large": 365e6,
    "amlp_large": 316e6,
}


# A count does not depend on the backend: each is taken under one.
@pytest.mark.one_backend("torch")
@pytest.mark.parametrize("preset", sorted(IMAGE_PARAMETERS))
def test_image_preset_parameter_counts_are_exact(preset):
    model = models.image_classifier(preset)
    assert model.count_params() == IMAGE_PARAMETERS[preset]


@pytest.mark.one_backend("torch")  # builds 316M parameters in 2 s, TF in 45
@pytest.mark.parametrize("preset", sorted(TEXT_PARAMETERS))
def test_text_preset_parameter_counts_within_one_percent(preset):
    count = models.masked_lm(preset).count_params()
    assert abs(count / TEXT_PARAMETERS[preset] - 1.0) < 0.01, count


@pytest.mark.one_backend("torch")
def test_full_spatial_weight_does_not_give_the_paper_count():
    # With a dense n x n W the base model has about 142.6M parameters: the
    # paper's 130M needs the Toeplitz weight.
    count = models.masked_lm("gmlp_base", spatial="dense").count_params()
    assert abs(count / 142.6e6 - 1.0) < 0.005


@pytest.mark.parametrize(
    "preset",
    in_turn(sorted(k for k, v in PRESETS.items() if v["family"] == "image")),
)
def test_every_image_preset_predicts(preset):
    config = PRESETS[preset]["config"]
    model = models.image_classifier(preset, num_layers=1)
    size = config["image_size"]
    logits = model(keras.ops.zeros((1, size, size, 3)))
    assert logits.shape == (1, config["num_classes"])


@pytest.mark.parametrize(
    "preset",
    in_turn(sorted(k for k, v in PRESETS.items() if v["family"] == "text")),
)
def test_every_text_preset_builds(preset):
    model = models.masked_lm(preset, num_layers=1, vocabulary_size=64)
    assert model(keras.ops.ones((1, 8), "int32")).shape == (1, 8, 64)


def test_presets_are_plain_data():
    for name, entry in PRESETS.items():
        assert set(entry) == {"family", "description", "config"}, name
        assert entry["family"] in ("image", "text"), name


def test_presets_are_registered_with_keras_hub_by_family():
    # keras-hub's `presets` of a backbone, its tasks and preprocessors.
    for family, classes in (
        ("image", ("GMLPImageBackbone", "GMLPImageClassifier")),
        ("text", ("GMLPTextBackbone", "GMLPMaskedLM", "GMLPCausalLM")),
    ):
        names = {k for k, v in PRESETS.items() if v["family"] == family}
        for name in classes:
            assert set(getattr(models, name).presets) == names, name


def test_one_from_preset_serves_every_model():
    overriding = sorted(
        cls.__name__
        for name in models.__all__
        for cls in getattr(getattr(models, name), "__mro__", ())
        if cls.__module__.startswith("keras_gmlp")
        and "from_preset" in vars(cls)
    )
    assert set(overriding) == {"FromPreset"}
