"""Visible checks for data.py: a CSV file read into (features, label) samples, and loaders for training
and for evaluation."""

import contextlib

import pytest
import torch

from torchgrade.engine.differential import CheckFailed


@contextlib.contextmanager
def hint(text):
    """On a plain failure, add what the contract asks (and what the input was) to the message."""
    try:
        yield
    except CheckFailed as e:
        if type(e) is not CheckFailed or "not implemented yet" in str(e):  # a forbidden call keeps its type
            raise
        raise CheckFailed(f"{e}\nhint: {text}") from None


def csv_text(check, seed, rows, features, *, newline="\n", ending="\n", whole=False, classes=3):
    """A CSV file's text: a header row, then `rows` rows of `features` numbers (multiples of 1/8, or whole
    numbers) and an integer label below `classes`, lines joined by `newline`, the last followed by `ending`."""
    g = check.random(seed)
    x = torch.randint(-40, 40, (rows, features), generator=g)
    x = (x if whole else x / 8).tolist()
    y = torch.randint(0, classes, (rows,), generator=g).tolist()
    lines = [",".join([f"x{i + 1}" for i in range(features)] + ["label"])]
    lines += [",".join([f"{v:g}" for v in row] + [str(label)]) for row, label in zip(x, y)]
    return newline.join(lines) + ending


@pytest.mark.target("CSVDataset")
def test_counts_the_data_rows_not_the_header_or_the_final_newline(check):
    text = csv_text(check, 1, rows=5, features=3)
    with hint(f"len(ds) is the number of data rows: the header row is not a sample, and the newline that ends the "
              f"last line starts no new row.\ndata.csv held {text!r}"):
        check("data.csv", probe="csv_dataset", options={"content": text})


@pytest.mark.target("CSVDataset")
def test_returns_float32_features_and_an_int64_scalar_label(check):
    text = csv_text(check, 2, rows=4, features=3)
    with hint("ds[i] is (features, label): features a float32 tensor of shape (n_features,) from every column "
              "but the last, label an int64 tensor of shape () (torch.tensor(2), not torch.tensor([2])) from the "
              f"last column; the header row is skipped, so ds[0] is the first data row.\ndata.csv held {text!r}"):
        check("data.csv", probe="csv_dataset", options={"content": text, "indices": list(range(4)), "length": False})


@pytest.mark.target("CSVDataset")
def test_applies_transform_to_features_and_target_transform_to_labels(check):
    text = csv_text(check, 3, rows=3, features=2)
    with hint("transform(features) and target_transform(label) are what ds[i] returns when they are given "
              "(here transform=lambda x: x * 2, target_transform=lambda y: y + 10).\n"
              f"data.csv held {text!r}"):
        check("data.csv", probe="csv_dataset", kwargs={"transform": "double", "target_transform": "add_ten"},
              options={"content": text, "indices": [0, 1, 2], "length": False})


@pytest.mark.target("CSVDataset")
def test_is_a_torch_dataset(check):
    text = csv_text(check, 4, rows=2, features=2)
    with hint("CSVDataset subclasses torch.utils.data.Dataset."):
        check("data.csv", probe="csv_dataset", options={"content": text, "kind": True, "length": False})


@pytest.mark.target("make_loader")
def test_returns_a_dataloader(check):
    with hint("make_loader returns a torch.utils.data.DataLoader over the dataset."):
        check(torch.arange(10), 4, False, probe="loader", options={"iterate": False})


@pytest.mark.target("make_loader")
def test_reads_in_order_and_keeps_the_last_partial_batch_for_evaluation(check):
    with hint("With train=False the loader reads the dataset in order (no shuffling) and keeps the last, smaller "
              "batch (drop_last=False). The dataset is a TensorDataset over the numbers shown."):
        check(torch.arange(10), 4, False, probe="loader", options={"exact": True})


@pytest.mark.target("make_loader")
def test_drops_the_last_partial_batch_when_training(check):
    check.random(5)
    with hint("With train=True every batch holds exactly batch_size samples: the last, incomplete one is dropped "
              "(drop_last=True). The dataset is a TensorDataset over the numbers shown."):
        check(torch.arange(10), 4, True, probe="loader", options={"seed": 5, "keep": ("batch sizes",)})


@pytest.mark.target("make_loader")
def test_shuffles_when_training(check):
    check.random(6)
    with hint("With train=True the loader shuffles (shuffle=True): the samples come in a random order, each at "
              "most once. The dataset is a TensorDataset over the numbers 0..19."):
        check(torch.arange(20), 5, True, probe="loader",
              options={"seed": 6, "keep": ("samples in dataset order", "every sample at most once")})


# --- what each stub's docstring promises, one claim per check --------------------------------------

@pytest.mark.target("CSVDataset")
def test_ignores_blank_lines_wherever_they_are(check):
    text = "\n" + csv_text(check, 7, rows=4, features=2).replace("\n", "\n\n", 2) + "\n\n"
    with hint(f"blank lines are not rows, wherever they are (before the header, between rows, at the end).\n"
              f"data.csv held {text!r}"):
        check("data.csv", probe="csv_dataset", options={"content": text, "indices": list(range(4))})


@pytest.mark.target("CSVDataset")
def test_is_empty_for_a_file_holding_only_its_header(check):
    with hint("a file holding only its header row has no samples: len(ds) is 0."):
        check("data.csv", probe="csv_dataset", options={"content": "x1,x2,label\n"})


@pytest.mark.target("CSVDataset")
def test_indexes_like_a_list_from_the_end_and_raises_index_error_past_it(check):
    text = csv_text(check, 8, rows=3, features=2)
    with hint(f"ds[i] follows a Python list: ds[-1] is the last row, and ds[3] of 3 rows raises IndexError (which "
              f"ends `for x in ds`).\ndata.csv held {text!r}"):
        check("data.csv", probe="csv_dataset", options={"content": text, "indices": [-1, -3, 3, -4], "length": False})


#: Files with a malformed data row (line 3), each of which must raise ValueError.
MALFORMED = {
    "a-row-with-a-missing-column": "x1,x2,label\n1,2,0\n3,1\n",
    "a-feature-that-is-not-a-number": "x1,x2,label\n1,2,0\n3,abc,1\n",
    "a-label-that-is-not-an-integer": "x1,x2,label\n1,2,0\n3,4,1.5\n",
}


@pytest.mark.target("CSVDataset")
@pytest.mark.parametrize("case", MALFORMED)
def test_raises_value_error_for_a_malformed_row(check, case):
    text = MALFORMED[case]
    with hint(f"a row whose column count differs from the header's, a feature that is not a float or a label that "
              f"is not an int raises ValueError naming the line.\ndata.csv held {text!r}"):
        check("data.csv", probe="csv_dataset", options={"content": text, "read_all": True})


@pytest.mark.target("make_loader")
def test_draws_a_new_order_every_epoch_when_training(check):
    check.random(7)
    with hint("With train=True every epoch (every new iteration over the loader) is shuffled again."):
        check(torch.arange(16), 4, True, probe="loader",
              options={"seed": 7, "epochs": 2, "keep": ("every epoch in the same order",)})


@pytest.mark.target("make_loader")
def test_passes_batch_size_and_num_workers_on_unchanged(check):
    with hint("batch_size and num_workers are passed on to the DataLoader unchanged."):
        check(torch.arange(7), 3, False, kwargs={"num_workers": 1}, probe="loader",
              options={"iterate": False, "workers": True})
        check(torch.arange(7), 3, False, probe="loader", options={"workers": True, "keep": ("batch sizes",
                                                                                            "num_workers")})
