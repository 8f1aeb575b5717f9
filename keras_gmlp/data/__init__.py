"""tf.data input pipelines (import explicitly: these import TensorFlow).

Images: `image_sources` (digits, CIFAR files, folders, TFRecords, tfds:
`load_images(name, data_dir)`), `images` (the batching pipeline:
`batches(...)`), `augment` (the augmentation).
Text: `corpus` (streaming and the held-out split: `TextCorpus`),
`vocabulary` (WordPiece: `train_vocabulary`, `make_tokenizer`),
`lm_batches` (packing, masking, next-token batches, the unigram baseline),
`labelled_text` (classification rows from CSV/TSV or tfds, and batches).
"""
