# expect: loses {"ddp_train_step": ["test_returns_the_mean_loss_of_the_whole_batch_on_every_rank"]}
# message: whether every rank returned the same loss
"""ddp_train_step that trains right but returns its own rank's loss instead of the mean over ranks."""


def ddp_train_step(model, batch, loss_fn, optimizer):
    inputs, targets = shard(batch, dist.get_rank(), dist.get_world_size())
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    average_gradients(model)
    optimizer.step()
    return loss.item()
