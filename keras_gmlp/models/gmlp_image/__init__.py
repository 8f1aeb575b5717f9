"""gMLP image models: the backbone, the classifier, its preprocessor and
image converter, the builder, and the spatial-weight resampling."""
