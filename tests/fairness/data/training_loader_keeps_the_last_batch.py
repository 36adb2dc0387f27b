# expect: loses {"make_loader": ["test_drops_the_last_partial_batch_when_training", "test_training_batches_are_all_full[batch-larger-than-dataset]"]}
# message: expected 2 items [4, 4], got 3 [4, 4, 2]
"""A training loader that shuffles but keeps the last, smaller batch (drop_last left False)."""


def make_loader(dataset, batch_size, train, num_workers=0):
    return DataLoader(dataset, batch_size=batch_size, shuffle=train, num_workers=num_workers)
