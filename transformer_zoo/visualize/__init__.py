"""Pictures: training curves (`curves`), attention heatmaps and the causal mask (`plots`,
`attention`). matplotlib, no TensorFlow, except `attention`, which runs the model."""
