"""The SavedModel's `generate` signature: greedy decoding with the cache, in one graph.

It mirrors `transformer_zoo.search.greedy_search` over `KerasEngine`: prompts are
left-aligned (each row's next token in the last column, positions `cumsum(mask) - 1`),
a row that emitted EOS writes padding afterwards, and decoding stops once every row is
done or `max_new_tokens` tokens were produced. The cache grows by concatenation inside a
`tf.while_loop` whose shape invariants leave its length dimension free (SavedModel is not
ONNX, so the loop and argmax may stay in the graph).
"""

from __future__ import annotations

import tensorflow as tf

from transformer_zoo.export.graphs import INT


def left_align(ids, mask):
    """Rows' real tokens moved right (a stable sort puts padding first); columns that are
    padding in every row are dropped, as `KerasEngine` does."""
    order = tf.argsort(tf.cast(mask, tf.int32), axis=1, stable=True)
    ids = tf.gather(ids, order, batch_dims=1)
    mask = tf.gather(mask, order, batch_dims=1)
    width = tf.reduce_max(tf.reduce_sum(tf.cast(mask, tf.int32), axis=1))
    start = tf.shape(ids)[1] - width
    return tf.where(mask, ids, tf.zeros_like(ids))[:, start:], mask[:, start:]


def greedy_loop(step, start_logits, state, max_new_tokens, eos_id, pad_id, invariants):
    """Greedy tokens (B, N), N <= max_new_tokens.

    Args:
        step: `(tokens (B, 1), state) -> (logits (B, V), state)`.
        start_logits: (B, V) logits of the first new token.
        state: the loop's tensors (masks, positions, cache), a flat tuple.
        max_new_tokens: int32 scalar tensor, at least 1.
        eos_id, pad_id: Python ints; eos_id None never stops early.
        invariants: the shape invariants of `state`, in order.
    """

    def choose(logits, done):
        best = tf.argmax(logits, axis=-1, output_type=INT)
        return tf.where(done, tf.constant(pad_id, INT), best)

    batch = tf.shape(start_logits)[0]
    done = tf.zeros([batch], tf.bool)
    chosen = choose(start_logits, done)
    if eos_id is not None:
        done = tf.logical_or(done, tf.equal(chosen, eos_id))
    tokens = chosen[:, None]

    def cond(i, tokens, done, *state):
        return tf.logical_and(i < max_new_tokens, tf.logical_not(tf.reduce_all(done)))

    def body(i, tokens, done, *state):
        logits, state = step(tokens[:, -1:], tuple(state))
        chosen = choose(logits, done)
        if eos_id is not None:
            done = tf.logical_or(done, tf.equal(chosen, eos_id))
        return (i + 1, tf.concat([tokens, chosen[:, None]], axis=1), done, *state)

    _, tokens, *_ = tf.while_loop(
        cond,
        body,
        (tf.constant(1), tokens, done, *state),
        shape_invariants=(
            tf.TensorShape([]),
            tf.TensorShape([None, None]),
            tf.TensorShape([None]),
            *invariants,
        ),
    )
    return tokens


def cached_greedy(call, logits, present, mask, positions, max_new_tokens, eos_id, pad_id):
    """Greedy tokens (B, N) from a cached model step, after the prompt's pass.

    Args:
        call: `(tokens (B, S), cache, mask (B, L), positions (B, S)) -> (logits, present)`:
            `DecoderOnly.call_with_cache`, or an encoder-decoder's `decode_step` with its
            source mask bound; `present` is one tuple per layer (2 self-attention tensors,
            or 4 with the cross-attention keys and values), which `call` takes back.
        logits, present: the prompt pass's outputs.
        mask: (B, L) bool mask of the prompt; positions: (B, L) its positions.
        max_new_tokens, eos_id, pad_id: as for `greedy_loop`.
    """
    per_layer = len(present[0])
    heads, head_width = present[0][0].shape[1], present[0][0].shape[3]
    cache_shape = tf.TensorShape([None, heads, None, head_width])  # batch, length free

    def step(tokens, state):
        mask, position, *flat = state
        mask = tf.concat([mask, tf.ones_like(tokens, tf.bool)], axis=1)
        cache = [tuple(flat[i : i + per_layer]) for i in range(0, len(flat), per_layer)]
        logits, present = call(tokens, cache, mask, position[:, None])
        flat = [t for layer in present for t in layer]
        return logits[:, -1], (mask, position + 1, *flat)

    flat = [t for layer in present for t in layer]
    state = (mask, positions[:, -1] + 1, *flat)
    invariants = [tf.TensorShape([None, None]), tf.TensorShape([None])]
    invariants += [cache_shape] * len(flat)
    return greedy_loop(step, logits[:, -1], state, max_new_tokens, eos_id, pad_id, invariants)


def check_budget(prompt_length, max_new_tokens, max_length):
    """An error (not a silently truncated result) when the prompt plus the new tokens
    exceed the model's positions."""
    return [
        tf.debugging.assert_greater_equal(
            max_new_tokens, 1, message="max_new_tokens must be at least 1"
        ),
        tf.debugging.assert_less_equal(
            prompt_length + max_new_tokens,
            max_length,
            message=f"the prompt plus max_new_tokens exceeds the model's max_length={max_length}",
        ),
    ]
