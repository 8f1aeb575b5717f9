"""tf.data input pipelines (import explicitly: this imports TensorFlow).

`from keras_gmlp.data import images` for image classification:
`images.load_images(name, data_dir)` and `images.batches(...)`;
`keras_gmlp.data.augment` holds the augmentation.
"""
