"""Scaled dot-product multi-head attention (paper §3.2), with masks and a KV cache."""

from __future__ import annotations

import inspect
import math

import keras
from keras import ops

from transformer_zoo.layers.cache import KeyValue
from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.masking import (
    check_mask_arguments,
    keras_mask,
    merge_masks,
    with_keras_mask,
)
from transformer_zoo.layers.validation import (
    check_batch_sizes,
    check_flag,
    check_heads,
    check_rate,
    check_size,
)

# The arguments of `keras.layers.MultiHeadAttention` (constructor and call) that a Keras
# user brings, and what this layer takes instead: without them Keras' "Unrecognized
# keyword arguments" or Python's "unexpected keyword argument" names neither.
KERAS_ARGUMENTS = {
    "key_dim": "`head_dim` (one width Dh for queries, keys and values)",
    "value_dim": "`head_dim` (one width Dh for queries, keys and values)",
    "output_shape": "`output_dim`",
    "value": "`context` (the sequence keys and values are computed from)",
    "key": "`context` (the sequence keys and values are computed from)",
    "use_causal_mask": (
        "`causal=True`, which aligns the last query with the last key (query i sees keys "
        "up to S - T + i, as over a cache; T > S is refused): Keras' mask only where T = S. "
        "For Keras' alignment of the first query with the first key, pass "
        "`attention_mask=np.tril(np.ones((T, S), bool))`"
    ),
    "return_attention_scores": (
        "`attend(query, compute_key_value(context))`, which returns `(output, probabilities)`"
    ),
    "value_mask": "`padding_mask` (B, S), False at padding keys",
    "key_mask": "`padding_mask` (B, S), False at padding keys",
    "query_mask": (
        "`attention_mask` (B, T, S): `query_mask[:, :, None]` masks the rows of padding "
        "queries, as Keras does"
    ),
}
# Keras' constructor arguments with no counterpart here, and why.
KERAS_UNSUPPORTED = {
    "attention_axes": "attention runs over the sequence axis of (B, L, D) inputs only",
    "flash_attention": "the softmax is computed explicitly, in float32 under mixed precision",
    "sliding_window": "pass the band as an `attention_mask` (B, T, S) or (T, S) instead",
    "use_gate": "there is no output gate",
    "seed": "the attention dropout draws from Keras' global seed (`keras.utils.set_random_seed`)",
    **dict.fromkeys(
        ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint"),
        "regularize or constrain the weights through the optimizer (`weight_decay`) instead",
    ),
}


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
    instead of NaN). The softmax runs in float32 for float16 and bfloat16 layers, in the
    layer's own dtype otherwise.

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
        padding_mask: optional (B, S) boolean, False at padding keys. When omitted, the
            Keras mask of `context` (or of `query` in self-attention) is used, e.g. from
            `keras.layers.Embedding(mask_zero=True)`; the output carries `query`'s.
        attention_mask: optional (B, T, S) boolean, or (T, S) for every sequence of the
            batch, as Keras' MultiHeadAttention takes it.
        causal: forbid attending to later positions: query i sees keys up to S - T + i
            (the last query is aligned with the last key, as over a cache; T > S is
            refused where both are known, `masking.causal_mask`).
        training: whether dropout is active.

    Returns:
        The (B, T, output_dim) output. `call_with_cache` (self-attention over a KV
        cache, returning the grown cache), `compute_key_value` and `attend` (attention
        over keys and values computed once, with the probabilities) are the other entry
        points, each with one return shape. Like a call, each builds a layer not yet
        built from the shape it gets, and takes a functional model's symbolic inputs
        (`keras.Input`) too: there it goes through the layer's `__call__`, so that the
        model records this layer (any number of them, saved and loaded with it) rather
        than its projections, whose names repeat from layer to layer.

    A subclass that overrides `call` must keep its private keywords, `_entry=None,
    _key_value=None` (not through `**kwargs`, where Keras refuses tensors), pass them to
    `super().call` and, where `_entry` is given (the other entry points on
    `keras.Input`s), return its result as it is: those entry points refuse an override
    without them on symbolic inputs, naming this.

    Example:
    >>> mha = MultiHeadAttention(num_heads=2)
    >>> x = keras.ops.ones((1, 4, 8))
    >>> tuple(mha(x, causal=True).shape)
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
        _refuse_keras_arguments(kwargs)
        super().__init__(**kwargs)
        self.num_heads = check_size("num_heads", num_heads)
        self.head_dim = None if head_dim is None else check_size("head_dim", head_dim)
        self.output_dim = None if output_dim is None else check_size("output_dim", output_dim)
        self.dropout = check_rate("dropout", dropout)
        self.use_bias = check_flag("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.supports_masking = True

    def __call__(self, *args, **kwargs):
        _refuse_keras_arguments(kwargs)
        return super().__call__(*args, **kwargs)

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
        _check_sequence("query", query_shape)
        if context_shape is not None:
            _check_sequence("context", context_shape)
        d_model = self._query_width = query_shape[-1]
        head_dim = self.head_dim
        if head_dim is None:
            check_heads(d_model, self.num_heads, "d_model")
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

    def _build_from(self, query_shape) -> None:
        """Builds the layer, not yet built, as a call with this query (self-attention)
        would: the entry points other than `__call__` are reached without Keras'
        build-on-first-call. Once built, refuses a query of another width, naming the
        width it was built for."""
        _check_sequence("query", query_shape)
        if not self.built:
            self.build(tuple(query_shape))
            return
        width = self._query_width
        if query_shape[-1] is not None and query_shape[-1] != width:
            raise ValueError(
                f"{self.name} was built for queries of width D={width} (for cross-attention "
                "over a context of another width, `build(query_shape, context_shape)` it "
                f"before `compute_key_value(context)`). Received: query.shape={tuple(query_shape)}"
            )

    @property
    def head_width(self) -> int:
        """Dh, resolved once the layer is built (`head_dim`, or D / H)."""
        if not self.built:
            raise ValueError(
                f"{self.name} is not built yet, so its head width is unknown: call it once "
                "or `build` it with the input shape first."
            )
        return self._head_dim

    def _split_heads(self, x, shape):
        """(B, L, H·Dh) → (B, H, L, Dh); `shape` is the layer input's, not `x`'s: tf2onnx
        merges Dense's internal reshapes with this one and would then read a wrong (2-D)
        Shape."""
        if shape[0] is None or shape[1] is None:
            # A functional model's symbolic input: a reshape would keep the unknown B or L
            # as None for the model's runs; splitting the last axis needs neither.
            return ops.stack(ops.split(x, self.num_heads, axis=-1), axis=1)  # (B, H, L, Dh)
        x = ops.reshape(x, (shape[0], shape[1], self.num_heads, self._head_dim))  # (B, L, H, Dh)
        return ops.transpose(x, (0, 2, 1, 3))  # (B, H, L, Dh)

    def _merge_heads(self, x, shape):
        """(B, H, L, Dh) → (B, L, H·Dh), `_split_heads` undone."""
        if shape[0] is None or shape[1] is None:
            return ops.concatenate(ops.unstack(x, self.num_heads, axis=1), axis=-1)
        x = ops.transpose(x, (0, 2, 1, 3))  # (B, L, H, Dh)
        return ops.reshape(x, (shape[0], shape[1], self.num_heads * self._head_dim))

    def compute_key_value(self, context) -> KeyValue:
        """The `KeyValue` of a (B, S, Dc) sequence, each (B, H, S, Dh).

        For cross-attention: compute them once per source and `attend` to them at every
        decoding step, instead of projecting the encoder output again. The Keras mask of
        `context` (False at padding) comes along as the mask of the keys and values,
        which `attend` reads as a call reads the context's. A layer not yet
        built is built as `layer(context)` would build it, for self-attention: build a
        cross-attention layer whose queries have another width with
        `build(query_shape, context_shape)` first.
        """
        _check_sequence("context", context.shape)
        if not self.built:
            self._build_from(context.shape)
        if is_symbolic(context):
            check_call_override(self, MultiHeadAttention)
            return KeyValue(*self(context, _entry="compute_key_value"))
        return self._compute_key_value(context)

    def _compute_key_value(self, context) -> KeyValue:
        shape = ops.shape(context)
        key, value = ops.split(self.key_value_dense(context), 2, axis=-1)  # 2 × (B, S, H·Dh)
        key, value = self._split_heads(key, shape), self._split_heads(value, shape)
        mask = keras_mask(context)  # (B, S)
        if mask is not None:
            key, value = with_keras_mask(key, mask), with_keras_mask(value, mask)
        return KeyValue(key, value)

    def attend(
        self,
        query,
        key_value: KeyValue,
        padding_mask=None,
        attention_mask=None,
        causal=False,
        training=None,
    ):
        """softmax(QKᵀ/√d_k)V of (B, T, D) queries over given keys and values.

        Args:
            query: (B, T, D).
            key_value: the (B, H, S, Dh) keys and values (`compute_key_value`).
            padding_mask, attention_mask, causal, training: as for `call`; with S > T
                (a cache), causal query i sits at position S - T + i. When
                `padding_mask` is omitted, the Keras mask of the keys is read: that of
                the sequence `compute_key_value` got, as a call reads the context's.

        Returns:
            `(output (B, T, output_dim), probabilities (B, H, T, S))`, the probabilities
            float32 (float64 in a float64 layer).
        """
        self._build_from(query.shape)
        key, value = key_value
        if is_symbolic(query, key, value, padding_mask, attention_mask):
            # Checked here, as the eager path checks them in `_attend`: inside `__call__`
            # Keras wrapped the error in its own text, with the private arguments.
            check_call_override(self, MultiHeadAttention)
            check_mask_arguments(
                query.shape[1],
                static_key_length(key_value),
                padding_mask,
                attention_mask,
                causal,
                query.shape[0],
            )
            return tuple(
                self(
                    query,
                    padding_mask=padding_mask,
                    attention_mask=attention_mask,
                    causal=causal,
                    training=training,
                    _entry="attend",
                    _key_value=(key, value),
                )
            )
        output, probs = self._attend(
            query, key_value, padding_mask, attention_mask, causal, training
        )
        mask = keras_mask(query)  # passed on, as `__call__` passes it on from a call
        return (output if mask is None else with_keras_mask(output, mask)), probs

    def _attend(self, query, key_value, padding_mask, attention_mask, causal, training):
        key, value = key_value
        if padding_mask is None:
            padding_mask = keras_mask(key)
        shape = ops.shape(query)
        q = self._split_heads(self.query_dense(query), shape)  # (B, H, T, Dh)
        q = q * ops.cast(1.0 / math.sqrt(self._head_dim), q.dtype)
        scores = ops.matmul(q, ops.swapaxes(key, -1, -2))  # (B, H, T, S)
        if keras.backend.standardize_dtype(scores.dtype) in ("float16", "bfloat16"):
            # The softmax runs in float32 so that bf16/fp16 scores do not saturate.
            scores = ops.cast(scores, "float32")
        query_length, key_length = ops.shape(q)[2], ops.shape(key)[2]
        mask = merge_masks(
            query_length,
            key_length,
            padding_mask,
            attention_mask,
            causal,
            batch_size=ops.shape(q)[0],
            # Lengths unknown until a functional model runs: counted along the scores.
            like=scores[0, 0] if query_length is None or key_length is None else None,
        )
        if mask is not None:
            scores = ops.where(ops.expand_dims(mask, 1), scores, -3.0e38)  # (B, H, T, S)
        if scores.shape[-1] == 1:
            # One key (the first cached step of a one-token prompt): the softmax is 1,
            # and Keras would warn about a softmax over a length-1 axis.
            probs = ops.ones_like(scores)
        else:
            probs = ops.softmax(scores, axis=-1)
        attention = self.dropout_layer(ops.cast(probs, value.dtype), training=training)
        out = self._merge_heads(ops.matmul(attention, value), shape)  # (B, T, H·Dh)
        return self.output_dense(out), probs  # (B, T, output_dim), (B, H, T, S)

    def call(
        self,
        query,
        context=None,
        padding_mask=None,
        attention_mask=None,
        causal=False,
        training=None,
        _entry=None,
        _key_value=None,
    ):
        # `compute_key_value` and `attend` come through here (`_entry`) with a functional
        # model's symbolic inputs: called directly, their projections (`query`,
        # `key_value`, ...) would be the model's operations, and a second layer's of the
        # same names made Keras refuse the model. The names and values of `_entry` and
        # `_key_value` are saved in a functional model's .keras file (its nodes' call
        # arguments): part of the file format now, never to be renamed.
        if _entry == "compute_key_value":
            return tuple(self._compute_key_value(query))  # (key, value)
        if _entry == "attend":
            return self._attend(
                query, _key_value, padding_mask, attention_mask, causal, training
            )  # (output, probabilities)
        _check_sequence("query", query.shape)
        if context is not None:
            _check_sequence("context", context.shape)
            check_batch_sizes(query=query.shape, context=context.shape)
        if padding_mask is None:
            padding_mask = keras_mask(query if context is None else context)
        key_value = self._compute_key_value(query if context is None else context)
        output, _ = self._attend(query, key_value, padding_mask, attention_mask, causal, training)
        return output

    def call_with_cache(
        self, query, cache: KeyValue, padding_mask=None, attention_mask=None, causal=False
    ):
        """Self-attention of new tokens over the cached ones and themselves (inference).

        Args:
            query: (B, T, D) the new tokens.
            cache: the past `KeyValue`, each (B, H, P, Dh); P may be 0.
            padding_mask: (B, P + T), False at padding. The Keras mask of `query` is not
                read: it covers the T new keys only (`TransformerBlock.call_with_cache`
                keeps the past's in its cache).
            attention_mask: optional (B, T, P + T), or (T, P + T).
            causal: new token i may attend positions up to P + i.

        Returns:
            `(output (B, T, output_dim), KeyValue)` with `concat(past, new)` along P,
            each (B, H, P + T, Dh).

        Raises:
            ValueError: a cache whose batch size, heads or head width (where known)
                differ from the query's and the layer's.
        """
        self._build_from(query.shape)
        self._check_cache(cache, query.shape)
        cache = KeyValue(*cache)  # a plain (key, value) pair too
        new = self.compute_key_value(query)
        present = KeyValue(
            ops.concatenate([ops.cast(cache.key, new.key.dtype), new.key], axis=2),
            ops.concatenate([ops.cast(cache.value, new.value.dtype), new.value], axis=2),
        )
        output, _ = self.attend(query, present, padding_mask, attention_mask, causal)
        return output, present

    def _check_cache(self, cache, query_shape) -> None:
        """Refuses a cache that cannot extend this layer's keys and values, by name, where
        the sizes are known: the concatenation failed inside TensorFlow's kernel."""
        if not isinstance(cache, tuple) or len(cache) != 2:
            raise ValueError(
                "`cache` must be a `KeyValue(key, value)` of (B, H, P, Dh) tensors. "
                f"Received: cache of type {type(cache).__name__}"
            )
        expected = (query_shape[0], self.num_heads, None, self._head_dim)
        for name, x in zip(("key", "value"), cache, strict=True):
            shape = tuple(getattr(x, "shape", ()))
            fits = len(shape) == 4 and all(
                want is None or got is None or got == want
                for got, want in zip(shape, expected, strict=True)
            )
            if not fits:
                raise ValueError(
                    f"`cache.{name}` must be (B, H, P, Dh) = (B={expected[0]}, "
                    f"H={self.num_heads}, P, Dh={self._head_dim}) for this layer and "
                    f"query. Received: cache.{name}.shape={shape}"
                )

    def compute_output_spec(self, *args, _entry=None, **kwargs):
        if _entry is None:
            return super().compute_output_spec(*args, **kwargs)
        # `compute_key_value` and `attend` (see `call`): traced, since
        # `compute_output_shape` gives the plain call's shape.
        return keras.Operation.compute_output_spec(self, *args, _entry=_entry, **kwargs)

    def compute_output_shape(self, query_shape, context_shape=None):
        return tuple(query_shape[:-1]) + (self.output_dim or query_shape[-1],)

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


def _refuse_keras_arguments(arguments: dict) -> None:
    """Refuses an argument of `keras.layers.MultiHeadAttention`, naming ours or saying
    why there is none (the value, often a tensor, is not printed)."""
    for name in arguments:
        if name in KERAS_ARGUMENTS:
            raise ValueError(
                f"`{name}` is an argument of Keras' MultiHeadAttention; this one takes "
                f"{KERAS_ARGUMENTS[name]}."
            )
        if name in KERAS_UNSUPPORTED:
            raise ValueError(
                f"`{name}` is an argument of Keras' MultiHeadAttention, not supported by "
                f"this one: {KERAS_UNSUPPORTED[name]}."
            )


def check_call_override(layer: keras.layers.Layer, base: type) -> None:
    """Refuses `layer` where its class overrides `base.call` without all of `base.call`'s
    keywords, its private ones (`_entry`, ...) included: the entry points other than
    `call` go through `__call__` with them on a functional model's symbolic inputs.
    Python's "unexpected keyword argument" came from deep in Keras, and `**kwargs` does
    not do: Keras refuses tensors mixed with other values there ("In a nested call()
    argument, you cannot mix tensors and non-tensors")."""
    call = type(layer).call
    if call is base.call:
        return
    parameters = list(inspect.signature(base.call).parameters.values())[1:]  # after self
    private = [p for p in parameters if p.name[0] == "_"]
    taken = inspect.signature(call).parameters
    missing = [p.name for p in parameters if p.name not in taken]
    if missing:
        keywords = ", ".join(f"{p.name}={p.default!r}" for p in private)
        passed = ", ".join(f"{p.name}={p.name}" for p in private)
        raise ValueError(
            f"`{type(layer).__name__}.call` overrides `{base.__name__}.call` without all "
            f"of its keywords, so {layer.name} cannot take a functional model's symbolic "
            "inputs (`keras.Input`) in its entry points other than a call, which go "
            "through `__call__` with them. Give the override its keywords and "
            f"`{keywords}` (`**kwargs` does not do: Keras refuses tensors in it), and "
            f"where `{private[0].name}` is given, return `super().call(..., {passed})` as "
            f"it is. Missing: {', '.join(missing)}"
        )


def static_key_length(key_value) -> int | None:
    """S of (B, H, S, Dh) keys, where known."""
    shape = tuple(getattr(key_value[0], "shape", ()))
    return shape[2] if len(shape) == 4 else None


def is_symbolic(*values) -> bool:
    """Whether any of `values` (nested, None allowed) is a functional model's symbolic
    tensor (`keras.Input` and what layers make of it)."""
    return any(isinstance(x, keras.KerasTensor) for x in keras.tree.flatten(values))


def _check_sequence(name: str, shape) -> None:
    """Refuses an input that is not a (B, L, D) sequence before a reshape fails on it."""
    if len(shape) != 3:
        raise ValueError(
            f"`{name}` must be a (B, {'S' if name == 'context' else 'T'}, D) sequence of "
            f"vectors, of rank 3. Received: {name}.shape={tuple(shape)}"
        )
