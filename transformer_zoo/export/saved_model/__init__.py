"""SavedModel export: the step graphs as signatures, plus in-graph greedy decoding
(`in_graph_greedy`) and a masked LM's `masked_lm`, for TensorFlow Serving and
`saved_model_cli`; each checked against the Keras model at export (`signature_checks`)."""
