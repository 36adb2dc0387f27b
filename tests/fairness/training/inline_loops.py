# expect: full marks
"""The notes' training loop written out inline: fit does not call train_step or evaluate, gradients
are set to None, accuracy is summed as floats, every generator seeded in one go."""


def set_seed(seed):
    import random as _random
    _random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
    try:
        import numpy
        numpy.random.seed(seed % (2 ** 32))
    except ImportError:
        pass


def train_step(model, batch, loss_fn, optimizer):
    model.train(True)
    for p in model.parameters():
        p.grad = None
    x, y = batch
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def evaluate(model, loader):
    model.train(False)
    hits, seen = 0.0, 0
    for x, y in loader:
        with torch.inference_mode():
            hits += float(torch.eq(model(x).argmax(1), y).float().sum())
        seen += len(y)
    if seen == 0:
        raise ValueError("no samples")
    return hits / seen


def fit(model, train_loader, val_loader, epochs, lr):
    if epochs < 0:
        raise ValueError("epochs must be >= 0")
    opt = torch.optim.SGD(model.parameters(), lr)
    criterion = nn.CrossEntropyLoss()
    history = []
    for epoch in range(epochs):
        model.train()
        total, batches = 0.0, 0
        for x, y in train_loader:
            opt.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            opt.step()
            total, batches = total + loss.item(), batches + 1
        if batches == 0:
            raise ValueError("no training batches")
        history.append({"epoch": epoch + 1, "train_loss": total / batches, "val_accuracy": evaluate(model, val_loader)})
    return history
