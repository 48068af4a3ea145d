"""One Transformer block for all three families: self-attention, optional
cross-attention, FFN; each sublayer with a residual and a LayerNorm (paper §3.1)."""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
from keras import ops

from transformer_zoo.errors import is_integer
from transformer_zoo.layers.cache import BlockCache, KeyValue
from transformer_zoo.layers.feed_forward import FeedForward
from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.masking import check_mask_arguments, keras_mask, with_keras_mask
from transformer_zoo.layers.multi_head_attention import (
    MultiHeadAttention,
    check_call_override,
    is_symbolic,
    static_key_length,
)
from transformer_zoo.layers.validation import (
    check_batch_sizes,
    check_flag,
    check_positive_number,
    check_rate,
    check_static_size,
)


class AttentionScores(NamedTuple):
    """A block's attention probabilities: self-attention (B, H, T, T) and, in a block
    with cross-attention, cross-attention (B, H, T, S); float32 (float64 in a float64
    block)."""

    self_attention: Any
    cross_attention: Any = None


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
        activation: FFN activation: `"relu"`, `"gelu"`, `"gelu_tanh"` or `"swish"`.
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
        context: (B, S, D) encoder output, for cross-attention (only).
        padding_mask: (B, T), False at padding; when omitted, the Keras mask of `inputs`
            (`keras.layers.Embedding(mask_zero=True)`), which the output carries on.
        attention_mask: optional (B, T, T) self-attention mask.
        context_padding_mask: (B, S), False at encoder padding; when omitted, the Keras
            mask of `context`.
        training: whether dropout is active.

    Returns:
        (B, T, D). Cached decoding goes through `initial_cache` and `call_with_cache`
        (a named `BlockCache` in and out), attention pictures through
        `call_with_attention_scores`; both take their inputs as a call does (floats cast
        to the compute dtype under a mixed policy, the Keras masks read the same way:
        a step's cache keeps the padding mask of the tokens so far). The scored and
        cached calls take a functional model's symbolic inputs (`keras.Input`) too,
        through the block's `__call__`, so that a model records the block, any number
        of them. A subclass that overrides `call` must therefore keep its private
        keywords, `_entry=None, _cache=None, _keeps=False` (not through `**kwargs`,
        where Keras refuses tensors), pass them to `super().call` and, where `_entry` is
        given, return its result as it is: those entry points refuse an override
        without them on symbolic inputs, naming this.

    Example:
    >>> block = TransformerBlock(num_heads=2, intermediate_dim=16, causal=True)
    >>> tuple(block(keras.ops.ones((1, 4, 8))).shape)
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
        dropout = check_rate("dropout", dropout)
        attention_dropout = check_rate("attention_dropout", attention_dropout)
        layer_norm_epsilon = check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.norm_first = check_flag("norm_first", norm_first)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.causal = check_flag("causal", causal)
        self.cross_attention = check_flag("cross_attention", cross_attention)
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
        # Checked (as plain ints) by the sublayers that take them.
        self.num_heads = self.self_attention.num_heads
        self.intermediate_dim = self.feed_forward.intermediate_dim
        self.supports_masking = True

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

    def _forward(self, inputs, attend_self, attend_cross, training):
        """The three sublayers around `attend_self` and `attend_cross`, (B, T, D) → (B, T, D)
        attention outputs: the one wiring of the plain, cached and scored calls."""
        x = self._sublayer(
            inputs,
            self.self_attention_norm,
            lambda h: self.self_attention_dropout(attend_self(h), training=training),
        )
        if self.cross_attention:
            x = self._sublayer(
                x,
                self.cross_attention_norm,
                lambda h: self.cross_attention_dropout(attend_cross(h), training=training),
            )
        return self._sublayer(
            x, self.feed_forward_norm, lambda h: self.feed_forward(h, training=training)
        )

    def _build_for(self, inputs, context=None) -> None:
        """Builds the block, not yet built, as its first call would: the entry points
        other than `__call__` skip Keras' build-on-first-call, and a later call rebuilt
        the sublayers they had built, which Keras refuses."""
        if not self.built:
            self.build(tuple(inputs.shape), None if context is None else tuple(context.shape))

    def _as_call_input(self, x):
        """`x` as `__call__` hands it to `call`: floats cast to the compute dtype (a
        mixed policy's float16 or bfloat16), its Keras mask kept. The other entry points
        are plain methods, which float32 inputs under a mixed policy made fail in the
        first residual sum (float32 + float16)."""
        if x is None:
            return None
        mask = keras_mask(x)
        x = self.dtype_policy.convert_input(x, self.autocast, self.input_dtype)
        return x if mask is None else with_keras_mask(x, mask)

    def _check_context(self, context) -> None:
        if self.cross_attention and context is None:
            raise ValueError("This block has cross-attention: pass `context` (the encoder output).")
        if not self.cross_attention and context is not None:
            raise ValueError(
                "This block has no cross-attention, so it cannot attend to `context`: build "
                "it with `cross_attention=True`, or call it without `context`."
            )

    def call(
        self,
        inputs,
        context=None,
        padding_mask=None,
        attention_mask=None,
        context_padding_mask=None,
        training=None,
        _entry=None,
        _cache=None,
        _keeps=False,
    ):
        # The names and values of `_entry`, `_cache` and `_keeps` are saved in a
        # functional model's .keras file (its nodes' call arguments): part of the file
        # format now, never to be renamed.
        if _entry == "call_with_cache":  # on symbolic inputs, as below
            self_attention, cross, context_mask, past_mask = _cache
            cache = BlockCache(
                KeyValue(*self_attention),
                None if cross is None else KeyValue(*cross),
                context_mask,
                past_mask,
            )
            outputs, cache = self._call_with_cache(
                inputs, cache, padding_mask, context_padding_mask
            )
            kept = cache.padding_mask
            if _keeps and kept is None:  # traced without the inputs' Keras mask
                shape = ops.shape(cache.self_attention.key)  # (B, H, P + T, Dh)
                kept = ops.ones((shape[0], shape[2]), "bool")
            return (outputs, *cache.self_attention, *([kept] if _keeps else []))
        outputs, scores = self._call_with_scores(
            inputs, context, padding_mask, attention_mask, context_padding_mask, training
        )
        if _entry == "call_with_attention_scores":
            # `call_with_attention_scores` and `call_with_cache` on a functional model's
            # symbolic inputs: through `__call__`, the model records the block, not its
            # sublayers, whose names repeat from block to block (Keras refused a model
            # of two).
            return (outputs, *(x for x in scores if x is not None))
        return outputs

    def compute_output_spec(self, *args, _entry=None, **kwargs):
        if _entry is None:
            return super().compute_output_spec(*args, **kwargs)
        # The scored and cached calls (see `call`): traced, since `compute_output_shape`
        # gives the plain call's shape.
        return keras.Operation.compute_output_spec(self, *args, _entry=_entry, **kwargs)

    def _call_with_scores(
        self, inputs, context, padding_mask, attention_mask, context_padding_mask, training
    ):
        """`call` and `call_with_attention_scores`, one path so that the two cannot
        disagree (the scored call once ignored the Keras masks): `(outputs, AttentionScores)`."""
        self._check_context(context)
        if context is not None:
            check_batch_sizes(inputs=inputs.shape, context=context.shape)
        if padding_mask is None:
            padding_mask = keras_mask(inputs)
        if context_padding_mask is None and context is not None:
            context_padding_mask = keras_mask(context)
        scores = {}

        def attend_self(h):
            attention = self.self_attention
            output, scores["self"] = attention.attend(
                h,
                attention.compute_key_value(h),
                padding_mask=padding_mask,
                attention_mask=attention_mask,
                causal=self.causal,
                training=training,
            )
            return output

        def attend_cross(h):
            attention = self.cross_attention_layer
            output, scores["cross"] = attention.attend(
                h,
                attention.compute_key_value(context),
                padding_mask=context_padding_mask,
                training=training,
            )
            return output

        outputs = self._forward(inputs, attend_self, attend_cross, training)
        return outputs, AttentionScores(scores["self"], scores.get("cross"))

    def initial_cache(self, batch_size, context=None) -> BlockCache:
        """The cache before the first token: an empty (B, H, 0, Dh) self-attention part
        and, with cross-attention, the keys and values of `context` (B, S, D), projected
        once here, and the Keras mask `context` carries (`context_padding_mask`), which
        the steps then read as the plain call reads it. The block must be built (called,
        or `build(inputs_shape)`): B alone does not give the width D, which
        `call_with_cache` and `call_with_attention_scores` read from their inputs."""
        check_static_size("batch_size", batch_size)
        if not hasattr(batch_size, "dtype") and not is_integer(batch_size):
            raise ValueError(
                "`batch_size` must be an integer or a scalar integer tensor. "
                f"Received: batch_size={batch_size!r}"
            )
        attention = self.self_attention
        shape = (batch_size, attention.num_heads, 0, attention.head_width)
        empty = ops.zeros(shape, self.compute_dtype)
        cross = context_padding_mask = None
        if self.cross_attention:
            self._check_context(context)
            cross = self.cross_attention_layer.compute_key_value(context)
            context_padding_mask = keras_mask(context)
        return BlockCache(KeyValue(empty, empty), cross, context_padding_mask)

    def call_with_cache(
        self, inputs, cache: BlockCache, padding_mask=None, context_padding_mask=None
    ):
        """One inference step over the cache.

        Args:
            inputs: (B, T, D) the new tokens.
            cache: the `BlockCache` from `initial_cache` or the previous step.
            padding_mask: (B, P + T), False at padding; when omitted, the Keras mask of
                `inputs` for the T new tokens after the cache's for the P past ones
                (`BlockCache.padding_mask`; all True where either carried none), as a
                plain call over the whole sequence reads it.
            context_padding_mask: (B, S), False at encoder padding; when omitted, the
                cache's (the Keras mask of the `context` given to `initial_cache`), as
                the plain call reads the context's.

        Returns:
            `(outputs (B, T, D), BlockCache)`: the self-attention part and its padding
            mask (where kept) P + T long, the cross-attention part and its mask unchanged.
        """
        if self.cross_attention and cache.cross_attention is None:
            raise ValueError("This block has cross-attention: its cache needs `cross_attention`.")
        inputs = self._as_call_input(inputs)
        self._build_for(inputs)
        if is_symbolic(inputs, tuple(cache), padding_mask, context_padding_mask):
            # Whether the step keeps a padding mask, decided here where the symbolic
            # inputs show their Keras mask: the traced call may not see it.
            keeps = cache.padding_mask is not None or (
                padding_mask is None and keras_mask(inputs) is not None
            )
            check_call_override(self, TransformerBlock)
            self._check_step(inputs, cache, padding_mask, context_padding_mask)
            outputs, key, value, *kept = self(
                inputs,
                padding_mask=padding_mask,
                context_padding_mask=context_padding_mask,
                _entry="call_with_cache",
                _cache=tuple(cache),
                _keeps=keeps,
            )
            present = KeyValue(key, value)
            return outputs, cache._replace(
                self_attention=present, padding_mask=next(iter(kept), None)
            )
        outputs, cache = self._call_with_cache(inputs, cache, padding_mask, context_padding_mask)
        return _with_mask_of(outputs, inputs), cache

    def _check_step(self, inputs, cache: BlockCache, padding_mask, context_padding_mask):
        """Refuses, where the static shapes tell, the cache and masks the step's
        sublayers would refuse, with their messages: on symbolic inputs, before the
        block's `__call__`, where Keras wrapped the error in its own text with the
        private arguments."""
        attention = self.self_attention
        attention._check_cache(cache.self_attention, inputs.shape)
        past, new = cache.self_attention[0].shape[2], inputs.shape[1]
        check_mask_arguments(
            new,
            None if past is None or new is None else past + new,
            padding_mask,
            causal=self.causal,
            batch_size=inputs.shape[0],
        )
        if self.cross_attention:
            check_mask_arguments(
                new,
                static_key_length(cache.cross_attention),
                cache.context_padding_mask
                if context_padding_mask is None
                else context_padding_mask,
                batch_size=inputs.shape[0],
            )

    def _call_with_cache(self, inputs, cache: BlockCache, padding_mask, context_padding_mask):
        if context_padding_mask is None:
            context_padding_mask = cache.context_padding_mask
        padding_mask, kept = self._step_padding_mask(inputs, cache, padding_mask)
        present = []

        def attend_self(h):
            output, grown = self.self_attention.call_with_cache(
                h, cache.self_attention, padding_mask=padding_mask, causal=self.causal
            )
            present.append(grown)
            return output

        def attend_cross(h):
            output, _ = self.cross_attention_layer.attend(
                h, cache.cross_attention, padding_mask=context_padding_mask
            )
            return output

        outputs = self._forward(inputs, attend_self, attend_cross, training=False)
        return outputs, cache._replace(self_attention=present[0], padding_mask=kept)

    @staticmethod
    def _step_padding_mask(inputs, cache: BlockCache, padding_mask):
        """A step's (B, P + T) padding mask and what its cache keeps of it: the explicit
        one (kept where the cache kept one), else the cache's past mask followed by the
        Keras mask of `inputs`, all True where either is missing; None where neither is
        there, as in a plain call without masks."""
        if padding_mask is not None:
            return padding_mask, None if cache.padding_mask is None else padding_mask
        new, past = keras_mask(inputs), cache.padding_mask
        if new is None and past is None:
            return None, None
        batch = ops.shape(inputs)[0]
        if new is None:
            new = ops.ones((batch, ops.shape(inputs)[1]), "bool")  # (B, T)
        if past is None:
            past = ops.ones((batch, ops.shape(cache.self_attention.key)[2]), "bool")  # (B, P)
        mask = ops.concatenate([ops.cast(past, "bool"), ops.cast(new, "bool")], axis=1)
        return mask, mask  # (B, P + T)

    def call_with_attention_scores(
        self,
        inputs,
        context=None,
        padding_mask=None,
        context_padding_mask=None,
        attention_mask=None,
    ):
        """The plain call (no dropout) that also returns its attention probabilities; the
        masks default as in `call` (the Keras masks of `inputs` and `context`).

        Returns:
            `(outputs (B, T, D), AttentionScores)`: self-attention (B, H, T, T) and,
            with cross-attention, (B, H, T, S) probabilities, float32 (float64 in a
            float64 block).
        """
        inputs, context = self._as_call_input(inputs), self._as_call_input(context)
        self._build_for(inputs, context)
        if is_symbolic(inputs, context, padding_mask, context_padding_mask, attention_mask):
            # Checked here, as the eager path checks them on its way: inside `__call__`
            # Keras wrapped the error in its own text, with the private arguments.
            check_call_override(self, TransformerBlock)
            self._check_context(context)
            if context is not None:
                check_batch_sizes(inputs=inputs.shape, context=context.shape)
            length, batch = inputs.shape[1], inputs.shape[0]
            check_mask_arguments(length, length, padding_mask, attention_mask, self.causal, batch)
            if context is not None:
                check_mask_arguments(
                    length, context.shape[1], context_padding_mask, batch_size=batch
                )
            outputs, *scores = self(
                inputs,
                context=context,
                padding_mask=padding_mask,
                attention_mask=attention_mask,
                context_padding_mask=context_padding_mask,
                training=False,
                _entry="call_with_attention_scores",
            )
            return outputs, AttentionScores(*scores)
        outputs, scores = self._call_with_scores(
            inputs,
            context,
            padding_mask,
            attention_mask,
            context_padding_mask,
            training=False,
        )
        return _with_mask_of(outputs, inputs), scores

    def compute_output_shape(self, inputs_shape, context_shape=None):
        return tuple(inputs_shape)

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


def _with_mask_of(outputs, inputs):
    """`outputs` carrying the Keras mask of `inputs`, as `__call__` passes it on from a
    call: the other entry points are plain methods."""
    mask = keras_mask(inputs)
    return outputs if mask is None else with_keras_mask(outputs, mask)
