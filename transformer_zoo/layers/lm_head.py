"""Hidden states to vocabulary logits, optionally tied to the input embedding (§3.4)."""

from __future__ import annotations

import keras
from keras import ops

from transformer_zoo.layers.activations import ACTIVATIONS, get_activation
from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.validation import check_flag, check_positive_number, check_size


@keras.saving.register_keras_serializable(package="transformer_zoo")
class LMHead(keras.layers.Layer):
    """Projects (B, T, D) hidden states to (B, T, V) logits.

    - Tied (`embedding=` a `TokenAndPositionEmbedding`): logits = h Eᵀ with the token
      matrix E, as in the paper (§3.4) and GPT-2. The head owns no kernel, and the
      embedding is not one of its sublayers: it belongs to the model that calls it, so
      the head's `weights` and `count_params()` leave the table out and
      `head.trainable = False` leaves it trainable. A model that calls the head but
      not its embedding (a head over another model's embedding) leaves the table out
      of its `trainable_weights` likewise, and its `fit` does not train it. After
      `model.quantize("int8" | "int4")` the head projects with the dequantized table.
    - A tied head's config names the embedding as a shared object, so a `.keras` file
      (`model.save`, `keras.models.load_model`) ties the loaded head to the loaded
      model's embedding where the saved model calls the embedding itself: in the model
      that calls the head, or in an outer model that calls it before the nested model
      holding the head. Keras cannot keep the tie otherwise, and the file does not load:
      with the embedding inside a nested model (a functional or `Sequential` model
      called as a layer) and the head outside it, Keras' nested models copy their
      configs, losing the mark that shares the embedding (`load_model`: "Layer '...'
      expected 1 variables, but received 0"); a model that never calls the embedding
      has nothing to share it with (the head refuses its config). A config rebuilt
      outside a `.keras` file needs the embedding passed again (`from_config`;
      `keras.models.clone_model` in its `clone_function`).
    - Untied: its own (D, V) kernel, in a bias-free `keras.layers.Dense` sublayer
      (`projection`; `kernel` is its kernel), so that Keras' quantization and LoRA treat
      it as any Dense: `model.quantize("int8" | "int4" | "float8")` quantizes it (and a
      `.keras` file keeps it quantized), and `head.projection.enable_lora(rank)` adapts it.
    - `transform_activation` adds BERT's transform before the projection:
      Dense(D) → activation → LayerNorm.

    The head returns logits; the softmax belongs to the loss and the sampler.

    Args:
        vocabulary_size: V.
        embedding: optional `TokenAndPositionEmbedding` (or `keras.layers.Embedding`)
            whose token matrix is reused.
        use_bias: add a (V,) output bias (BERT's MLM head has one).
        transform_activation: None, or `"gelu"`, `"gelu_tanh"`, `"relu"`, `"swish"` for the
            BERT transform.
        layer_norm_epsilon: epsilon of the transform's LayerNorm.
        kernel_initializer: initializer of the untied kernel and the transform.
        tied: set by `from_config`; pass `embedding` instead.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B, T, D) hidden states.

    Returns:
        (B, T, V) logits; they carry the Keras mask of `inputs` on, so a loss skips the
        padding of `keras.layers.Embedding(mask_zero=True)` as after a `Dense`.

    Example:
    >>> head = LMHead(vocabulary_size=50)
    >>> tuple(head(keras.ops.ones((2, 3, 8))).shape)
    (2, 3, 50)
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding=None,
        use_bias: bool = False,
        transform_activation: str | None = None,
        layer_norm_epsilon: float = 1e-12,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        tied: bool | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        vocabulary_size = check_size("vocabulary_size", vocabulary_size)
        if tied is not None and check_flag("tied", tied) and embedding is None:
            raise ValueError(_UNTIED_CONFIG)
        if embedding is not None and _vocabulary_size(embedding) is None:
            raise ValueError(
                "`embedding` must be a `TokenAndPositionEmbedding` or a "
                f"`keras.layers.Embedding`. Received: embedding={embedding!r}"
            )
        if embedding is not None and _vocabulary_size(embedding) != vocabulary_size:
            raise ValueError(
                "The tied embedding's vocabulary differs from the head's. Received: "
                f"vocabulary_size={vocabulary_size}, embedding's={_vocabulary_size(embedding)}"
            )
        if transform_activation is not None and transform_activation not in tuple(ACTIVATIONS):
            # Checked here: `get_activation` names it `activation`.
            raise ValueError(
                f"`transform_activation` must be None or one of {sorted(ACTIVATIONS)}. "
                f"Received: transform_activation={transform_activation!r}"
            )
        self._transform_fn = (
            get_activation(transform_activation) if transform_activation is not None else None
        )
        self.vocabulary_size = vocabulary_size
        # Held outside Keras' (and TensorFlow's) attribute tracking, so that the embedding
        # is the model's layer, not the head's too (see the class docstring). `.keras`
        # files do not change: Keras saves every object an attribute reaches, tracked or
        # not, each once, under the first path that reaches it.
        self._tied_embedding = _Untracked(embedding)
        self.use_bias = check_flag("use_bias", use_bias)
        self.transform_activation = transform_activation
        self.layer_norm_epsilon = check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    @property
    def embedding(self):
        """The tied `TokenAndPositionEmbedding` or `keras.layers.Embedding`, or None."""
        return self._tied_embedding.value

    @property
    def tied(self) -> bool:
        return self.embedding is not None

    @property
    def kernel(self):
        """An untied head's (D, V) kernel: its `projection`'s (after `model.quantize`,
        Keras' quantized integers, as a quantized Dense's `kernel`)."""
        if self.tied:
            raise AttributeError("A tied LMHead has no kernel: it reads its embedding's table.")
        return self.projection.kernel

    def build(self, inputs_shape):
        d_model = inputs_shape[-1]
        if self.tied and d_model is not None and d_model != _embedding_dim(self.embedding):
            raise ValueError(
                "A tied head's inputs must be as wide as its embedding's (V, D) matrix. "
                f"Received: inputs_shape={tuple(inputs_shape)}, "
                f"the embedding's D={_embedding_dim(self.embedding)}"
            )
        if self._transform_fn is not None:
            self.transform_dense = keras.layers.Dense(
                d_model,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="transform",
            )
            self.transform_dense.build(inputs_shape)
            self.transform_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="transform_norm"
            )
            self.transform_norm.build(inputs_shape)
        if not self.tied:
            # A Dense rather than a kernel of the head's own: `Model.quantize` quantizes
            # only layers without sublayers (a head with the transform has two), and
            # Dense's int8 / int4 kernels, their calls and their saving are Keras' own.
            self.projection = keras.layers.Dense(
                self.vocabulary_size,
                use_bias=False,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="projection",
            )
            self.projection.build(inputs_shape)
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.vocabulary_size,), initializer="zeros"
            )
        self.built = True

    def call(self, inputs):
        x = inputs
        if self._transform_fn is not None:
            x = self.transform_norm(self._transform_fn(self.transform_dense(x)))
        if self.tied:
            logits = _tied_logits(x, self.embedding)  # (B, T, V)
        else:
            logits = self.projection(x)  # (B, T, V)
        if self.use_bias:
            logits = logits + self.bias
        return logits

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.vocabulary_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "use_bias": self.use_bias,
                "transform_activation": self.transform_activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "tied": self.tied,
            }
        )
        if self.tied:
            # Inside `.keras` saving, Keras marks an object serialized twice (here and as
            # the model's own layer) as shared, and loading returns one object for both.
            config["embedding"] = keras.saving.serialize_keras_object(self.embedding)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        embedding = config.get("embedding")
        if isinstance(embedding, dict):
            if "shared_object_id" not in embedding:
                # Deserializing it would build a second, untied embedding.
                raise ValueError(_UNTIED_CONFIG)
            config["embedding"] = keras.saving.deserialize_keras_object(embedding)
        return cls(**config)


_UNTIED_CONFIG = (
    "This LMHead is tied to an embedding that its config does not share with the rest of "
    "a model: a `.keras` file shares it only where the saved model calls the embedding "
    "itself (see LMHead's docstring), and a config rebuilt outside one cannot; pass the "
    "embedding again, e.g. `LMHead.from_config({**config, 'embedding': token_embedding})` "
    "(for `keras.models.clone_model`, in its `clone_function`)."
)


class _Untracked:
    """A reference that neither Keras nor TensorFlow tracks as a dependency."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _tied_logits(x, embedding):
    """`x Eᵀ` over the tied embedding's (V, D) token matrix E, as its lookups see it.

    `model.quantize("int8" | "int4")` replaces a `keras.layers.Embedding`'s table by
    integers (int4 packed two to a byte) with per-row scales, or per-group scales and
    zero points; its `embeddings` are then those raw integers, and logits read from them
    were off by the scale (~500x under int8). int8 (E = Q / s per row, no LoRA): `(x Qᵀ) / s`,
    the scale applied to the (…, V) logits rather than to the (V, D) table; Q is still cast
    to floats per call (one decoding step over GPT-2's 50,257 × 768 table under
    `tf.function`: 8.7 ms, against 4.1 ms in float32 and 15.4 ms dequantizing the table).
    Otherwise (int4, LoRA) the layer's own lookup of every id dequantizes the table.
    `"float8"` leaves embeddings alone, and an unquantized table is read as before.
    """
    table = (
        embedding if isinstance(embedding, keras.layers.Embedding) else embedding.token_embedding
    )
    mode = table.quantization_mode
    if mode is None:
        weights = ops.cast(table.embeddings, x.dtype)
    elif mode == "int8" and not table.lora_enabled:
        integers = ops.cast(table.embeddings, x.dtype)  # (V, D)
        return ops.matmul(x, ops.transpose(integers)) / ops.cast(table.embeddings_scale, x.dtype)
    else:
        weights = ops.cast(table(ops.arange(table.input_dim, dtype="int32")), x.dtype)
    return ops.matmul(x, ops.transpose(weights))


def _embedding_dim(embedding) -> int:
    """The columns D of a tied embedding's (V, D) matrix, before or after it is built."""
    if isinstance(embedding, keras.layers.Embedding):
        return embedding.output_dim
    return embedding.embedding_dim


def _vocabulary_size(embedding) -> int | None:
    """The rows of a tied embedding's (V, D) matrix, before or after it is built."""
    if isinstance(embedding, keras.layers.Embedding):
        return embedding.input_dim
    return getattr(embedding, "vocabulary_size", None)
