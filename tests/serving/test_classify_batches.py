"""`ServedModel.classify` runs its texts (and pairs) in length-sorted batches, like
`embed`: every text gets the probabilities it gets alone, in input order."""

from __future__ import annotations

import numpy as np

from tests.artifacts import SENTENCES
from transformer_zoo.serving import load_onnx


def probabilities(results) -> np.ndarray:
    return np.array([list(r["probabilities"].values()) for r in results])


def test_each_text_and_pair_gets_what_it_gets_alone_in_input_order(family_artifacts):
    served = load_onnx(family_artifacts("encoder-only").export_dir)
    texts = sorted(set(SENTENCES), key=lambda s: (len(s) * 7919) % 13)[:9]
    pairs = list(reversed(texts))
    lengths = served.token_counts(texts)
    assert len(set(lengths)) > 2 and lengths != sorted(lengths, reverse=True)
    for second in (None, pairs):
        alone = [
            served.classify([text], None if second is None else [second[i]])[0]
            for i, text in enumerate(texts)
        ]
        batched = served.classify(texts, second, batch_size=2)
        assert [r["label"] for r in batched] == [r["label"] for r in alone]
        np.testing.assert_allclose(probabilities(batched), probabilities(alone), atol=1e-5)
