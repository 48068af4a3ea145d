"""The callbacks of a training run: checkpoints and the crash backup written atomically, a
NaN guard, a time budget and the cosine rate that ends with it, the task's validation score."""
