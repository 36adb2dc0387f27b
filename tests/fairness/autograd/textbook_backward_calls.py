# expect: full marks
"""The notes' way throughout: y.backward(gradient=...) on a copy, .grad read and cleared by hand, and
the textbook SGD loop that skips parameters without a gradient."""


def vjp(f, x, v):
    x_ = x.detach().clone()
    x_.requires_grad = True
    y = f(x_)
    if y.grad_fn is None:
        return torch.zeros_like(x)
    y.backward(gradient=v)
    return x_.grad if x_.grad is not None else torch.zeros_like(x)


def jacobian(f, x):
    x_ = x.detach().clone()
    x_.requires_grad = True
    y = f(x_)
    rows = []
    for i in range(y.numel()):
        if y.grad_fn is None:
            rows.append(torch.zeros_like(x))
            continue
        e = torch.zeros_like(y).reshape(-1)
        e[i] = 1
        y.backward(gradient=e.reshape(y.shape), retain_graph=True)
        rows.append(x_.grad.clone() if x_.grad is not None else torch.zeros_like(x))
        x_.grad = None
    return torch.stack(rows).reshape(y.shape + x.shape) if rows else torch.zeros(y.shape + x.shape,
                                                                                  dtype=x.dtype, device=x.device)


def accumulated_grad(w, x, steps):
    if steps < 0:
        raise ValueError("steps must not be negative")
    w = w.detach().clone().requires_grad_()
    x = x.detach().clone().requires_grad_()
    for _ in range(steps):
        y = (x + w) * (w + 1)
        y.backward()
    return torch.zeros_like(w) if w.grad is None else w.grad.detach().clone()


def sgd_step_(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            p -= lr * p.grad
            p.grad.zero_()
