"""The paper's recipe as Keras objects: the loss against a numpy reference, the metrics,
the warmup schedule against its formula, the optimizers, and .keras round trips."""

import math

import keras
import numpy as np
import pytest

from transformer_zoo.layers import TransformerBlock
from transformer_zoo.models import DecoderOnly
from transformer_zoo.train.recipe import (
    MaskedAccuracy,
    MaskedSparseCategoricalCrossentropy,
    TransformerSchedule,
    adamw_cosine,
    paper_adam,
    perplexity,
)


def _np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _np_smoothed_loss(labels, logits, eps, weights=None, pad=0):
    """The smoothed target distribution written out: q = (1-ε)·onehot + ε/V; loss = -Σ q log p,
    averaged over the non-padding positions (weighted)."""
    vocab = logits.shape[-1]
    q = (1 - eps) * np.eye(vocab)[labels] + eps / vocab
    per_token = -(q * _np_log_softmax(logits)).sum(-1)
    mask = (labels != pad).astype(np.float64)
    w = mask if weights is None else mask * weights
    return (per_token * w).sum() / mask.sum()


@pytest.fixture
def batch():
    rng = np.random.default_rng(0)
    labels = rng.integers(1, 11, size=(4, 7))
    labels[0, 5:] = 0
    labels[2, 2:] = 0
    logits = rng.normal(size=(4, 7, 11)) * 3
    return labels, logits.astype(np.float32)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_loss_matches_the_numpy_reference_and_ignores_padding(batch, eps):
    labels, logits = batch
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=eps)
    np.testing.assert_allclose(
        float(loss(labels, logits)), _np_smoothed_loss(labels, logits, eps), rtol=1e-5
    )
    changed = logits.copy()
    changed[labels == 0] = 100.0  # whatever the model says at padding does not count
    np.testing.assert_allclose(float(loss(labels, changed)), float(loss(labels, logits)), rtol=1e-6)


def test_loss_agrees_with_keras_categorical_crossentropy_on_unpadded_tokens(batch):
    labels, logits = batch
    keep = labels != 0
    reference = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)
    expected = reference(np.eye(11)[labels[keep]], logits[keep])
    got = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(labels, logits)
    np.testing.assert_allclose(float(got), float(expected), rtol=1e-5)


def test_loss_with_the_pipelines_sample_weights_is_the_same(batch):
    labels, logits = batch
    loss = MaskedSparseCategoricalCrossentropy()
    weights = (labels != 0).astype(np.float32)
    np.testing.assert_allclose(
        float(loss(labels, logits, weights)), float(loss(labels, logits)), rtol=1e-6
    )
    weights = np.random.default_rng(1).uniform(size=labels.shape).astype(np.float32)
    expected = _np_smoothed_loss(labels, logits, 0.1, weights)
    np.testing.assert_allclose(float(loss(labels, logits, weights)), expected, rtol=1e-5)


def test_loss_reduction_none_gives_zero_at_padding_and_probabilities_work(batch):
    labels, logits = batch
    per_token = MaskedSparseCategoricalCrossentropy(reduction="none")(labels, logits)
    assert per_token.shape == labels.shape and np.all(np.asarray(per_token)[labels == 0] == 0)
    probs = np.exp(_np_log_softmax(logits))
    from_probs = MaskedSparseCategoricalCrossentropy(from_logits=False)(labels, probs)
    np.testing.assert_allclose(float(from_probs), _np_smoothed_loss(labels, logits, 0.1), rtol=1e-4)


def test_loss_is_computed_in_float32_from_bfloat16_logits(batch):
    labels, logits = batch
    low = keras.ops.cast(logits, "bfloat16")
    reference = _np_smoothed_loss(labels, np.asarray(keras.ops.cast(low, "float32")), 0.1)
    got = MaskedSparseCategoricalCrossentropy()(labels, low)
    np.testing.assert_allclose(float(got), reference, rtol=1e-5)


def test_masked_accuracy_counts_only_non_padding_positions(batch):
    labels, logits = batch
    metric = MaskedAccuracy()
    metric.update_state(labels[:2], logits[:2])
    metric.update_state(labels[2:], logits[2:])
    keep = labels != 0
    expected = (logits.argmax(-1) == labels)[keep].mean()
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-6)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_the_recipe_perplexity_is_the_corpus_perplexity_over_non_padding_tokens(batch):
    labels, logits = batch
    metric = perplexity()
    metric.update_state(labels[:1], logits[:1])
    metric.update_state(labels[1:], logits[1:])
    nll = -np.take_along_axis(_np_log_softmax(logits), labels[..., None], -1)[..., 0]
    expected = math.exp(nll[labels != 0].mean())
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-5)


def _masked_block_model(vocab=30):
    """Embedding(mask_zero=True) → TransformerBlock → Dense: the predictions carry the
    Keras mask of the input's padding, which `keras.losses.Loss.__call__` applies too."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(vocab, 16, mask_zero=True)(inputs)
    x = TransformerBlock(num_heads=2, intermediate_dim=32, causal=True)(x)
    return keras.Model(inputs, keras.layers.Dense(vocab)(x))


def _next_token_batch():
    ids = np.array(
        [[5, 6, 7, 8, 9, 10, 11, 12], [5, 6, 0, 0, 0, 0, 0, 0], [4, 3, 2, 0, 0, 0, 0, 0]]
    )
    return ids[:, :-1], ids[:, 1:]


def _np_nll(logits, labels):
    return -np.take_along_axis(_np_log_softmax(logits), labels[..., None], -1)[..., 0]


@pytest.mark.parametrize("keras_mask", [True, False], ids=["keras-mask", "no-keras-mask"])
def test_loss_is_the_mean_over_real_labels_whatever_keras_mask_the_predictions_carry(keras_mask):
    """The label mask and the Keras mask are applied once: the loss equals the numpy mean
    over the real labels and Keras' own `ignore_class` loss (it was ×7/3 here with a Keras
    mask: both the loss and `Loss.__call__` rescaled to the kept positions)."""
    model = _masked_block_model()
    x, y = _next_token_batch()
    if not keras_mask:  # the same predictions, without the mask attached
        model = keras.Model(model.input, keras.layers.Identity()(model.output * 1.0))
    logits = np.asarray(model(x))
    expected = _np_nll(logits, y)[y != 0].mean()
    for loss in (
        MaskedSparseCategoricalCrossentropy(label_smoothing=0.0),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    ):
        model.compile(optimizer="adam", loss=loss, metrics=[MaskedAccuracy(), perplexity()])
        got = model.evaluate(x, y, return_dict=True, verbose=0)
        np.testing.assert_allclose(got["loss"], expected, rtol=1e-5)
        with_weights = model.evaluate(
            x, y, sample_weight=(y != 0).astype("float32"), verbose=0, return_dict=True
        )
        np.testing.assert_allclose(with_weights["loss"], expected, rtol=1e-5)
    # The metrics count each real label once too.
    keep = y != 0
    np.testing.assert_allclose(
        got["masked_accuracy"], (logits.argmax(-1) == y)[keep].mean(), rtol=1e-5
    )
    np.testing.assert_allclose(got["perplexity"], math.exp(expected), rtol=1e-4)


def test_loss_of_a_library_model_is_the_mean_over_real_labels():
    """The library's models derive their masks from `ids != 0` and attach no Keras mask."""
    keras.utils.set_random_seed(0)
    model = DecoderOnly(
        30, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=16
    )
    x, y = _next_token_batch()
    logits = np.asarray(model(x))
    expected = _np_nll(logits, y)[y != 0].mean()
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.0))
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), expected, rtol=1e-5)


def test_loss_takes_one_sample_weight_per_sequence(batch):
    labels, logits = batch
    per_sequence = np.array([1.0, 2.0, 0.5, 3.0], dtype=np.float32)
    expected = _np_smoothed_loss(
        labels, logits, 0.1, np.broadcast_to(per_sequence[:, None], labels.shape)
    )
    got = MaskedSparseCategoricalCrossentropy()(labels, logits, per_sequence)
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)


def _schedule(optimizer):
    """The optimizer's learning-rate schedule, as its config stores it."""
    return keras.saving.deserialize_keras_object(optimizer.get_config()["learning_rate"])


@pytest.mark.parametrize("step", [0, 1, 99, 399, 400, 1000, 10**6])
def test_schedule_follows_the_papers_formula(step):
    schedule = TransformerSchedule(d_model=128, warmup_steps=400)
    s = step + 1  # the paper counts from 1, Keras' iterations from 0
    expected = 128**-0.5 * min(s**-0.5, s * 400**-1.5)
    np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-6)


def test_schedule_peaks_at_the_end_of_warmup():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000, scale=2.0)
    rates = [float(schedule(s)) for s in range(3990, 4010)]
    assert int(np.argmax(rates)) + 3990 == 3999
    np.testing.assert_allclose(max(rates), 2.0 * (512 * 4000) ** -0.5, rtol=1e-6)


def test_paper_adam_has_the_papers_hyperparameters():
    optimizer = paper_adam(d_model=64, warmup_steps=100)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert _schedule(restored).get_config() == {"d_model": 64, "warmup_steps": 100, "scale": 1.0}


def test_adamw_cosine_warms_up_linearly_then_follows_a_cosine():
    optimizer = adamw_cosine(
        1e-3, total_steps=1100, warmup_steps=100, weight_decay=0.05, final_fraction=0.1
    )
    schedule = _schedule(optimizer)
    assert isinstance(optimizer, keras.optimizers.AdamW) and optimizer.weight_decay == 0.05
    for step in (0, 50, 100, 600, 1100, 5000):
        if step < 100:
            expected = 1e-3 * step / 100
        else:
            progress = min(step - 100, 1000) / 1000
            expected = 1e-3 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-5, atol=1e-12)
    with pytest.raises(ValueError, match="warmup_steps"):
        adamw_cosine(1e-3, total_steps=10, warmup_steps=10)


@pytest.mark.parametrize(
    "obj",
    [
        MaskedSparseCategoricalCrossentropy(label_smoothing=0.2, pad_id=0),
        MaskedAccuracy(pad_id=0),
        TransformerSchedule(d_model=32, warmup_steps=10, scale=0.5),
    ],
)
def test_recipe_objects_round_trip_through_keras_serialization(obj):
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(obj))
    assert type(restored) is type(obj) and restored.get_config() == obj.get_config()


def test_a_model_compiled_with_the_recipe_saves_and_loads_as_keras_file(tmp_path):
    inputs = keras.Input((None,), dtype="int32")
    outputs = keras.layers.Dense(9)(keras.layers.Embedding(9, 8)(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=paper_adam(d_model=8, warmup_steps=10),
        loss=MaskedSparseCategoricalCrossentropy(),
        metrics=[MaskedAccuracy(), perplexity()],
    )
    x = np.random.default_rng(0).integers(1, 9, size=(16, 5))
    y = np.where(x > 4, x, 0)
    model.fit(x, y, epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert isinstance(loaded.loss, MaskedSparseCategoricalCrossentropy)
    assert isinstance(_schedule(loaded.optimizer), TransformerSchedule)
    assert int(loaded.optimizer.iterations) == int(model.optimizer.iterations) > 0
    np.testing.assert_allclose(
        loaded.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0), rtol=1e-5
    )
