"""Hidden checks for data.py: unusual CSV files (one column, CRLF, blank or missing final lines, no rows)
and loader edge cases."""

import pytest
import torch

from graders.checks.visible.test_data import csv_text, hint


# case -> (arguments for csv_text, the file in words). Each file is read whole: its length and every sample.
FILES = {
    "one-feature-column": ({"rows": 4, "features": 1}, "a file with a single feature column: features have shape (1,)"),
    "crlf-and-blank-lines-at-the-end": ({"rows": 5, "features": 2, "newline": "\r\n", "ending": "\r\n\r\n\r\n"},
                                        "a file with Windows line endings (\\r\\n) and blank lines at the end"),
    "no-final-newline": ({"rows": 3, "features": 4, "ending": ""}, "a file whose last line has no newline"),
    "whole-number-features": ({"rows": 6, "features": 3, "whole": True}, "a file whose features are "
                              "written as whole numbers (they are still float32)"),
    "many-rows-and-classes": ({"rows": 60, "features": 8, "classes": 12}, "a file with 60 rows, 8 features and "
                              "labels up to 11"),
}


@pytest.mark.target("CSVDataset")
@pytest.mark.parametrize("case", FILES)
def test_reads_every_row_of_unusual_files(check, case):
    arguments, words = FILES[case]
    text = csv_text(check, 10 + list(FILES).index(case), **arguments)
    rows = arguments["rows"]
    with hint(f"len(ds) counts the data rows only, and ds[i] is (float32 features of shape (n_features,), int64 "
              f"label of shape ()). The file: {words}."):
        check("data.csv", probe="csv_dataset", options={"content": text, "indices": list(range(rows))})


@pytest.mark.target("CSVDataset")
def test_a_file_with_only_a_header_has_no_samples(check):
    with hint("On a file holding only its header row: len(ds) is 0."):
        check("data.csv", probe="csv_dataset", options={"content": "a,b,label\n"})


@pytest.mark.target("CSVDataset")
def test_transforms_receive_the_float32_features_and_the_int64_label(check):
    text = csv_text(check, 20, rows=3, features=5)
    with hint("transform is given the features as a float32 tensor of shape (n_features,), and target_transform "
              "the label as an int64 tensor of shape (); what they return is what ds[i] holds."):
        check("data.csv", probe="csv_dataset", kwargs={"transform": "received", "target_transform": "received"},
              options={"content": text, "indices": [0, 2], "length": False})
        check("data.csv", probe="csv_dataset", kwargs={"transform": "negate", "target_transform": "one_hot_4"},
              options={"content": text, "indices": [0, 1, 2], "length": False})


@pytest.mark.target("CSVDataset")
def test_only_one_transform_may_be_given(check):
    text = csv_text(check, 21, rows=2, features=2)
    with hint("transform and target_transform are independent: either may be given alone."):
        check("data.csv", probe="csv_dataset", kwargs={"target_transform": "add_ten"},
              options={"content": text, "indices": [0, 1], "length": False})
        check("data.csv", probe="csv_dataset", kwargs={"transform": "double"},
              options={"content": text, "indices": [0, 1], "length": False})


@pytest.mark.target("CSVDataset")
def test_batches_from_a_dataloader_stack_into_features_and_labels(check):
    text = csv_text(check, 22, rows=7, features=3)
    with hint("Through a DataLoader with batch_size=3, a batch is (float32 features of shape (B, 3), int64 labels "
              "of shape (B,)): it needs each label to be a 0-dim int64 tensor."):
        check("data.csv", probe="csv_batches", options={"content": text, "batch_size": 3})


@pytest.mark.target("make_loader")
def test_reshuffles_every_epoch(check):
    check.random(30)
    with hint("With train=True every epoch (every new iteration over the loader) draws a new order, as "
              "shuffle=True does."):
        check(torch.arange(20), 5, True, probe="loader",
              options={"seed": 30, "epochs": 3, "keep": ("every epoch in the same order",)})


@pytest.mark.target("make_loader")
@pytest.mark.parametrize("size, batch_size", [(12, 4), (5, 8), (3, 1)], ids=["batches-fit-exactly",
                                                                             "batch-larger-than-dataset",
                                                                             "batch-size-one"])
def test_evaluation_batches_cover_every_sample_in_order(check, size, batch_size):
    with hint(f"With train=False, {size} samples in batches of {batch_size}: in order, nothing dropped."):
        check(torch.arange(size), batch_size, False, probe="loader", options={"exact": True, "epochs": 2})


@pytest.mark.target("make_loader")
@pytest.mark.parametrize("size, batch_size", [(12, 4), (5, 8)],
                         ids=["batches-fit-exactly", "batch-larger-than-dataset"])
def test_training_batches_are_all_full(check, size, batch_size):
    check.random(31)
    with hint(f"With train=True, {size} samples in batches of {batch_size}: only full batches (drop_last=True)."):
        check(torch.arange(size), batch_size, True, probe="loader",
              options={"seed": 31, "keep": ("batch sizes", "every sample at most once")})


@pytest.mark.target("make_loader")
def test_passes_num_workers_on(check):
    with hint("num_workers is passed on to the DataLoader unchanged."):
        check(torch.arange(10), 4, True, kwargs={"num_workers": 2}, probe="loader",
              options={"iterate": False, "workers": True})
