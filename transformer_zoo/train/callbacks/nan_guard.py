"""Stop at the first non-finite loss, with a message that says what to do."""

from __future__ import annotations

import math

import keras


class NaNLossError(RuntimeError):
    """Training stopped because the loss became NaN or infinite."""


class NaNGuard(keras.callbacks.Callback):
    """Like `keras.callbacks.TerminateOnNaN`, but raises `NaNLossError` naming the epoch,
    the batch and the last good checkpoint.

    It raises instead of setting `stop_training`: a graceful stop would still run the
    epoch's end, where `Checkpoint` and `Backup` would overwrite the
    last good checkpoint and backup with NaN weights. Raising skips them, so both keep
    the state of the last finished epoch.

    Args:
        checkpoint: the path of the last-epoch checkpoint, named in the message.
        out: the run directory, named in the message: a rerun with other settings (the
            advice) needs a new `--out`, since the run directory refuses them.

    Example:
    >>> guard = NaNGuard("runs/x/checkpoints/last.keras")
    >>> guard.on_train_batch_end(0, {"loss": 0.5})  # a finite loss passes
    """

    def __init__(self, checkpoint: str | None = None, out: str | None = None):
        super().__init__()
        self.checkpoint, self.out = checkpoint, out
        self.epoch = 0
        self.last_good_epoch: int | None = None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self.last_good_epoch = epoch + 1

    def on_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)):
            return
        if self.checkpoint and self.last_good_epoch is not None:
            kept = f"the last good checkpoint is {self.checkpoint} (epoch {self.last_good_epoch})"
        elif self.checkpoint:
            kept = "no epoch finished, so there is no good checkpoint"
        else:
            kept = "no checkpoint was configured"
        raise NaNLossError(
            f"the training loss became {float(loss)} in epoch {self.epoch + 1} (batch "
            f"{batch + 1}); training stopped and {kept}. Rerun with a lower learning rate, "
            "more warmup, or --precision float32, and a new --out (or remove "
            f"{self.out or 'the run directory'} first: a run directory refuses other settings)."
        )
