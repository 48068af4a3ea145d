"""The graphs of each family, as named `tf.function`s: what every engine runs.

One definition serves the Keras runner and both exporters: tf2onnx converts these functions (the `TensorSpec`
names become the ONNX input names and the returned dict's keys the output names), and
the SavedModel exporter saves the same functions as signatures, so both formats expose
identical inputs and outputs (Hugging Face Optimum's names, DESIGN.md).

Graphs per family (B batch, S/T sequence, P past length, H heads, Dh head width):

- decoder-only `model`: `input_ids` (B, S), `attention_mask` (B, P + S), `position_ids`
  (B, S), `past_key_values.{i}.key/.value` (B, H, P, Dh) → `logits` (B, S, V),
  `present.{i}.key/.value` (B, H, P + S, Dh). P = 0 for the prompt.
- encoder-decoder `encoder`: `input_ids`, `attention_mask` (B, S) → `last_hidden_state`
  (B, S, D) and the cross-attention keys and values of every decoder layer,
  `present.{i}.encoder.key/.value` (B, H, S, Dh), projected once per source.
- encoder-decoder `decoder`: `input_ids` (B, T), `attention_mask` (B, P + T),
  `position_ids` (B, T), `encoder_attention_mask` (B, S),
  `past_key_values.{i}.decoder.key/.value` (B, H, P, Dh) and
  `past_key_values.{i}.encoder.key/.value` (B, H, S, Dh) → `logits` (B, T, V),
  `present.{i}.decoder.key/.value` (B, H, P + T, Dh).
- encoder-only `model`: `input_ids`, `attention_mask`[, `token_type_ids`] (B, S) →
  `last_hidden_state` (B, S, D), `sentence_embedding` (B, D: its masked mean, L2
  normalised, as `EncoderOnly.embed`)[, `pooler_output` (B, D)][, `logits`].

Deviation from DESIGN.md for the decoder of an encoder-decoder: it does not take
`encoder_hidden_states`. Its inputs are those of Optimum's `decoder_with_past_model.onnx`
(the cross caches `past_key_values.{i}.encoder.*`), which `encoder_model.onnx` outputs as
`present.{i}.encoder.*`; that keeps the cross-attention projections at once per source,
where a decoder reading `encoder_hidden_states` would project them again at every step.
It also takes `attention_mask` and `position_ids` for the target, as the decoder-only
graph does, so that target prefixes of different lengths decode in one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

from transformer_zoo.layers import BlockCache, KeyValue
from transformer_zoo.models import EncoderOnlyClassifier, EncoderOnlyMaskedLM
from transformer_zoo.models.decoding_cache import DecodingCache
from transformer_zoo.models.encoder_only import mean_pool
from transformer_zoo.models.family import backbone_of, family_of

INT = tf.int64  # Optimum's and onnxruntime-genai's integer type for ids, masks, positions
GRAPH_FILES = {
    "model": "model.onnx",
    "encoder": "encoder_model.onnx",
    "decoder": "decoder_model.onnx",
}


@dataclass
class Graph:
    """One exported graph.

    Attributes:
        name: `"model"`, `"encoder"` or `"decoder"`.
        function: a `tf.function` with `input_signature`; returns a dict of tensors.
        inputs: the named `tf.TensorSpec`s, in signature order.
        outputs: the output names, in the order of the dict.
        cached: whether it takes `past_key_values` (validated with P = 0 and P > 0).
    """

    name: str
    function: tf.types.experimental.GenericFunction
    inputs: list[tf.TensorSpec]
    outputs: list[str]
    cached: bool = False

    @property
    def file(self) -> str:
        return GRAPH_FILES[self.name]


def _ids(name: str) -> tf.TensorSpec:
    return tf.TensorSpec((None, None), INT, name=name)


def _caches(model, suffixes: list[str]) -> list[tf.TensorSpec]:
    shape = (None, model.num_heads, None, model.head_dim)
    dtype = tf.as_dtype(model.compute_dtype)
    return [
        tf.TensorSpec(shape, dtype, name=f"past_key_values.{i}.{suffix}")
        for i in range(model.num_layers)
        for suffix in suffixes
    ]


def _self_attention_cache(past, cross=None, encoder_padding_mask=None) -> DecodingCache:
    """The `DecodingCache` of flat graph inputs: per layer a key and a value, and the cross
    keys and values of an encoder-decoder, in the same layer order."""
    pairs = [KeyValue(*past[i : i + 2]) for i in range(0, len(past), 2)]
    crosses = [KeyValue(*cross[i : i + 2]) for i in range(0, len(cross), 2)] if cross else None
    blocks = tuple(
        BlockCache(pair, crosses[i] if crosses else None) for i, pair in enumerate(pairs)
    )
    return DecodingCache(blocks, encoder_padding_mask)


def _present(cache: DecodingCache, part: str = "") -> dict:
    """`present.{i}.{part}key/value` of the self-attention part of a step's cache."""
    outputs = {}
    for i, block in enumerate(cache.blocks):
        outputs[f"present.{i}.{part}key"] = block.self_attention.key
        outputs[f"present.{i}.{part}value"] = block.self_attention.value
    return outputs


def _graph(name, fn, inputs, cached=False) -> Graph:
    function = tf.function(fn, input_signature=inputs, autograph=False)
    # tf.nest (and so tf2onnx and SavedModel) orders dict outputs by key.
    outputs = sorted(function.get_concrete_function().structured_outputs)
    return Graph(name, function, inputs, outputs, cached)


def decoder_only_graphs(model) -> list[Graph]:
    inputs = [_ids("input_ids"), _ids("attention_mask"), _ids("position_ids")]
    inputs += _caches(model, ["key", "value"])

    def step(input_ids, attention_mask, position_ids, *past):
        logits, present = model.step(
            input_ids, _self_attention_cache(past), attention_mask, position_ids
        )
        return {"logits": logits, **_present(present)}

    return [_graph("model", step, inputs, cached=True)]


def encoder_decoder_graphs(model) -> list[Graph]:
    def encode(input_ids, attention_mask):
        memory = model.encode(input_ids, attention_mask)
        cache = model.initial_cache(memory, attention_mask)
        outputs = {"last_hidden_state": memory}
        for i, block in enumerate(cache.blocks):
            outputs[f"present.{i}.encoder.key"] = block.cross_attention.key
            outputs[f"present.{i}.encoder.value"] = block.cross_attention.value
        return outputs

    decoder_inputs = [
        _ids("input_ids"),
        _ids("attention_mask"),
        _ids("position_ids"),
        _ids("encoder_attention_mask"),
    ]
    decoder_inputs += _caches(model, ["decoder.key", "decoder.value"])
    decoder_inputs += _caches(model, ["encoder.key", "encoder.value"])
    layers = model.num_layers

    def decode(input_ids, attention_mask, position_ids, encoder_attention_mask, *past):
        cache = _self_attention_cache(
            past[: 2 * layers], past[2 * layers :], encoder_attention_mask
        )
        logits, present = model.step(input_ids, cache, attention_mask, position_ids)
        return {"logits": logits, **_present(present, "decoder.")}

    return [
        _graph("encoder", encode, [_ids("input_ids"), _ids("attention_mask")]),
        _graph("decoder", decode, decoder_inputs, cached=True),
    ]


def encoder_only_graphs(model, normalize_embeddings: bool = True) -> list[Graph]:
    core = backbone_of(model)
    inputs = [_ids("input_ids"), _ids("attention_mask")]
    if core.type_vocabulary_size:
        inputs.append(_ids("token_type_ids"))

    def forward(input_ids, attention_mask, token_type_ids=None):
        features = {"token_ids": input_ids, "padding_mask": attention_mask}
        if token_type_ids is not None:
            features["segment_ids"] = token_type_ids
        outputs = core(features)
        result = {
            "last_hidden_state": outputs["sequence_output"],
            "sentence_embedding": mean_pool(
                outputs["sequence_output"], attention_mask, normalize_embeddings
            ),
        }
        if "pooled_output" in outputs:
            result["pooler_output"] = outputs["pooled_output"]
        if isinstance(model, EncoderOnlyClassifier):
            pooled = outputs.get("pooled_output", outputs["sequence_output"][:, 0])
            result["logits"] = model.classifier(pooled)  # (B, num_classes)
        elif isinstance(model, EncoderOnlyMaskedLM):
            result["logits"] = model.lm_head(outputs["sequence_output"])  # (B, S, V)
        return result

    return [_graph("model", forward, inputs)]


def step_graphs(model, normalize_embeddings: bool = True) -> list[Graph]:
    """The graphs of `model`'s family (see the module docstring); an encoder-only graph's
    `sentence_embedding` is L2-normalised with `normalize_embeddings`
    (`RunConfig.normalizes_embeddings`)."""
    family = family_of(model)
    if family == "decoder-only":
        return decoder_only_graphs(model)
    if family == "encoder-decoder":
        return encoder_decoder_graphs(model)
    return encoder_only_graphs(model, normalize_embeddings)
