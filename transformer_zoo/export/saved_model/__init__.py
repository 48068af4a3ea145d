"""SavedModel export: the step graphs as signatures, plus in-graph greedy decoding
(`in_graph_greedy`) for TensorFlow Serving and `saved_model_cli`."""
