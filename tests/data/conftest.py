import pytest

from tests.data.corpus_helpers import write_lines


@pytest.fixture(scope="package")
def corpus_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_lines(folder / "a.txt", 600, seed=1)
    write_lines(folder / "b.txt", 600, seed=2)
    return folder


@pytest.fixture(scope="package")
def vocabulary(corpus_dir):
    from keras_gmlp.data import corpus
    from keras_gmlp.data import vocabulary

    records = corpus.TextCorpus(files=str(corpus_dir / "*.txt"))
    return vocabulary.train_vocabulary(records.records("train"), 120)


@pytest.fixture(scope="package")
def tokenizer(vocabulary):
    from keras_gmlp.data.vocabulary import make_tokenizer

    return make_tokenizer(vocabulary)
