"""The warnings a run gives about its data, a line each (the command line shows them):
held-out files with the training file's very contents (`warn_training_file_reused`),
examples the pipelines cut to the model's length (`warn_cut`), and training text that the
tokenizer `--init` brings does not know (`warn_unknown`)."""

from __future__ import annotations

import logging

from transformer_zoo.data.run_task import data_digests
from transformer_zoo.data.task import SPLIT_NAMES
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.family_setup import FamilySetup

log = logging.getLogger(__name__)  # warnings; the command line shows them


def warn_cut(setup: FamilySetup, max_length: int) -> None:
    """One line, where any example is cut: how many of each split the pipelines cut to
    the model's `max_length` tokens (the held-out ones too: the validation loss and the
    test scores read them cut)."""
    counts = {split: setup.longer_than(max_length, split) for split in SPLIT_NAMES}
    if any(counts.values()):
        train, valid, test = (
            f"{counts[split]} of {len(getattr(setup.task, split))} {name}"
            for split, name in SPLIT_NAMES.items()
        )
        log.warning(
            "%s, %s and %s examples are longer than the model's %d tokens and are cut to it "
            "(a preset with a larger max_length keeps them whole)",
            train,
            valid,
            test,
            max_length,
        )


def warn_training_file_reused(config: TrainConfig) -> None:
    """One line when `--valid` or `--test` holds the training file's very contents: its
    scores would say what the model memorised, not how it does on text it has not seen."""
    digests = data_digests(config.data, config.valid, config.test)
    for name in ("valid", "test"):
        if "data" in digests and digests.get(name) == digests["data"]:
            log.warning(
                "--%s %s holds the same contents as --data: the %s scores will measure "
                "what the model memorised, not how it does on unseen text",
                name,
                getattr(config, name),
                "validation" if name == "valid" else "test",
            )


UNKNOWN_SHARE = 0.01  # of the training tokens: past it, `warn_unknown` says so
UNKNOWN_SAMPLE = 2000  # training examples read for it


def warn_unknown(setup: FamilySetup, init: str) -> None:
    """One line when more than `UNKNOWN_SHARE` of the training text's tokens (the first
    `UNKNOWN_SAMPLE` examples') are unknown to the tokenizer that `--init` brings: a model
    pretrained on other text (another script or language) sees them all as one `<unk>`."""
    unknown, total = setup.unknown_tokens(UNKNOWN_SAMPLE)
    if unknown > UNKNOWN_SHARE * total:
        log.warning(
            "%.1f%% of the training text's tokens (%d of %d) are unknown to the tokenizer "
            "of --init %s: the model reads each as the one <unk> token (was it pretrained "
            "on another language or script?)",
            100 * unknown / total,
            unknown,
            total,
            init,
        )
