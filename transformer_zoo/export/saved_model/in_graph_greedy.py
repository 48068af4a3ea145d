"""The SavedModel's `generate` signature: greedy decoding with the cache, in one graph.

It mirrors `generation.greedy.greedy_search` over `CachedEngine`: prompts are
left-aligned (`generation.alignment`, the same functions on TensorFlow's numpy API),
a row that emitted EOS writes padding afterwards, and decoding stops once every row is
done or `max_new_tokens` tokens were produced. The cache grows by concatenation inside a
`tf.while_loop` whose shape invariants leave its length dimension free (SavedModel is not
ONNX, so the loop and argmax may stay in the graph).
"""

from __future__ import annotations

import tensorflow as tf

from transformer_zoo.generation.graphs import INT
from transformer_zoo.layers import KeyValue


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


def cached_greedy(model, logits, cache, mask, where, max_new_tokens, eos_id, pad_id):
    """Greedy tokens (B, N) from `model.step` (the step interface both generative
    families share), after the prompt's pass.

    Args:
        model: a `DecoderOnly` or an `EncoderDecoder`.
        logits, cache: the prompt pass's outputs (a `DecodingCache`).
        mask: (B, L) bool mask of the prompt; where: (B, L) its positions.
        max_new_tokens, eos_id, pad_id: as for `greedy_loop`.
    """

    # Only the self-attention keys and values grow; the cross-attention part and the
    # source mask of an encoder-decoder stay as the prompt pass left them.
    def grown(cache):
        return [t for block in cache.blocks for t in block.self_attention]

    def rebuilt(flat):
        blocks = tuple(
            block._replace(self_attention=KeyValue(*flat[2 * i : 2 * i + 2]))
            for i, block in enumerate(cache.blocks)
        )
        return cache._replace(blocks=blocks)

    def step(tokens, state):
        mask, position, *flat = state
        mask = tf.concat([mask, tf.ones_like(tokens, tf.bool)], axis=1)
        logits, present = model.step(tokens, rebuilt(flat), mask, position[:, None])
        return logits[:, -1], (mask, position + 1, *grown(present))

    flat = grown(cache)
    heads, head_width = flat[0].shape[1], flat[0].shape[3]
    cache_shape = tf.TensorShape([None, heads, None, head_width])  # batch, length free
    state = (mask, where[:, -1] + 1, *flat)
    invariants = [tf.TensorShape([None, None]), tf.TensorShape([None])]
    invariants += [cache_shape] * len(flat)
    return greedy_loop(step, logits[:, -1], state, max_new_tokens, eos_id, pad_id, invariants)


def check_budget(prompt_length, max_new_tokens, max_length, what: str = "prompt"):
    """An error (not a silently truncated result) when the prompt (`what`: an
    encoder-decoder's "target start") plus the new tokens exceed the model's positions."""
    return [
        tf.debugging.assert_greater_equal(
            max_new_tokens, 1, message="max_new_tokens must be at least 1"
        ),
        tf.debugging.assert_less_equal(
            prompt_length + max_new_tokens,
            max_length,
            message=f"the {what} plus max_new_tokens exceeds the model's max_length={max_length}",
        ),
    ]
