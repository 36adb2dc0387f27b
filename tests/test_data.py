"""The data.py checks: the reference scores full marks, the stubs zero, another correct implementation full
marks, and each realistic mistake loses its own points, with a message that says what went wrong."""

import pytest

from torchgrade.engine.grading import grade_submission

from conftest import ROOT, failures, lost_targets


@pytest.mark.parametrize("base, expected", [("reference", "full"), ("exercises", "zero")])
def test_reference_scores_full_marks_and_the_stubs_zero(assignment, base, expected):
    g = grade_submission(ROOT / base, assignment, device="cpu", only=("data",))
    assert g.max_score == pytest.approx(assignment.exercise("data").points)
    assert g.score == (g.max_score if expected == "full" else 0), [(t.name, t.output) for t in g.tests
                                                                   if t.status != "passed"][:3]
    if expected == "zero":
        assert all("not implemented yet" in t.output for t in g.tests)


def test_float64_features_lose_csvdataset_points(grade):
    g = grade(only=("data",), replace={"data": [("x = torch.tensor(features, dtype=torch.float32)",
                                                 "x = torch.tensor(features, dtype=torch.float64)")]})
    assert lost_targets(g) == {"data.CSVDataset"}
    message = failures(g, "data.CSVDataset")[0]
    assert "['ds[0]'][0] has the wrong dtype: expected torch.float32, got torch.float64" in message
    assert "called: CSVDataset('data.csv') [inputs from seed 2]" in message
    assert "parse features with float() and the label with int()" in message
    assert "data.csv held 'x1,x2,x3,label\\n" in message


def test_a_label_of_shape_1_loses_csvdataset_points(grade):
    g = grade(only=("data",), replace={"data": [("y = torch.tensor(label, dtype=torch.int64)",
                                                 "y = torch.tensor([label], dtype=torch.int64)")]})
    assert lost_targets(g) == {"data.CSVDataset"}
    message = failures(g, "data.CSVDataset")[0]
    assert "['ds[0]'][1] has the wrong shape: expected (), got (1,)" in message
    assert "not torch.tensor([2])" in message


def test_a_lost_first_data_row_loses_csvdataset_points(grade):
    g = grade(only=("data",), replace={"data": [("return len(self._rows)", "return len(self._rows) - 1"),
                                                ("features, label = self._rows[index]",
                                                 "features, label = self._rows[1:][index]")]})
    assert lost_targets(g) == {"data.CSVDataset"}
    messages = failures(g, "data.CSVDataset")
    assert any("['len(ds)']: expected 5, got 4" in m and "the header row is not a sample" in m for m in messages)
    assert any("['ds[0]'][0]: 3 of 3 elements differ" in m and "ds[0] is the first data row" in m for m in messages)


def test_a_header_read_as_data_loses_csvdataset_points(grade):
    g = grade(only=("data",), replace={"data": [("n_columns = len(row)  # the header: remember its width, skip it\n"
                                                 "                    continue",
                                                 "n_columns = len(row)")]})
    assert lost_targets(g) == {"data.CSVDataset"}
    message = failures(g, "data.CSVDataset")[0]
    assert "your code raised ValueError: " in message and "could not convert string to float: 'x1'" in message
    assert "the header row is not a sample" in message


def test_a_final_newline_counted_as_a_row_loses_csvdataset_points(grade):
    g = grade(only=("data",), append={"data": """
        _ReferenceDataset = CSVDataset

        class CSVDataset(_ReferenceDataset):
            def __init__(self, path, transform=None, target_transform=None):
                super().__init__(path, transform, target_transform)
                with open(path) as f:
                    self._lines = f.read().split("\\n")[1:]  # the last line's newline leaves a "" behind

            def __len__(self):
                return len(self._lines)
    """})
    assert lost_targets(g) == {"data.CSVDataset"}
    message = failures(g, "data.CSVDataset")[0]
    assert "['len(ds)']: expected 5, got 6" in message
    assert "the newline that ends the last line starts no new row" in message


def test_transforms_that_are_not_applied_lose_csvdataset_points(grade):
    g = grade(only=("data",), replace={"data": [("            y = self.target_transform(y)\n", "            pass\n")]})
    assert lost_targets(g) == {"data.CSVDataset"}
    message = failures(g, "data.CSVDataset")[0]
    assert "CSVDataset('data.csv', transform='double', target_transform='add_ten')" in message
    assert "['ds[0]'][1]: 1 of 1 elements differ" in message and "expected 10, got 0" in message
    assert "target_transform(label)" in message


def test_a_training_loader_that_does_not_shuffle_loses_make_loader_points(grade):
    g = grade(only=("data",), replace={"data": [("shuffle=train,", "shuffle=False,")]})
    assert lost_targets(g) == {"data.make_loader"}
    messages = failures(g, "data.make_loader")
    assert any("['epoch 1: samples in dataset order']: expected False, got True" in m
               and "[inputs from seed 6]" in m and "shuffles (shuffle=True)" in m for m in messages)
    assert any("['every epoch in the same order']: expected False, got True" in m for m in messages)


def test_a_training_loader_that_keeps_the_last_batch_loses_make_loader_points(grade):
    g = grade(only=("data",), replace={"data": [("drop_last=train,", "drop_last=False,")]})
    assert lost_targets(g) == {"data.make_loader"}
    message = failures(g, "data.make_loader")[0]
    assert "make_loader(int64 tensor of shape (10,)" in message and ", 4, True)" in message
    assert "['epoch 1: batch sizes']: expected 2 items [4, 4], got 3 [4, 4, 2]" in message
    assert "drop_last=True" in message


def test_a_loader_that_shuffles_for_evaluation_too_loses_make_loader_points(grade):
    g = grade(only=("data",), replace={"data": [("shuffle=train,", "shuffle=True,")]})
    assert lost_targets(g) == {"data.make_loader"}
    message = failures(g, "data.make_loader")[0]
    assert "['epoch 1: batches'][0]: expected [0, 1, 2, 3], got" in message and "in order (no shuffling)" in message


def test_another_correct_implementation_scores_full_marks(grade):
    """Fairness: lines split by hand and parsed lazily, explicit samplers instead of shuffle/drop_last."""
    g = grade(only=("data",), append={"data": """
        from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

        class CSVDataset(Dataset):
            def __init__(self, path, transform=None, target_transform=None):
                with open(path) as f:
                    lines = [line.strip() for line in f if line.strip()]
                self.lines, self.transform, self.target_transform = lines[1:], transform, target_transform
                self.width = len(lines[0].split(","))

            def __len__(self):
                return len(self.lines)

            def __getitem__(self, i):
                *features, label = self.lines[i].split(",")
                if len(features) + 1 != self.width:  # checked when the row is read
                    raise ValueError(f"row {i}: {len(features) + 1} columns, the header has {self.width}")
                x = torch.as_tensor([float(v) for v in features]).float()
                y = torch.as_tensor(int(label))
                return (self.transform(x) if self.transform else x,
                        self.target_transform(y) if self.target_transform else y)

        def make_loader(dataset, batch_size, train, num_workers=0):
            sampler = RandomSampler(dataset) if train else SequentialSampler(dataset)
            return DataLoader(dataset, batch_sampler=BatchSampler(sampler, batch_size, drop_last=train),
                              num_workers=num_workers)
    """})
    assert g.score == g.max_score, [(t.name, t.output) for t in g.tests if t.status != "passed"][:3]
