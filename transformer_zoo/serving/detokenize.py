"""The text each token adds to a sequence's text: how a completion, its echoed prompt and
the tokens of `logprobs` become text, for every tokenizer a generative model may have
(SentencePiece, GPT-2's byte-level BPE, Marian's)."""

from __future__ import annotations

from collections.abc import Sequence

WINDOW = 6  # ids read before a token: a UTF-8 character spans at most 4 byte pieces
REPLACEMENT = "\ufffd"  # what a decoder shows for an incomplete character


def token_text(tokenizer, before: Sequence[int], token_id: int) -> str:
    """The characters `token_id` adds to the text of the ids `before` it.

    A token's text is not its own decoding: SentencePiece drops the space of a text's
    first piece (`▁March` alone decodes to "March"), so a completion decoded alone loses
    the space that separates it from its prompt. As vLLM's incremental detokenizer does,
    the ids before the token are decoded with and without it, and the difference is its
    text (`continuation_text`). A token that leaves a character incomplete adds nothing
    yet and the one that completes it adds the whole character; a special token adds
    nothing. So the texts of a sequence's tokens join to its text.

    Args:
        tokenizer: the model's output tokenizer (`decode(ids, stop_at_eos=False)`).
        before: the ids the token follows: the prompt and what was generated so far.
        token_id: the token.

    Returns:
        The token's text: what it appends, possibly "".
    """
    return continuation_text(tokenizer, before, [token_id])


def continuation_text(
    tokenizer, before: Sequence[int], ids: Sequence[int], eos_id: int | None = None
) -> str:
    """The text `ids` add to the text of the ids `before` them: a completion as it
    continues its prompt (`" March"` after "on the fifth of"), up to the first `eos_id`
    among `ids`. A few ids before them suffice, unless their text is empty (SentencePiece
    strips every leading space, so the window grows until it holds some text or the
    whole sequence); a character still incomplete at the end is left out."""
    ids = [int(i) for i in ids]
    if eos_id is not None and eos_id in ids:
        ids = ids[: ids.index(eos_id)]
    size = min(WINDOW, len(before))
    while True:
        window = [int(i) for i in before[len(before) - size :]]
        shown = _decode(tokenizer, window).rstrip(REPLACEMENT)
        if shown or size == len(before):
            break
        size = min(2 * size, len(before))
    return _decode(tokenizer, window + ids)[len(shown) :].rstrip(REPLACEMENT)


def _decode(tokenizer, ids: list[int]) -> str:
    # Every id counts: GPT-2's begin token is also its end token.
    return tokenizer.decode(ids, stop_at_eos=False)
