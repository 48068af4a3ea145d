"""Keras, SavedModel and ONNX agree: logits and hidden states within 1e-4 over several
batch sizes and lengths, and identical tokens from greedy (all three engines), beam search
and seeded sampling (Keras and ONNX)."""

import logging
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_zoo.export import export_onnx, export_saved_model
from transformer_zoo.generation import generate
from transformer_zoo.generation.onnx_runner import make_session
from transformer_zoo.generation.search import search_config
from transformer_zoo.models import from_preset
from transformer_zoo.serving import load_onnx, load_served_model

sparse_loss = keras.losses.SparseCategoricalCrossentropy

# (batch, length); the larger shape runs in the slow set, to keep the default under 5 minutes.
SHAPES = [(1, 3), pytest.param(4, 9, marks=pytest.mark.slow)]


def _ids(rng, batch, length, vocabulary, first=2):
    """Right-padded ids (row 0 two tokens short) starting with `first`, and their mask."""
    ids = rng.integers(4, vocabulary, (batch, length))
    ids[:, 0] = first
    mask = np.ones((batch, length), np.int64)
    if length > 2:
        mask[0, -2:] = 0
    return ids * mask, mask


def _empty_caches(session, batch, exclude=()):
    return {
        i.name: np.zeros((batch, i.shape[1], 0, i.shape[3]), np.float32)
        for i in session.get_inputs()
        if i.name.startswith("past_key_values") and ".encoder." not in i.name
    }


@pytest.mark.parametrize("batch, length", SHAPES)
def test_decoder_only_logits_agree_on_all_three_engines(family_artifacts, batch, length):
    art = family_artifacts("decoder-only")
    ids, mask = _ids(np.random.default_rng(length), batch, length, art.model.vocabulary_size)
    keras_logits = np.asarray(art.model({"token_ids": ids, "padding_mask": mask}))
    session = make_session(str(art.export_dir / "model.onnx"))
    feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": np.cumsum(mask, 1) - 1}
    (onnx_logits,) = session.run(["logits"], {**feeds, **_empty_caches(session, batch)})
    loaded = tf.saved_model.load(str(art.export_dir / "saved_model"))
    saved = loaded.signatures["serving_default"](input_ids=ids, attention_mask=mask)["logits"]
    real = mask.astype(bool)  # padded positions carry no meaning
    np.testing.assert_allclose(onnx_logits[real], keras_logits[real], atol=1e-4)
    np.testing.assert_allclose(np.asarray(saved)[real], keras_logits[real], atol=1e-4)


@pytest.mark.parametrize("batch, length", SHAPES)
def test_encoder_decoder_logits_agree_on_all_three_engines(family_artifacts, batch, length):
    art = family_artifacts("encoder-decoder")
    rng = np.random.default_rng(length)
    source, source_mask = _ids(rng, batch, length + 2, art.model.vocabulary_size, first=5)
    target, target_mask = _ids(rng, batch, length, art.model.output_vocabulary_size)
    inputs = {
        "encoder_token_ids": source,
        "encoder_padding_mask": source_mask,
        "decoder_token_ids": target,
        "decoder_padding_mask": target_mask,
    }
    keras_logits = np.asarray(art.model(inputs))
    encoder = make_session(str(art.export_dir / "encoder_model.onnx"))
    decoder = make_session(str(art.export_dir / "decoder_model.onnx"))
    names = [o.name for o in encoder.get_outputs()]
    encoded = dict(
        zip(
            names,
            encoder.run(names, {"input_ids": source, "attention_mask": source_mask}),
            strict=True,
        )
    )
    feeds = {
        "input_ids": target,
        "attention_mask": target_mask,
        "position_ids": np.cumsum(target_mask, 1) - 1,
        "encoder_attention_mask": source_mask,
        **{
            k.replace("present", "past_key_values"): v for k, v in encoded.items() if "present" in k
        },
        **_empty_caches(decoder, batch),
    }
    (onnx_logits,) = decoder.run(["logits"], feeds)
    loaded = tf.saved_model.load(str(art.export_dir / "saved_model"))
    saved = loaded.signatures["serving_default"](
        input_ids=source,
        attention_mask=source_mask,
        decoder_input_ids=target,
        decoder_attention_mask=target_mask,
    )["logits"]
    real = target_mask.astype(bool)
    np.testing.assert_allclose(onnx_logits[real], keras_logits[real], atol=1e-4)
    np.testing.assert_allclose(np.asarray(saved)[real], keras_logits[real], atol=1e-4)


@pytest.mark.parametrize("family", ["decoder-only", "encoder-decoder"])
def test_saved_model_serving_default_reads_left_padded_rows_as_the_rows_alone(
    family_artifacts, family
):
    """Its `attention_mask` marks padding on either side: positions count the real tokens
    (an ONNX graph takes `position_ids`; this signature has none to take)."""
    art = family_artifacts(family)
    rows = [[2, 7, 9, 11, 5, 8], [2, 14], [2, 20, 6]]
    targets = [[1, 4], [1, 5, 9, 6, 7], [1, 6, 4]]
    loaded = tf.saved_model.load(str(art.export_dir / "saved_model"))
    serve = loaded.signatures["serving_default"]

    def left_padded(rows):
        right = _padded(rows)
        order = np.argsort(right != 0, axis=1, kind="stable")  # padding first
        ids = np.take_along_axis(right, order, axis=1)
        return ids, (ids != 0).astype(np.int64)

    ids, mask = left_padded(rows)
    feeds = {"input_ids": ids, "attention_mask": mask}
    if family == "encoder-decoder":
        target_ids, mask = left_padded(targets)
        feeds |= {"decoder_input_ids": target_ids, "decoder_attention_mask": mask}
    logits = np.asarray(serve(**{k: tf.constant(v) for k, v in feeds.items()})["logits"])
    for i, row in enumerate(rows):
        if family == "decoder-only":
            alone = {"token_ids": np.array([row]), "padding_mask": np.ones((1, len(row)), bool)}
        else:
            alone = {
                "encoder_token_ids": np.array([row]),
                "encoder_padding_mask": np.ones((1, len(row)), bool),
                "decoder_token_ids": np.array([targets[i]]),
                "decoder_padding_mask": np.ones((1, len(targets[i])), bool),
            }
        expected = np.asarray(art.model(alone))[0]
        np.testing.assert_allclose(logits[i][mask[i].astype(bool)], expected, atol=1e-4)


@pytest.mark.parametrize("family", ["decoder-only", "encoder-decoder"])
def test_saved_model_signatures_refuse_ids_the_keras_layers_refuse(family_artifacts, family):
    """A negative id would read the embedding table's last row, and a source longer than
    the model's positions would run on sinusoidal positions it never saw: errors."""
    art = family_artifacts(family)
    loaded = tf.saved_model.load(str(art.export_dir / "saved_model"))
    vocabulary = art.model.vocabulary_size
    too_long = art.model.max_length + 3
    cases = {
        "at least 0": np.array([[2, -1, 5]]),
        f"less than the vocabulary size {vocabulary}": np.array([[2, vocabulary, 5]]),
        f"max_length={art.model.max_length}": np.full((1, too_long), 5),
    }
    for message, ids in cases.items():
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        calls = {"generate": {**feeds, "max_new_tokens": tf.constant(2)}}
        if family == "encoder-decoder":
            target = {"decoder_input_ids": np.array([[1, 4]]), "decoder_attention_mask": [[1, 1]]}
            calls["serving_default"] = {**feeds, **target}
        else:
            calls["serving_default"] = feeds
        for name, inputs in calls.items():
            signature = loaded.signatures[name]
            args = {
                k: tf.constant(v, tf.int32 if k == "max_new_tokens" else tf.int64)
                for k, v in inputs.items()
            }
            with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
                signature(**args)


@pytest.mark.parametrize("batch, length", SHAPES)
def test_encoder_only_outputs_agree_on_all_three_engines(family_artifacts, batch, length):
    art = family_artifacts("encoder-only")
    ids, mask = _ids(
        np.random.default_rng(length), batch, length, art.model.backbone.vocabulary_size
    )
    segments = (np.arange(length)[None] >= length // 2).astype(np.int64).repeat(batch, 0)
    features = {"token_ids": ids, "padding_mask": mask, "segment_ids": segments}
    backbone = art.model.backbone(features)
    expected = {
        "last_hidden_state": np.asarray(backbone["sequence_output"]),
        "pooler_output": np.asarray(backbone["pooled_output"]),
        "logits": np.asarray(art.model(features)),
    }
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": segments}
    session = make_session(str(art.export_dir / "model.onnx"))
    onnx_out = dict(zip(expected, session.run(list(expected), feeds), strict=True))
    loaded = tf.saved_model.load(str(art.export_dir / "saved_model"))
    saved = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in feeds.items()})
    real = mask.astype(bool)
    for name, value in expected.items():
        pick = real if name == "last_hidden_state" else slice(None)
        np.testing.assert_allclose(onnx_out[name][pick], value[pick], atol=1e-4, err_msg=name)
        np.testing.assert_allclose(np.asarray(saved[name])[pick], value[pick], atol=1e-4)


PROMPTS = [[2, 7, 9, 11, 5], [2, 14], [2, 20, 6]]


def _padded(rows):
    out = np.zeros((len(rows), max(map(len, rows))), np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


@pytest.fixture(scope="module")
def decoder_engines(family_artifacts):
    art = family_artifacts("decoder-only")
    return art, load_onnx(art.export_dir), load_served_model(art.export_dir, "saved_model")


def test_greedy_tokens_are_identical_on_keras_saved_model_and_onnx(decoder_engines):
    art, onnx_model, saved_model = decoder_engines
    eos = 3
    keras_tokens = generate(art.model, _padded(PROMPTS), 12, eos_id=eos).tokens
    assert len(set(keras_tokens.ravel().tolist())) > 2  # rows differ: not one repeated token
    np.testing.assert_array_equal(onnx_model.generate_ids(PROMPTS, 12).tokens, keras_tokens)
    np.testing.assert_array_equal(saved_model.generate_ids(PROMPTS, 12).tokens, keras_tokens)
    # The SavedModel's own in-graph loop, on right-padded prompts.
    padded = _padded(PROMPTS)
    signature = saved_model.runner.loaded.signatures["generate"]
    in_graph = signature(
        input_ids=padded,
        attention_mask=(padded != 0).astype(np.int64),
        max_new_tokens=tf.constant(12),
    )["tokens"]
    np.testing.assert_array_equal(np.asarray(in_graph), keras_tokens)


def test_the_saved_model_engine_feeds_the_cache_without_tensorflows_warnings(
    family_artifacts, caplog
):
    """The step signature's inputs are named as the ONNX files' (`past_key_values.0.key`);
    fed by those names, TensorFlow warned that it sanitized them, at every step."""
    saved_model = load_served_model(family_artifacts("decoder-only").export_dir, "saved_model")
    with caplog.at_level(logging.WARNING):
        saved_model.generate(["the cat"], 3)
    assert not [r for r in caplog.records if "Sanitizing" in r.getMessage()]


@pytest.mark.parametrize(
    "strategy, options",
    [("beam", {"num_beams": 3}), ("sample", {"seed": 3, "top_k": 8, "temperature": 1.5})],
)
def test_beam_search_and_sampling_tokens_are_identical_on_keras_and_onnx(
    decoder_engines, strategy, options
):
    art, onnx_model, _ = decoder_engines
    config = search_config(strategy, **options)
    keras_result = generate(art.model, _padded(PROMPTS), 10, config, eos_id=3)
    onnx_result = onnx_model.generate_ids(PROMPTS, 10, search=config)
    np.testing.assert_array_equal(onnx_result.tokens, keras_result.tokens)
    np.testing.assert_allclose(onnx_result.scores, keras_result.scores, atol=1e-3)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_translations_are_identical_on_keras_and_onnx(family_artifacts, strategy):
    art = family_artifacts("encoder-decoder")
    sources = ["March 5, 2021", "the cat sat", "dogs"]
    options = {"num_beams": 3} if strategy == "beam" else {}
    keras_model = load_served_model(art.run_dir, "keras")
    onnx_model = load_onnx(art.export_dir)
    config = search_config(strategy, **options)
    expected = keras_model.translate_ids(
        [art.tokenizer.encode(s) + [3] for s in sources], 12, search=config
    )
    got = onnx_model.translate_ids(
        [art.tokenizer.encode(s) + [3] for s in sources], 12, search=config
    )
    np.testing.assert_array_equal(got.tokens, expected.tokens)
    assert onnx_model.translate(sources, 12, config) == keras_model.translate(sources, 12, config)
    if strategy == "greedy":
        saved = load_served_model(art.export_dir, "saved_model").translate(sources, 12)
        assert saved == onnx_model.translate(sources, 12)


@pytest.mark.slow  # 35 s of training; the decoder-only in-graph loop is tested fast above
def test_encoder_decoder_greedy_tokens_are_identical_on_keras_saved_model_and_onnx(tmp_path):
    """After 24 steps on a copy task, so that continuations vary and rows end at different
    steps: a wrong self- or cross-attention cache could not hide behind one repeated token
    (untrained encoder-decoders repeat one)."""
    keras.utils.set_random_seed(3)
    model = from_preset(
        "tiny", family="encoder-decoder", vocabulary_size=40, target_vocabulary_size=40,
        max_length=24, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
        dropout=0.0,
    )  # fmt: skip
    copies = np.random.default_rng(0).integers(4, 40, (512, 6))
    start, end = np.full((512, 1), 2), np.full((512, 1), 3)
    decoder_in = np.concatenate([start, copies], axis=1)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=sparse_loss(from_logits=True))
    model.fit(
        {
            "encoder_token_ids": copies,
            "encoder_padding_mask": copies != 0,
            "decoder_token_ids": decoder_in,
            "decoder_padding_mask": decoder_in != 0,
        },
        np.concatenate([copies, end], axis=1),
        batch_size=64,
        epochs=3,
        verbose=0,
    )
    export_onnx(model, tmp_path)
    export_saved_model(model, tmp_path)
    source = _padded([[5, 9, 12, 30], [7, 33], [11, 20, 31, 8, 6, 25]])
    inputs = {"encoder_token_ids": source, "encoder_padding_mask": source != 0}
    expected = generate(model, inputs, 10, eos_id=3, decoder_start_id=2).tokens
    assert len(set(expected.ravel().tolist())) > 4  # varied continuations
    assert len({int((row != 0).sum()) for row in expected}) > 1  # rows end at different steps
    np.testing.assert_array_equal(load_onnx(tmp_path).translate_ids(source, 10).tokens, expected)
    saved_model = load_served_model(tmp_path, "saved_model")
    np.testing.assert_array_equal(saved_model.translate_ids(source, 10).tokens, expected)
    in_graph = saved_model.runner.loaded.signatures["generate"](
        input_ids=source,
        attention_mask=(source != 0).astype(np.int64),
        max_new_tokens=tf.constant(10),
    )["tokens"]
    in_graph = np.asarray(in_graph)  # stops once every row has ended: maybe fewer columns
    np.testing.assert_array_equal(in_graph, expected[:, : in_graph.shape[1]])
    assert (expected[:, in_graph.shape[1] :] == 0).all()


def test_embeddings_and_classes_agree_on_keras_and_onnx(family_artifacts):
    art = family_artifacts("encoder-only")
    texts = ["the cat sat on the mat", "dogs", "March 5, 2021"]
    onnx_model = load_onnx(art.export_dir)
    keras_model = load_served_model(art.run_dir, "keras")
    embeddings = onnx_model.embed(texts, batch_size=2)
    assert embeddings.dtype == np.float32 and embeddings.shape == (3, 32)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(embeddings, keras_model.embed(texts), atol=1e-5)
    # The reference: EncoderOnly.embed on the same ids, one text at a time.
    for text, vector in zip(texts, embeddings, strict=True):
        ids = np.array([[2] + art.tokenizer.encode(text) + [3]])
        np.testing.assert_allclose(vector, np.asarray(art.model.backbone.embed(ids))[0], atol=1e-5)
    onnx_classes, keras_classes = onnx_model.classify(texts), keras_model.classify(texts)
    assert [c["label"] for c in onnx_classes] == [c["label"] for c in keras_classes]
    for got, expected in zip(onnx_classes, keras_classes, strict=True):
        assert got["score"] == pytest.approx(expected["score"], abs=1e-5)


def test_wordpiece_embeddings_agree_on_keras_and_onnx(wordpiece_artifacts):
    art = wordpiece_artifacts
    texts = ["The cat sat on the mat.", "dogs", "a quick fox, march"]
    onnx_vectors = load_onnx(art.export_dir).embed(texts)
    keras_vectors = load_served_model(art.run_dir, "keras").embed(texts)
    np.testing.assert_allclose(onnx_vectors, keras_vectors, atol=1e-5)
    encoded = art.tokenizer.encode(texts)
    reference = art.model.embed(
        {"token_ids": encoded["input_ids"], "padding_mask": encoded["attention_mask"]}
    )
    np.testing.assert_allclose(onnx_vectors, np.asarray(reference), atol=1e-5)


@pytest.mark.parametrize("family", ["decoder-only", "encoder-decoder", "encoder-only"])
def test_the_runners_c_binding_and_onnxruntimes_public_method_give_the_same_outputs(
    family_artifacts, family
):
    # OnnxRunner calls the session's C binding; an onnxruntime without it gets the public
    # `InferenceSession.run_with_ort_values`. Both must decode (or embed) alike.
    served = load_onnx(family_artifacts(family).export_dir)
    bindings = served.runner.bindings
    assert all(binding is not None for binding in bindings.values())  # the fast path runs

    def outputs():
        if family == "encoder-only":
            return served.embed(["the cat sat", "a dog"]), None
        if family == "encoder-decoder":
            result = served.translate_ids([[5, 6, 7], [8, 9]], 6)
        else:
            result = served.generate_ids([[2, 5, 6, 7], [2, 8]], 6)
        return result.tokens, result.scores

    fast = outputs()
    served.runner.bindings = dict.fromkeys(bindings)
    public = outputs()
    np.testing.assert_array_equal(fast[0], public[0])
    if fast[1] is not None:
        np.testing.assert_array_equal(fast[1], public[1])
