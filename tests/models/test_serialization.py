"""Every family and head survives `get_config` and `.keras` save/load unchanged."""

import io
import zipfile

import h5py
import keras
import numpy as np
import pytest

from transformer_zoo.models import (
    DecoderOnly,
    EncoderDecoder,
    EncoderOnly,
    EncoderOnlyClassifier,
    EncoderOnlyMaskedLM,
)

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=16)
IDS = np.array([[3, 4, 5, 6, 0], [7, 8, 9, 10, 11]])


def encoder_only():
    return EncoderOnly(20, **SIZE)


CASES = {
    "decoder_only": (lambda: DecoderOnly(20, **SIZE), {"token_ids": IDS}),
    "encoder_only": (encoder_only, {"token_ids": IDS, "segment_ids": IDS % 2}),
    "classifier": (lambda: EncoderOnlyClassifier(encoder_only(), 3), {"token_ids": IDS}),
    "masked_lm": (lambda: EncoderOnlyMaskedLM(encoder_only()), {"token_ids": IDS}),
}
for tie in ("none", "decoder", "all"):
    CASES[f"encoder_decoder_{tie}"] = (
        lambda tie=tie: EncoderDecoder(
            20, target_vocabulary_size=None if tie == "all" else 25, tie_weights=tie, **SIZE
        ),
        {"encoder_token_ids": IDS, "decoder_token_ids": IDS[:, ::-1]},
    )


def outputs(model, inputs):
    result = model(inputs)
    return (
        {k: np.asarray(v) for k, v in result.items()}
        if isinstance(result, dict)
        else np.asarray(result)
    )


def assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", sorted(CASES))
def test_keras_file_round_trip_gives_identical_outputs(case, tmp_path):
    build, inputs = CASES[case]
    model = build()
    path = tmp_path / f"{case}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    assert loaded.count_params() == model.count_params()
    assert_same(outputs(loaded, inputs), outputs(model, inputs))


@pytest.mark.parametrize("case", sorted(CASES))
def test_get_config_round_trips(case):
    build, inputs = CASES[case]
    model = build()
    clone = type(model).from_config(model.get_config())
    assert clone.get_config() == model.get_config()
    clone.set_weights(model.get_weights())
    assert_same(outputs(clone, inputs), outputs(model, inputs))


def test_a_tied_models_file_holds_the_embedding_once_under_the_models_own_path(tmp_path):
    """The paths `.keras` files have always had (the head read the embedding through its
    own attribute, tracked until it was not): files saved before load unchanged."""
    model = DecoderOnly(20, **SIZE)
    model.save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as archive:
        weights = h5py.File(io.BytesIO(archive.read("model.weights.h5")))
        paths = []
        weights.visititems(lambda name, item: paths.append(name))
        paths = [path for path in paths if isinstance(weights[path], h5py.Dataset)]
    assert "embeddings/token_embedding/vars/0" in paths
    assert "embeddings/position_encoding/vars/0" in paths
    assert not [path for path in paths if path.startswith("lm_head")]
    assert len(paths) == len(model.weights)
