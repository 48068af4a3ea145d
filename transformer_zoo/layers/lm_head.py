"""Hidden states to vocabulary logits, optionally tied to the input embedding (§3.4)."""

from __future__ import annotations

import keras
from keras import ops

from transformer_zoo.layers.activations import get_activation
from transformer_zoo.layers.initializers import clone_initializer


@keras.saving.register_keras_serializable(package="transformer_zoo")
class LMHead(keras.layers.Layer):
    """Projects (B, T, D) hidden states to (B, T, V) logits.

    - Tied (`embedding=` a `TokenAndPositionEmbedding`): logits = h Eᵀ with the token
      matrix E, as in the paper (§3.4) and GPT-2. The head owns no kernel; its config
      stores `tied=True` and the owning model passes the embedding again when rebuilt.
    - Untied: its own (D, V) kernel.
    - `transform_activation` adds BERT's transform before the projection:
      Dense(D) → activation → LayerNorm.

    The head returns logits; the softmax belongs to the loss and the sampler.

    Args:
        vocabulary_size: V.
        embedding: optional `TokenAndPositionEmbedding` whose token matrix is reused.
        use_bias: add a (V,) output bias (BERT's MLM head has one).
        transform_activation: None, or `"gelu"`, `"gelu_tanh"`, `"relu"` for the BERT transform.
        layer_norm_epsilon: epsilon of the transform's LayerNorm.
        kernel_initializer: initializer of the untied kernel and the transform.
        tied: set by `from_config`; pass `embedding` instead.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B, T, D) hidden states.

    Returns:
        (B, T, V) logits.

    Example:
    >>> head = LMHead(vocabulary_size=50)
    >>> head(keras.ops.ones((2, 3, 8))).shape
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
        if not isinstance(vocabulary_size, int) or vocabulary_size < 1:
            raise ValueError(
                f"`vocabulary_size` must be a positive integer. Received: vocabulary_size={vocabulary_size}"
            )
        if tied and embedding is None:
            raise ValueError(
                "This LMHead is tied to an embedding: pass it again, e.g. "
                "`LMHead.from_config({**config, 'embedding': token_embedding})`."
            )
        if embedding is not None and embedding.vocabulary_size != vocabulary_size:
            raise ValueError(
                "The tied embedding's vocabulary differs from the head's. Received: "
                f"vocabulary_size={vocabulary_size}, embedding.vocabulary_size={embedding.vocabulary_size}"
            )
        self._transform_fn = (
            get_activation(transform_activation) if transform_activation is not None else None
        )
        self.vocabulary_size = vocabulary_size
        self.embedding = embedding
        self.use_bias = use_bias
        self.transform_activation = transform_activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    @property
    def tied(self) -> bool:
        return self.embedding is not None

    def build(self, inputs_shape):
        d_model = inputs_shape[-1]
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
            self.kernel = self.add_weight(
                name="kernel",
                shape=(d_model, self.vocabulary_size),
                initializer=clone_initializer(self.kernel_initializer),
            )
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
            weights = ops.cast(self.embedding.embeddings, x.dtype)  # (V, D)
            logits = ops.matmul(x, ops.transpose(weights))  # (B, T, V)
        else:
            logits = ops.matmul(x, self.kernel)  # (B, T, V)
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
        return config
