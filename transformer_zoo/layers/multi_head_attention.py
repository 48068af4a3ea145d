"""Scaled dot-product multi-head attention (paper §3.2), with masks and a KV cache."""

from __future__ import annotations

import math
import warnings

import keras
from keras import ops

from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.masking import merge_masks


@keras.saving.register_keras_serializable(package="transformer_zoo")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention: softmax(QKᵀ / √d_k) V over H heads (paper §3.2.1-3.2.2).

    Q = x W_Q, and K, V = c W_K, c W_V where c is the `context` for cross-attention and
    x itself for self-attention. W_K and W_V are stored as one fused (D, 2·H·Dh) kernel so
    that both projections are one matmul; W_Q stays separate so that the same layer serves
    self- and cross-attention. Heads are concatenated and projected by W_O.

    Masks are boolean with True = may attend, combined in `masking.merge_masks`;
    disallowed scores are set to the lowest finite value before the softmax (effectively
    −∞, but a query with no allowed key, such as a padding position, gives a uniform row
    instead of NaN).

    Args:
        num_heads: H.
        head_dim: Dh; defaults to D / H, which must then divide evenly.
        output_dim: width of the output; defaults to the query width D.
        dropout: dropout rate on the attention probabilities.
        use_bias: whether the four projections have biases.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the biases.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        query: (B, T, D) queries.
        context: optional (B, S, Dc) sequence to attend over (cross-attention). Omit it for
            self-attention.
        padding_mask: optional (B, S) boolean, False at padding keys. With a
            self-attention cache it covers the past keys too: (B, P + T).
        attention_mask: optional (B, T, S) boolean.
        causal: forbid attending to later positions; with a cache of P keys, query i is
            at position P + i.
        cache: optional `(key, value)`, each (B, H, P, Dh). Self-attention appends the new
            keys and values to it. Cross-attention uses it as the context's keys and
            values, projected once per source, and does not project `context` again.
        use_cache: return the present `(key, value)`; self-attention gives
            `concat(past, new)` along P, each (B, H, P + T, Dh).
        return_attention_scores: also return the (B, H, T, S) attention probabilities.
        training: whether dropout is active.

    Returns:
        The (B, T, output_dim) output; with `use_cache`, `(output, (key, value))`; with
        `return_attention_scores`, the probabilities are appended last.

    Example:
    >>> mha = MultiHeadAttention(num_heads=2)
    >>> x = keras.ops.ones((1, 4, 8))
    >>> mha(x, causal=True).shape
    (1, 4, 8)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, §3.2.
    """

    def __init__(
        self,
        num_heads: int,
        head_dim: int | None = None,
        output_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        bias_initializer: str | keras.initializers.Initializer = "zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(
                f"`num_heads` must be a positive integer. Received: num_heads={num_heads}"
            )
        if head_dim is not None and (not isinstance(head_dim, int) or head_dim < 1):
            raise ValueError(
                f"`head_dim` must be a positive integer. Received: head_dim={head_dim}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout}")
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.output_dim = output_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, context_shape=None):
        d_model = query_shape[-1]
        head_dim = self.head_dim
        if head_dim is None:
            if d_model % self.num_heads:
                raise ValueError(
                    "The model width must be divisible by the number of heads. "
                    f"Received: d_model={d_model}, num_heads={self.num_heads}"
                )
            head_dim = d_model // self.num_heads
        self._head_dim = head_dim
        inner = self.num_heads * head_dim
        self.query_dense = self._dense(inner, "query")
        self.query_dense.build(query_shape)
        self.key_value_dense = self._dense(2 * inner, "key_value")
        self.key_value_dense.build(context_shape if context_shape is not None else query_shape)
        self.output_dense = self._dense(self.output_dim or d_model, "attention_output")
        self.output_dense.build(tuple(query_shape[:-1]) + (inner,))
        self.built = True

    def _split_heads(self, x, shape):
        # `shape` is the layer input's, not `x`'s: tf2onnx merges Dense's internal reshapes
        # with this one and would then read a wrong (2-D) Shape.
        x = ops.reshape(x, (shape[0], shape[1], self.num_heads, self._head_dim))  # (B, L, H, Dh)
        return ops.transpose(x, (0, 2, 1, 3))  # (B, H, L, Dh)

    def _project_key_value(self, source):
        shape = ops.shape(source)
        key, value = ops.split(self.key_value_dense(source), 2, axis=-1)  # 2 × (B, S, H·Dh)
        return self._split_heads(key, shape), self._split_heads(value, shape)  # (B, H, S, Dh)

    def compute_key_value(self, context):
        """The `(key, value)` of a (B, S, Dc) context, each (B, H, S, Dh).

        For cross-attention: compute them once per source and pass them as `cache` at
        every decoding step, instead of projecting the encoder output again.
        """
        return self._project_key_value(context)

    def call(
        self,
        query,
        context=None,
        padding_mask=None,
        attention_mask=None,
        causal=False,
        cache=None,
        use_cache=False,
        return_attention_scores=False,
        training=None,
    ):
        shape = ops.shape(query)
        q = self._split_heads(self.query_dense(query), shape)  # (B, H, T, Dh)
        if context is not None and cache is not None:
            key, value = cache  # cross-attention: the source's keys/values, computed once
        elif context is not None:
            key, value = self._project_key_value(context)
        else:
            key, value = self._project_key_value(query)  # (B, H, T, Dh)
            if cache is not None:
                past_key, past_value = cache
                key = ops.concatenate([ops.cast(past_key, key.dtype), key], axis=2)
                value = ops.concatenate([ops.cast(past_value, value.dtype), value], axis=2)

        q = q * ops.cast(1.0 / math.sqrt(self._head_dim), q.dtype)
        scores = ops.matmul(q, ops.swapaxes(key, -1, -2))  # (B, H, T, S)
        # The softmax runs in float32 so that bf16/fp16 scores do not saturate.
        scores = ops.cast(scores, "float32")
        mask = merge_masks(ops.shape(q)[2], ops.shape(key)[2], padding_mask, attention_mask, causal)
        if mask is not None:
            scores = ops.where(ops.expand_dims(mask, 1), scores, -3.0e38)  # (B, H, T, S)
        with warnings.catch_warnings():
            # One key (first cached step of a one-token prompt) is a legitimate softmax.
            warnings.filterwarnings("ignore", message="You are using a softmax over axis")
            probs = ops.softmax(scores, axis=-1)
        attention = self.dropout_layer(ops.cast(probs, value.dtype), training=training)
        out = ops.matmul(attention, value)  # (B, H, T, Dh)
        out = ops.transpose(out, (0, 2, 1, 3))  # (B, T, H, Dh)
        out = ops.reshape(
            out, (shape[0], shape[1], self.num_heads * self._head_dim)
        )  # (B, T, H·Dh)
        out = self.output_dense(out)  # (B, T, output_dim)

        results = (out,)
        if use_cache:
            results += ((key, value),)
        if return_attention_scores:
            results += (probs,)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
