"""The training callbacks on a small Dense model: atomic checkpoints and backups, the NaN
guard, the time budget and the budgeted cosine schedule."""

import json
import math
import os

import keras
import numpy as np
import pytest

from transformer_zoo.train.callbacks.backup import (
    Backup,
    backup_epoch,
    remove_backup,
    restore_backup,
)
from transformer_zoo.train.callbacks.budget import Budget
from transformer_zoo.train.callbacks.budgeted_cosine_decay import BudgetedCosineDecay
from transformer_zoo.train.callbacks.checkpoint import Checkpoint
from transformer_zoo.train.callbacks.nan_guard import NaNGuard, NaNLossError

X = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
Y = X @ np.arange(1.0, 5.0, dtype="float32")[:, None]


def _model(learning_rate=0.01):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(learning_rate), "mse")
    return model


class _FailingSave(keras.callbacks.Callback):
    """Makes `model.save` write half a file and die, as a process killed mid-write would."""

    def __init__(self, at_epoch):
        super().__init__()
        self.at_epoch = at_epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch != self.at_epoch:
            return

        def broken_save(filepath, *args, **kwargs):
            with open(filepath, "wb") as file:
                file.write(b"PK\x03\x04 half a zip")
            raise OSError("disk full")

        self.model.save = broken_save
        self.model.save_weights = broken_save


def test_checkpoint_interrupted_mid_write_keeps_the_previous_whole_file(tmp_path):
    path = tmp_path / "last.keras"
    model = _model()
    model.fit(X, Y, epochs=1, verbose=0, callbacks=[Checkpoint(path)])
    before = [w.copy() for w in keras.saving.load_model(path).get_weights()]
    with pytest.raises(OSError, match="disk full"):
        model.fit(X, Y, epochs=2, verbose=0, callbacks=[_FailingSave(0), Checkpoint(path)])
    # Keras' own ModelCheckpoint would have left the half-written file at `path`.
    for old, new in zip(before, keras.saving.load_model(path).get_weights(), strict=True):
        np.testing.assert_array_equal(old, new)


def test_checkpoint_renames_the_finished_file_and_removes_stale_partials(tmp_path):
    (tmp_path / ".partial-left-by-a-kill").mkdir()
    (tmp_path / ".partial-left-by-a-kill" / "best.keras").write_bytes(b"half a file")
    callback = Checkpoint(tmp_path / "best.keras", monitor="loss")
    _model().fit(X, Y, epochs=2, verbose=0, callbacks=[callback])
    assert sorted(os.listdir(tmp_path)) == ["best.keras"]
    keras.saving.load_model(tmp_path / "best.keras")


def test_checkpoint_with_a_monitor_keeps_the_lowest_value_only(tmp_path):
    callback = Checkpoint(tmp_path / "best.keras", monitor="loss", initial_value_threshold=0.5)
    callback.set_model(_model())
    callback.on_epoch_end(0, {"loss": 0.7})
    assert not (tmp_path / "best.keras").exists()  # not better than the resumed run's best
    callback.on_epoch_end(1, {"loss": 0.4})
    assert (tmp_path / "best.keras").exists() and callback.best == 0.4


def test_checkpoint_with_an_epoch_placeholder_writes_one_file_per_epoch(tmp_path):
    callback = Checkpoint(tmp_path / "model-{epoch:02d}.keras")
    _model().fit(X, Y, epochs=2, verbose=0, callbacks=[callback])
    assert sorted(os.listdir(tmp_path)) == ["model-01.keras", "model-02.keras"]


def test_backup_interrupted_mid_write_keeps_the_previous_backup(tmp_path):
    backup = tmp_path / "backup"
    model = _model()
    with pytest.raises(OSError, match="disk full"):
        model.fit(
            X,
            Y,
            epochs=3,
            verbose=0,
            callbacks=[_FailingSave(1), Backup(backup)],
        )
    assert backup_epoch(backup) == 1  # the backup of epoch 1, whole
    resumed = _model()
    initial_epoch = restore_backup(backup, resumed)
    history = resumed.fit(
        X, Y, epochs=3, initial_epoch=initial_epoch, verbose=0, callbacks=[Backup(backup)]
    )
    assert len(history.history["loss"]) == 2  # epochs 2 and 3 only
    # Kept after `fit` (a Ctrl-C before the model is saved resumes from it) until the
    # run removes it.
    assert backup_epoch(backup) == 3
    remove_backup(backup)
    assert not backup.exists()


def test_ctrl_c_while_a_backup_is_written_leaves_a_backup_of_one_epoch(tmp_path):
    """Ctrl-C during epoch 2's `save_weights` was deferred to the end of the weights file
    only: the metadata still said epoch 1 beside epoch 2's weights, and the rerun trained
    an epoch twice."""
    import signal

    backup = tmp_path / "backup"
    model = _model()
    save_weights, saved = model.save_weights, []

    def interrupted_save(path, *args, **kwargs):
        saved.append(path)
        if len(saved) == 2:  # the backup of epoch 2
            signal.raise_signal(signal.SIGINT)
        return save_weights(path, *args, **kwargs)

    model.save_weights = interrupted_save
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(X, Y, epochs=4, batch_size=16, verbose=0, callbacks=[Backup(backup)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert backup_epoch(backup) == 2
    restored = _model()
    restore_backup(backup, restored)
    assert int(restored.optimizer.iterations) == int(model.optimizer.iterations) == 8


def test_backup_restores_the_weights_and_the_optimizer_step(tmp_path):
    backup = tmp_path / "backup"

    class Stop(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                raise RuntimeError("crash")

    model = _model()
    with pytest.raises(RuntimeError):
        model.fit(
            X,
            Y,
            epochs=4,
            batch_size=16,
            verbose=0,
            callbacks=[Backup(backup), Stop()],
        )
    weights, steps = model.get_weights(), int(model.optimizer.iterations)
    assert steps == 8 and json.loads((backup / "training_metadata.json").read_text())["epoch"] == 2

    restored = _model()
    assert restore_backup(backup, restored) == 2
    for a, b in zip(weights, restored.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(restored.optimizer.iterations) == steps


class _Poison(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if self.params and getattr(self, "epoch", 0) == 1 and batch == 1:
            kernel = self.model.trainable_variables[0]
            kernel.assign(np.full(kernel.shape, np.nan, "float32"))

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch


def test_nan_guard_stops_with_a_clear_message_and_keeps_the_last_good_checkpoint(tmp_path):
    last = tmp_path / "last.keras"
    model = _model()
    callbacks = [_Poison(), NaNGuard(str(last)), Checkpoint(last)]
    with pytest.raises(NaNLossError) as error:
        model.fit(X, Y, epochs=3, batch_size=16, verbose=0, callbacks=callbacks)
    message = str(error.value)
    assert "epoch 2 (batch 2)" in message and f"{last} (epoch 1)" in message
    assert "\n" not in message
    kept = keras.saving.load_model(last)
    assert all(np.isfinite(w).all() for w in kept.get_weights())


def test_nan_guard_says_the_rerun_with_other_settings_needs_a_new_out(tmp_path):
    """The advice (a lower rate, float32) changes the run's settings, which its run
    directory refuses: the message said nothing of that."""
    from transformer_zoo.train.callbacks.run_callbacks import run_callbacks

    out = tmp_path / "run"
    (guard,) = (c for c in run_callbacks(str(out)) if isinstance(c, NaNGuard))
    with pytest.raises(NaNLossError) as error:
        guard.on_batch_end(0, {"loss": float("nan")})
    message = str(error.value)
    assert "Rerun with a lower learning rate, more warmup, or --precision float32" in message
    assert message.endswith(
        f"and a new --out (or remove {out} first: a run directory refuses other settings)."
    )


def test_nan_guard_lets_finite_losses_pass():
    history = _model().fit(X, Y, epochs=2, verbose=0, callbacks=[NaNGuard()])
    assert len(history.history["loss"]) == 2


def test_time_budget_stops_within_the_epoch():
    budget = Budget(seconds=1e-6)
    history = _model().fit(X, Y, epochs=5, batch_size=8, verbose=0, callbacks=[budget])
    assert budget.stopped_by == "time_budget" and len(history.history["loss"]) == 1


def test_step_budget_stops_at_its_step_within_an_epoch():
    model = _model()
    budget = Budget(steps=3)
    history = model.fit(X, Y, epochs=5, batch_size=4, verbose=0, callbacks=[budget])
    assert budget.stopped_by == "steps" and len(history.history["loss"]) == 1
    assert int(model.optimizer.iterations.numpy()) == 3


def test_budgeted_cosine_without_budget_follows_keras_cosine_decay_after_warmup():
    schedule = BudgetedCosineDecay(2e-3, total_steps=1000, warmup_steps=100)
    keras_schedule = keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=900, warmup_target=2e-3, warmup_steps=100
    )
    for step in (100, 250, 550, 900, 999, 1000, 2000):
        assert schedule.rate(step, elapsed=1e9) == pytest.approx(
            float(keras_schedule(step)), rel=1e-5, abs=1e-9
        )
    assert schedule.rate(0, 0.0) == pytest.approx(2e-3 / 100)
    assert schedule.rate(99, 0.0) == pytest.approx(2e-3)


def _budgeted_cosine(peak, total, warmup, seconds, step, elapsed):
    """The schedule's formula in numpy: a warmup over steps scaled by the time progress's
    cosine, then the cosine of the step or time progress, whichever is further along."""
    step = np.asarray(step, float)
    clock = np.asarray(elapsed, float) / seconds

    def decay(progress):
        return 0.5 * (1.0 + np.cos(np.pi * np.minimum(progress, 1.0)))

    warming = peak * (step + 1) / warmup * decay(clock)
    after = peak * decay(np.maximum((step - warmup) / (total - warmup), clock))
    return np.where(step < warmup, warming, after)


def test_budgeted_cosine_follows_the_clock_through_warmup_and_decay():
    """A budget that ended within the warmup left the rate at 61% of its peak: the warmup
    counted steps only."""
    schedule = BudgetedCosineDecay(1e-3, total_steps=1000, warmup_steps=100, seconds=10.0)
    steps, elapsed = np.meshgrid([0, 30, 70, 99, 100, 400, 999], [0.0, 0.5, 0.9, 3.0, 7.0, 10.0])
    expected = _budgeted_cosine(1e-3, 1000, 100, 10.0, steps, elapsed)
    actual = np.vectorize(schedule.rate)(steps, elapsed)
    np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-15)
    assert schedule.rate(70, elapsed=10.0) == pytest.approx(0.0, abs=1e-12)  # in the warmup
    # Compilation (a third of the budget here) lowers the warmup's rate, never skips it.
    assert schedule.rate(10, elapsed=10 / 3) == pytest.approx(1e-3 * 11 / 100 * 0.75)


def test_budgeted_cosine_reaches_its_floor_when_the_budget_ends():
    schedule = BudgetedCosineDecay(1e-3, total_steps=1000, warmup_steps=10, seconds=100.0)
    half = _budgeted_cosine(1e-3, 1000, 10, 100.0, 200, 50.0)  # time leads: half way down
    assert schedule.rate(200, elapsed=50.0) == pytest.approx(float(half))
    assert schedule.rate(200, elapsed=100.0) == pytest.approx(0.0, abs=1e-12)
    step_led = 0.5e-3 * (1 + math.cos(math.pi * 590 / 990))
    assert schedule.rate(600, elapsed=1.0) == pytest.approx(step_led)  # steps lead


def test_budgeted_cosine_sets_the_optimizer_rate_during_fit():
    schedule = BudgetedCosineDecay(0.05, total_steps=8, warmup_steps=2)
    model = _model()
    model.fit(X, Y, epochs=2, batch_size=16, verbose=0, callbacks=[schedule])
    assert float(model.optimizer.learning_rate) == pytest.approx(schedule.rate(7, 0.0))


def test_a_backup_every_n_steps_counts_optimizer_steps_not_callback_calls(tmp_path):
    """With steps_per_execution 4, Keras calls back once per 4 steps: `--backup-every 3`
    backed up every 12 steps (30 for the CLI's 10 steps an execution)."""
    steps = []

    class Watch(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if os.path.isfile(tmp_path / "backup" / "latest.weights.h5"):
                mtime = os.stat(tmp_path / "backup" / "latest.weights.h5").st_mtime_ns
                if not steps or steps[-1][1] != mtime:
                    steps.append((int(self.model.optimizer.iterations), mtime))

    model = _model()
    model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=4)
    backup = Backup(tmp_path / "backup", save_freq=3)
    model.fit(X, Y, batch_size=4, epochs=1, verbose=0, callbacks=[backup, Watch()])
    # 16 steps in executions of 4: backed up at 4 (past 3), 8 (past 6) and 12; at 16 (past
    # 15), the epoch's last step, the epoch's end backs up after its validation, naming the
    # next epoch: a step backup there named the epoch whose training was done, and a rerun
    # killed in that validation trained an execution past the epoch's end (rlast's probe:
    # 20 steps of 18 planned, other val_loss).
    assert [step for step, _ in steps] == [4, 8, 12]
    metadata = json.loads((tmp_path / "backup" / "training_metadata.json").read_text())
    assert metadata["epoch"] == 1


def test_a_resumed_run_goes_on_with_the_rest_of_its_time_budget(tmp_path):
    """The clocks restarted at every `fit`: a run killed after its budget (while saving its
    model) trained a whole second budget, its rate schedule back at its peak."""
    model = _model()
    backup = Backup(tmp_path / "backup")
    backup.spent = 100.0  # the attempts before this one trained 100 s
    model.fit(X, Y, epochs=1, verbose=0, callbacks=[backup])
    seconds = json.loads((tmp_path / "backup" / "training_metadata.json").read_text())["seconds"]
    assert 100.0 <= seconds < 160.0

    schedule = BudgetedCosineDecay(1.0, total_steps=10_000, warmup_steps=0, seconds=200.0)
    schedule.spent = 100.0  # half the budget: the cosine is half way down, not at its top
    budget = Budget(seconds=100.0)
    budget.spent = 100.0  # all of it: the first batch ends training
    model = _model()
    model.compile(keras.optimizers.SGD(1.0), "mse")
    model.fit(X, Y, batch_size=64, epochs=3, verbose=0, callbacks=[schedule, budget])
    assert float(model.optimizer.learning_rate) == pytest.approx(0.5, abs=0.01)
    assert budget.stopped_by == "time_budget" and int(model.optimizer.iterations) == 1


def test_ctrl_c_while_keras_saves_stops_the_run_once_the_file_is_whole(tmp_path):
    """Keras' saving catches a KeyboardInterrupt with a bare `except` and goes on: a run
    interrupted while it saved a checkpoint trained on to its end."""
    import signal

    model = _model()
    real_save = model.save

    def save_swallowing_ctrl_c(filepath, *args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs before the next line
        except KeyboardInterrupt:
            pass  # as keras/src/saving/saving_lib.py does
        real_save(filepath, *args, **kwargs)

    model.save = save_swallowing_ctrl_c
    path = tmp_path / "last.keras"
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y, epochs=3, verbose=0, callbacks=[Checkpoint(path)])
    assert int(model.optimizer.iterations) == 2  # stopped after the first epoch's save
    keras.saving.load_model(path)  # and that file is whole
