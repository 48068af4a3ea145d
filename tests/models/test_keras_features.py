"""Keras 3's model features work on every family, as on keras-hub's backbones: native
quantization survives `.keras` save/load, `export` needs no signature, `enable_lora` trains
adapters only."""

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

V = 50
SIZE = dict(num_heads=2, hidden_dim=32, intermediate_dim=64, max_length=16)
IDS = np.array([[3, 4, 5, 6, 0, 0], [7, 8, 9, 10, 11, 12]], "int32")
MASK = (IDS != 0).astype("int32")
DECODER_IDS = np.array([[1, 2, 3, 0], [4, 5, 6, 7]], "int32")


def encoder_only(num_layers=1):
    return EncoderOnly(V, num_layers=num_layers, **SIZE)


def encoder_decoder(num_layers=1, tie_weights="decoder"):
    return EncoderDecoder(V, num_layers=num_layers, tie_weights=tie_weights, **SIZE)


ENCODER_INPUTS = {"token_ids": IDS, "padding_mask": MASK, "segment_ids": IDS % 2}
SEQ2SEQ_INPUTS = {
    "encoder_token_ids": IDS,
    "encoder_padding_mask": MASK,
    "decoder_token_ids": DECODER_IDS,
    "decoder_padding_mask": (DECODER_IDS != 0).astype("int32"),
}
MODELS = {
    "decoder_only": (
        lambda: DecoderOnly(V, num_layers=1, **SIZE),
        {"token_ids": IDS, "padding_mask": MASK},
    ),
    "encoder_only": (encoder_only, ENCODER_INPUTS),
    "encoder_decoder": (encoder_decoder, SEQ2SEQ_INPUTS),
    "encoder_decoder_untied": (lambda: encoder_decoder(tie_weights="none"), SEQ2SEQ_INPUTS),
    "classifier": (lambda: EncoderOnlyClassifier(encoder_only(), 3), ENCODER_INPUTS),
    "masked_lm": (lambda: EncoderOnlyMaskedLM(encoder_only()), ENCODER_INPUTS),
}


def as_numpy(outputs):
    return [np.asarray(x) for x in keras.tree.flatten(outputs)]


def assert_same(actual, expected, atol=0.0):
    for a, e in zip(as_numpy(actual), as_numpy(expected), strict=True):
        np.testing.assert_allclose(a, e, rtol=0, atol=atol)


@pytest.mark.filterwarnings("ignore")  # layers without a quantized form (LayerNorm, ...)
# Every kind of head and every mode (all 18 pairs cost 40 s of the suite): tied decoder-only
# and masked-LM heads, an untied encoder-decoder head, a classifier; int8, int4, float8.
@pytest.mark.parametrize(
    "name, mode",
    [
        ("decoder_only", "int8"),
        ("decoder_only", "float8"),
        ("encoder_only", "int4"),
        pytest.param("encoder_decoder_untied", "int4", marks=pytest.mark.slow),  # 9 s
        ("classifier", "float8"),
        ("masked_lm", "int8"),
    ],
)
def test_quantized_model_loads_with_its_quantized_weights_and_outputs(name, mode, tmp_path):
    make, inputs = MODELS[name]
    keras.utils.set_random_seed(0)
    model = make()
    model.quantize(mode)
    expected = model(inputs)
    path = tmp_path / "quantized.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert sorted(w.path for w in loaded.weights) == sorted(w.path for w in model.weights)
    assert_same(loaded(inputs), expected)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("mode", ["int8", pytest.param("int4", marks=pytest.mark.slow)])
def test_an_untied_head_is_quantized_and_its_policy_saved_and_loaded(mode, tmp_path):
    """An untied `LMHead` used to keep a float32 kernel under `model.quantize`. Its
    quantized kernel's layer now has an entry in the config's `DTypePolicyMap`, and the
    loaded model holds the same integer weights and gives the same outputs."""
    keras.utils.set_random_seed(0)
    model = encoder_decoder(tie_weights="none")
    model.quantize(mode)
    head_weights = {w.path: np.asarray(w) for w in model.lm_head.weights if w.dtype == "int8"}
    assert head_weights  # the kernel, and int4's zero points
    policies = keras.dtype_policies.deserialize(model.get_config()["dtype"])
    (head_path,) = {path.rsplit("/", 1)[0] for path in head_weights}
    assert policies[head_path].quantization_mode == mode
    expected = model(SEQ2SEQ_INPUTS)
    model.save(tmp_path / "quantized.keras")
    loaded = keras.saving.load_model(tmp_path / "quantized.keras")
    for weight in loaded.lm_head.weights:
        if weight.path in head_weights:
            np.testing.assert_array_equal(np.asarray(weight), head_weights.pop(weight.path))
    assert not head_weights
    assert_same(loaded(SEQ2SEQ_INPUTS), expected)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    "name, mode",
    [("decoder_only", "int8"), pytest.param("encoder_only", "int4", marks=pytest.mark.slow)],
)
def test_a_quantized_model_runs_under_mixed_precision(name, mode):
    """A quantized Embedding gave float32 under mixed_bfloat16, and adding the bfloat16
    positions to it failed on the first call. The reference: the same weights quantized
    in float32."""
    make, inputs = MODELS[name]
    outputs = {}
    for policy in ("float32", "mixed_bfloat16"):
        keras.utils.set_random_seed(0)
        keras.config.set_dtype_policy(policy)
        try:
            model = make()
            model.quantize(mode)
            outputs[policy] = as_numpy(model(inputs))
        finally:
            keras.config.set_dtype_policy("float32")
    for mixed, full in zip(outputs["mixed_bfloat16"], outputs["float32"], strict=True):
        assert mixed.dtype == "bfloat16"
        # bfloat16 keeps 8 bits, and int8 then rounds its activations: outputs up to 3.5
        # within a few bfloat16 steps (2**-6 there) of the float32 ones.
        np.testing.assert_allclose(mixed.astype("float32"), full, atol=0.1)


@pytest.mark.parametrize(
    "make, inputs",
    [MODELS["decoder_only"], MODELS["encoder_only"], MODELS["encoder_decoder"]],
    ids=["decoder_only", "encoder_only", "encoder_decoder"],
)
def test_export_needs_no_signature_and_serves_the_models_outputs(make, inputs, tmp_path):
    import tensorflow as tf

    model = make()  # never called: the signature is the model's `input_specs()`
    model.export(tmp_path / "saved_model", verbose=False)
    reloaded = tf.saved_model.load(str(tmp_path / "saved_model"))  # held: it owns the variables
    assert_same(reloaded.serve(inputs), model(inputs), atol=1e-5)


@pytest.mark.parametrize(
    "make, inputs, attention_layers",
    [
        (lambda: DecoderOnly(V, num_layers=2, **SIZE), {"token_ids": IDS}, 2),
        (lambda: encoder_only(num_layers=2), {"token_ids": IDS}, 2),
        (encoder_decoder, SEQ2SEQ_INPUTS, 3),  # encoder self, decoder self, cross
    ],
    ids=["decoder_only", "encoder_only", "encoder_decoder"],
)
def test_enable_lora_trains_only_the_query_and_key_value_adapters(
    make, inputs, attention_layers, tmp_path
):
    keras.utils.set_random_seed(0)
    model = make()
    before = model(inputs)
    model.enable_lora(4)
    names = sorted(w.path for w in model.trainable_weights)
    assert len(names) == attention_layers * 2 * 2  # (query, key_value) x (A, B)
    assert {tuple(name.split("/")[-2:]) for name in names} == {
        (dense, f"lora_kernel_{ab}") for dense in ("query", "key_value") for ab in "ab"
    }
    assert_same(model(inputs), before)  # B starts at zero

    frozen = {w.path: np.array(w) for w in model.weights if not w.trainable}
    model.compile(keras.optimizers.Adam(1e-2), "mse")
    model.fit(inputs, keras.tree.map_structure(np.zeros_like, before), epochs=2, verbose=0)
    for w in model.weights:
        if w.path in frozen:
            np.testing.assert_array_equal(np.array(w), frozen[w.path], err_msg=w.path)
    trained = model(inputs)
    assert (
        max(np.abs(a - b).max() for a, b in zip(as_numpy(trained), as_numpy(before), strict=True))
        > 0
    )

    model.save(tmp_path / "lora.keras")  # the adapters are merged into the kernels
    assert_same(
        keras.saving.load_model(tmp_path / "lora.keras", compile=False)(inputs), trained, atol=1e-5
    )


def test_lora_on_a_classifiers_backbone_keeps_its_head_trainable():
    """As keras-hub's `classifier.backbone.enable_lora(rank)` (README)."""
    classifier = MODELS["classifier"][0]()
    classifier.backbone.enable_lora(2)
    names = sorted(w.path.split("/", 1)[-1] for w in classifier.trainable_weights)
    assert names == [
        "bias", "kernel",  # the classifier's Dense
        "self_attention/key_value/lora_kernel_a", "self_attention/key_value/lora_kernel_b",
        "self_attention/query/lora_kernel_a", "self_attention/query/lora_kernel_b",
    ]  # fmt: skip


def test_a_second_enable_lora_is_refused_and_changes_nothing():
    """Keras' own error ("lora is already enabled") came from the first attention's
    query Dense, after `enable_lora` had frozen every other layer and unfrozen that one:
    what trained was then its kernel, bias and adapters, and no other adapter."""
    model = encoder_only(num_layers=2)
    model.enable_lora(4)
    trainable = sorted(w.path for w in model.trainable_weights)
    with pytest.raises(ValueError, match=r"already enabled on this model, with rank 4.*rank=8"):
        model.enable_lora(8)
    assert sorted(w.path for w in model.trainable_weights) == trainable
