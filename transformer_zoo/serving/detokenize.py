"""The text each token adds to a sequence's text: how a completion, its echoed prompt and
the tokens of `logprobs` become text, for every tokenizer a generative model may have
(SentencePiece, GPT-2's byte-level BPE, Marian's).

Every id a model writes is kept, and one past its tokenizer's vocabulary (a model whose
output vocabulary was padded to a round size) has no text, as transformers decodes it;
the tokenizers' own `decode` still refuses such an id from a user."""

from __future__ import annotations

from collections.abc import Sequence

WINDOW = 6  # ids read before a token: a UTF-8 character spans at most 4 byte pieces


def token_text(tokenizer, before: Sequence[int], token_id: int) -> str:
    """The characters `token_id` adds to the text of the ids `before` it.

    A token's text is not its own decoding: SentencePiece drops the space of a text's
    first piece (`▁March` alone decodes to "March"), so a completion decoded alone loses
    the space that separates it from its prompt. As vLLM's incremental detokenizer does,
    the ids before the token are decoded with and without it, and the difference is its
    text (`continuation_text`). A token that leaves a character incomplete (the first
    bytes of a UTF-8 character, which a byte-level token may hold) adds nothing yet and
    the one that completes it adds the whole character; a special token, or an id past
    the tokenizer's vocabulary, adds nothing. So the texts of a sequence's tokens join to
    its text, but for a character still incomplete when it ends (`end_text`).

    Args:
        tokenizer: the model's output tokenizer (`decode(ids, stop_at_eos=False)`,
            `vocabulary_size`, and `incomplete_end(ids)` where a token may hold part of a
            character).
        before: the ids the token follows: the prompt and what was generated so far.
        token_id: the token.

    Returns:
        The token's text: what it appends, possibly "".
    """
    return continuation_text(tokenizer, before, [token_id], finished=False)


def end_text(tokenizer, ids: Sequence[int]) -> str:
    """What the text of a sequence that has ended adds to the texts of its tokens
    (`token_text`): a character still incomplete at its end, whose bytes never all came,
    as its decoding shows it (U+FFFD), else ""."""
    if not holds_back(tokenizer, ids):  # most rows: nothing to decode
        return ""
    return continuation_text(tokenizer, ids, [])


def holds_back(tokenizer, ids: Sequence[int]) -> bool:
    """Whether the text of `ids` ends in a character still incomplete, which a running
    sequence holds back (`token_text`) and an ended one shows as U+FFFD (`end_text`)."""
    incomplete_end = getattr(tokenizer, "incomplete_end", None)
    if incomplete_end is None:  # pieces of whole characters: nothing is ever held back
        return False
    return bool(incomplete_end(_last_ids(ids, WINDOW, tokenizer.vocabulary_size)))


def continuation_text(
    tokenizer,
    before: Sequence[int],
    ids: Sequence[int],
    eos_id: int | None = None,
    finished: bool = True,
) -> str:
    """The text `ids` add to the text of the ids `before` them: a completion as it
    continues its prompt (`" March"` after "on the fifth of"), up to the first `eos_id`
    among `ids`. A few ids before them suffice (`WINDOW` of those the tokenizer has),
    unless their text is empty (SentencePiece strips every leading space, so the window
    grows until it holds some text or the whole sequence). The text of `before` is taken
    without a character still incomplete at its end, which `ids` may complete; so is the
    text of `ids`, unless `finished` (the completion has ended: its text is then what
    decoding the whole sequence adds)."""
    vocabulary = tokenizer.vocabulary_size
    ids = [int(i) for i in ids]
    if eos_id is not None and eos_id in ids:
        ids = ids[: ids.index(eos_id)]
    ids = [i for i in ids if 0 <= i < vocabulary]
    size = WINDOW
    while True:
        window = _last_ids(before, size, vocabulary)
        shown = _text(tokenizer, window, finished=False)
        if shown or len(window) < size:
            break
        size *= 2
    return _text(tokenizer, window + ids, finished)[len(shown) :]


def _last_ids(ids: Sequence[int], count: int, vocabulary: int) -> list[int]:
    """The last `count` of `ids` that the tokenizer has (fewer where there are fewer):
    the ids of a padded vocabulary have no text, and a character's bytes join across
    them, so they do not count."""
    found = []
    for token_id in reversed(ids):
        if 0 <= token_id < vocabulary:
            found.append(int(token_id))
            if len(found) == count:
                break
    return found[::-1]


def _text(tokenizer, ids: list[int], finished: bool) -> str:
    """The text of `ids` (ids the tokenizer has), every one counted (GPT-2's begin token
    is also its end token); unless `finished`, without a character still incomplete at
    the end (the tokenizer's `incomplete_end`: a byte-level BPE's; the pieces of the
    others are whole characters)."""
    text = tokenizer.decode(ids, stop_at_eos=False)
    incomplete_end = getattr(tokenizer, "incomplete_end", None)
    if finished or incomplete_end is None:
        return text
    return text[: len(text) - incomplete_end(ids)]
