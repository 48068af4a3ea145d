"""One Transformer block for all three families: self-attention, optional
cross-attention, FFN; each sublayer with a residual and a LayerNorm (paper §3.1)."""

from __future__ import annotations

import keras

from transformer_zoo.layers.feed_forward import FeedForward
from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.multi_head_attention import MultiHeadAttention


@keras.saving.register_keras_serializable(package="transformer_zoo")
class TransformerBlock(keras.layers.Layer):
    """A Transformer encoder or decoder block (paper Figure 1).

    Sublayers, in order: self-attention (causal for decoders), cross-attention over an
    encoder sequence (`cross_attention=True`), and the feed-forward network.

    - `norm_first=False` is the paper's **Post-LN** (§3.1, also BERT):
      `x = LayerNorm(x + Dropout(Sublayer(x)))`.
    - `norm_first=True` is **Pre-LN** (GPT-2): `x = x + Dropout(Sublayer(LayerNorm(x)))`;
      a Pre-LN stack needs a final LayerNorm, which the model adds.

    Args:
        num_heads: H.
        intermediate_dim: d_ff.
        activation: FFN activation: `"relu"`, `"gelu"` or `"gelu_tanh"`.
        dropout: residual dropout rate (paper §5.4).
        attention_dropout: dropout rate on attention probabilities.
        norm_first: False for Post-LN (paper), True for Pre-LN (GPT-2).
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in BERT, 1e-5 in GPT-2).
        causal: self-attention may not look ahead (decoder blocks).
        cross_attention: add a cross-attention sublayer over `context`.
        kernel_initializer: initializer of all kernels.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B, T, D).
        context: (B, S, D) encoder output, for cross-attention.
        padding_mask: (B, T) — or (B, P + T) with a cache — False at padding.
        attention_mask: optional (B, T, P + T) self-attention mask.
        context_padding_mask: (B, S), False at encoder padding.
        cache: a tuple `(self_key, self_value)` or, with cross-attention,
            `(self_key, self_value, cross_key, cross_value)`; keys/values are
            (B, H, P, Dh) and (B, H, S, Dh). Cross keys/values are computed once per source.
        use_cache: also return the present cache (same structure, self part P + T long).
        return_attention_scores: also return `{"self": (B,H,T,P+T), "cross": (B,H,T,S)}`.
        training: whether dropout is active.

    Returns:
        (B, T, D); with `use_cache`, `(outputs, present)`; scores are appended last.

    Example:
    >>> block = TransformerBlock(num_heads=2, intermediate_dim=16, causal=True)
    >>> block(keras.ops.ones((1, 4, 8))).shape
    (1, 4, 8)
    """

    def __init__(
        self,
        num_heads: int,
        intermediate_dim: int,
        activation: str = "relu",
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        norm_first: bool = False,
        layer_norm_epsilon: float = 1e-5,
        causal: bool = False,
        cross_attention: bool = False,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        for arg, value in (("dropout", dropout), ("attention_dropout", attention_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"`{arg}` must be in [0, 1). Received: {arg}={value}")
        if not layer_norm_epsilon > 0:
            raise ValueError(
                f"`layer_norm_epsilon` must be positive. Received: layer_norm_epsilon={layer_norm_epsilon}"
            )
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.causal = causal
        self.cross_attention = cross_attention
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

        def attention(name):
            return MultiHeadAttention(
                num_heads,
                dropout=attention_dropout,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name=name,
            )

        def norm(name):
            return keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )

        self.self_attention = attention("self_attention")
        self.self_attention_norm = norm("self_attention_norm")
        self.self_attention_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        if cross_attention:
            self.cross_attention_layer = attention("cross_attention")
            self.cross_attention_norm = norm("cross_attention_norm")
            self.cross_attention_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.feed_forward = FeedForward(
            intermediate_dim,
            activation=activation,
            dropout=dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        self.feed_forward_norm = norm("feed_forward_norm")

    def build(self, inputs_shape, context_shape=None):
        self.self_attention.build(inputs_shape)
        self.self_attention_norm.build(inputs_shape)
        if self.cross_attention:
            if context_shape is None:
                context_shape = inputs_shape
            self.cross_attention_layer.build(inputs_shape, context_shape)
            self.cross_attention_norm.build(inputs_shape)
        self.feed_forward.build(inputs_shape)
        self.feed_forward_norm.build(inputs_shape)
        self.built = True

    def _sublayer(self, x, norm, fn):
        """Post-LN: norm(x + f(x)); Pre-LN: x + f(norm(x)). `fn` includes the dropout."""
        if self.norm_first:
            return x + fn(norm(x))
        return norm(x + fn(x))

    def call(
        self,
        inputs,
        context=None,
        padding_mask=None,
        attention_mask=None,
        context_padding_mask=None,
        cache=None,
        use_cache=False,
        return_attention_scores=False,
        training=None,
    ):
        if self.cross_attention and context is None and (cache is None or len(cache) < 4):
            raise ValueError(
                "This block has cross-attention: pass `context` (the encoder output) or a "
                "cache holding its keys and values."
            )
        self_cache = None if cache is None else tuple(cache[:2])
        cross_cache = None if cache is None or len(cache) < 4 else tuple(cache[2:4])
        present, scores = (), {}

        def self_attend(x):
            out = self.self_attention(
                x,
                padding_mask=padding_mask,
                attention_mask=attention_mask,
                causal=self.causal,
                cache=self_cache,
                use_cache=use_cache,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            out = _unpack(out, use_cache, return_attention_scores, present_out, scores, "self")
            return self.self_attention_dropout(out, training=training)

        def cross_attend(x):
            out = self.cross_attention_layer(
                x,
                # With a cross cache the context is not projected again; any non-None
                # context marks the call as cross-attention.
                context=context if context is not None else cross_cache[0],
                padding_mask=context_padding_mask,
                cache=cross_cache,
                use_cache=use_cache,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            out = _unpack(out, use_cache, return_attention_scores, present_out, scores, "cross")
            return self.cross_attention_dropout(out, training=training)

        present_out = []
        x = self._sublayer(inputs, self.self_attention_norm, self_attend)
        if self.cross_attention:
            x = self._sublayer(x, self.cross_attention_norm, cross_attend)
        x = self._sublayer(
            x, self.feed_forward_norm, lambda h: self.feed_forward(h, training=training)
        )

        results = (x,)
        if use_cache:
            present = tuple(t for pair in present_out for t in pair)
            results += (present,)
        if return_attention_scores:
            results += (scores,)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "causal": self.causal,
                "cross_attention": self.cross_attention,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def _unpack(result, use_cache, return_scores, present_out, scores, key):
    """Split an attention result into output, appending cache and scores to the lists."""
    if not (use_cache or return_scores):
        return result
    output, *extra = result
    if use_cache:
        present_out.append(extra.pop(0))
    if return_scores:
        scores[key] = extra.pop(0)
    return output
