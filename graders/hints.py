"""Hints for a stuck student, keyed by target and failure kind, drawn from the course notes.

A failing check's message ends with the hint of the most specific entry that matches: the target
(``tensors.view``), then its exercise (``tensors``), then any target (``*``), for the failure's
kind. Kinds come from the comparison (``graders.compare.Mismatch.kind``), refined by which fact of
the outcome differed (``failure_kind``), or from the differential itself (``forbidden``,
``timeout``, ...). Every hint is written in English and Chinese (the notes are Chinese).
"""

from __future__ import annotations

from .compare import Mismatch, path_parts
from .i18n import language

#: Which fact of a probe's outcome differed -> the kind of failure it is.
_FACT_KINDS = {
    "stride": "stride",
    "storage_offset": "stride",
    "shares_storage_with_input": "storage",
    "input_after_writing_through_result": "storage",
    "returned_the_target_itself": "inplace",
    "target_storage_unchanged": "inplace",
    "grads": "grad",
    "grad": "grad",
}
#: Failure kinds a hint may be written for.
KINDS = ("shape", "dtype", "device", "values", "value", "kind", "keys", "length", "raised", "not_raised",
         "wrong_exception", "stride", "storage", "inplace", "grad", "forbidden", "timeout", "crashed", "import",
         "missing", "probe")


def failure_kind(mismatch: Mismatch) -> str:
    """The kind of a comparison failure, refined by the fact that differed (strides, storage, grads)."""
    parts = path_parts(mismatch.path)
    if parts and isinstance(parts[0], str) and parts[0] in _FACT_KINDS and mismatch.kind not in (
            "raised", "not_raised", "wrong_exception", "device"):
        return _FACT_KINDS[parts[0]]
    return mismatch.kind


def hint(qualname: str, kind: str, lang: str | None = None) -> str | None:
    """The hint for a failure of `kind` in `qualname` (``exercise.target``), or None."""
    exercise = qualname.split(".")[0]
    for key in ((qualname, kind), (exercise, kind), ("*", kind)):
        entry = HINTS.get(key)
        if entry:
            return entry[lang or language()]
    return None


def _h(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


HINTS: dict[tuple[str, str], dict[str, str]] = {
    # --- any target ---------------------------------------------------------------------------
    ("*", "device"): _h(
        "create new tensors on the input's device (torch.zeros(..., device=x.device), x.new_zeros(...), "
        "torch.zeros_like(x)); a bare torch.zeros(...) lands on the CPU.",
        "新建张量时指定输入所在的设备（torch.zeros(..., device=x.device)、x.new_zeros(...)、torch.zeros_like(x)）；"
        "直接写 torch.zeros(...) 会建在 CPU 上。"),
    ("*", "dtype"): _h(
        "follow the input's dtype: torch.zeros(..., dtype=x.dtype) or x.new_zeros(...); torch.tensor([...]) of "
        "Python ints gives int64 and of floats gives float32.",
        "结果的 dtype 应与输入一致：用 torch.zeros(..., dtype=x.dtype) 或 x.new_zeros(...)；"
        "torch.tensor([...]) 由整数得到 int64，由小数得到 float32。"),
    ("*", "shape"): _h(
        "print the shapes of your intermediate tensors on the input shown above; a missing or extra "
        "dimension of size 1 is the usual culprit.",
        "用上面给出的输入打印中间张量的形状；最常见的问题是多了或少了一个大小为 1 的维度。"),
    ("*", "not_raised"): _h(
        "PyTorch raises an error for this input; check the arguments before computing and raise the same "
        "exception type.",
        "对这个输入 PyTorch 会报错；请在计算之前检查参数，并抛出同样类型的异常。"),
    ("*", "wrong_exception"): _h(
        "raise the exception type PyTorch raises here (RuntimeError, ValueError, IndexError ...), not another.",
        "请抛出与 PyTorch 相同类型的异常（RuntimeError、ValueError、IndexError 等）。"),
    ("*", "grad"): _h(
        "the forward values are right but the gradients are not: keep every step differentiable (no .item(), "
        ".detach(), .data, torch.tensor(...) or numpy in between) and do not write into tensors that autograd needs.",
        "前向结果正确但梯度不对：中间不要用 .item()、.detach()、.data、torch.tensor(...) 或 numpy，"
        "也不要原地修改 autograd 需要的张量。"),
    ("*", "forbidden"): _h(
        "the point of the exercise is to build this yourself: use only the operations its docstring allows.",
        "这道题的目的就是自己实现它：只使用文档字符串里允许的操作。"),
    ("*", "timeout"): _h(
        "look for a loop that never ends or a Python loop over every element of a big tensor; use tensor "
        "operations instead.",
        "检查是否有死循环，或者对大张量的每个元素做 Python 循环；请改用张量运算。"),
    ("*", "crashed"): _h(
        "the process running your code died: very large allocations, recursion without end, or calling "
        "sys.exit()/os._exit() do that.",
        "运行你代码的进程意外退出：分配过大的内存、无限递归、调用 sys.exit()/os._exit() 都会导致这种情况。"),
    ("*", "import"): _h(
        "run `python -c \"import <module>\"` in your exercises folder to see the error; code at module level "
        "runs on import.",
        "在 exercises 目录下运行 `python -c \"import <模块名>\"` 查看错误；模块顶层的代码在导入时就会执行。"),
    # --- tensors.py -----------------------------------------------------------------------------
    ("tensors.view", "storage"): _h(
        "a view shares memory with its input (notes: \"修改其中的一个，另外一个也会跟着改变\"): build the result "
        "with x.as_strided(shape, strides, x.storage_offset()), never a copy.",
        "view 与原张量共享内存（笔记：“更改其中的一个，另外一个也会跟着改变”）：请用 "
        "x.as_strided(shape, strides, x.storage_offset()) 构造结果，不要复制数据。"),
    ("tensors.view", "stride"): _h(
        "for a contiguous input the new strides are contiguous (the last dim 1, each earlier dim the product "
        "of the sizes after it); for a non-contiguous one they follow the input's strides chunk by chunk.",
        "连续输入的新步长是连续步长（最后一维为 1，前面每一维是其后各维大小之积）；"
        "非连续输入则按原步长逐段推导。"),
    ("tensors.view", "shape"): _h(
        "-1 stands for the one size inferred from the others: x.numel() divided by the product of the given sizes.",
        "-1 表示由其它维度推断出的那一维：x.numel() 除以其余各维大小之积。"),
    ("tensors.view", "not_raised"): _h(
        "Tensor.view raises RuntimeError when the sizes do not multiply to x.numel(), for two -1, and when the "
        "strides are incompatible.",
        "当各维大小之积不等于 x.numel()、出现两个 -1、或步长不兼容时，Tensor.view 会抛出 RuntimeError。"),
    ("tensors.broadcast_to", "stride"): _h(
        "a broadcast dimension repeats the same elements: give it stride 0 (as_strided), keep the input's stride "
        "on the other dimensions.",
        "被广播的维度重复同一批元素：它的步长为 0（用 as_strided），其它维度保留原步长。"),
    ("tensors.broadcast_to", "storage"): _h(
        "broadcasting copies nothing: the result must be an as_strided view of x (notes: 广播机制).",
        "广播不复制数据：结果应是 x 的 as_strided 视图（见笔记“广播机制”）。"),
    ("tensors.broadcast_shape", "value"): _h(
        "align the shapes on the right; in each position the sizes must be equal or 1, and the result takes "
        "the size that is not 1.",
        "把各形状右对齐；每个位置的大小必须相等或为 1，结果取不为 1 的那个。"),
    ("tensors.scatter_", "values"): _h(
        "the notes' formula for dim 0: self[index[i][j]][j] = src[i][j]; for dim 1: self[i][index[i][j]] = "
        "src[i][j]. Only positions covered by index are written.",
        "笔记中的公式：dim=0 时 self[index[i][j]][j] = src[i][j]；dim=1 时 self[i][index[i][j]] = src[i][j]。"
        "只写入 index 覆盖到的位置。"),
    ("tensors.scatter_", "inplace"): _h(
        "an operation ending in _ changes its first argument in place and returns that same tensor (notes: "
        "任何以“_”结尾的操作都会用结果替换原变量).",
        "以 _ 结尾的操作原地修改第一个参数并返回它本身（笔记：任何以“_”结尾的操作都会用结果替换原变量）。"),
    ("tensors.scatter_add_", "values"): _h(
        "repeated indices accumulate: add into the target (index_put_ with accumulate=True does), do not overwrite.",
        "重复的下标要累加：往目标里加（例如 index_put_(..., accumulate=True)），而不是覆盖。"),
    ("tensors.scatter_add_", "inplace"): _h(
        "change target in place and return it itself.", "原地修改 target 并返回它本身。"),
    ("tensors.gather", "values"): _h(
        "out[i][j] = x[i][index[i][j]] for dim 1 (x[index[i][j]][j] for dim 0): the result has index's shape.",
        "dim=1 时 out[i][j] = x[i][index[i][j]]（dim=0 时为 x[index[i][j]][j]）：结果的形状与 index 相同。"),
    ("tensors.one_hot", "dtype"): _h(
        "one_hot returns int64 (torch.long): start from torch.zeros(..., dtype=torch.long).",
        "one_hot 返回 int64（torch.long）：从 torch.zeros(..., dtype=torch.long) 开始构造。"),
    ("tensors.one_hot", "values"): _h(
        "scatter a 1 into each row at the column given by its label: your own scatter_ along dim 1.",
        "在每一行标签对应的列写入 1：沿 dim=1 使用你自己的 scatter_。"),
    # --- conv.py ------------------------------------------------------------------------------
    ("conv.corr2d", "values"): _h(
        "Y[i, j] = (X[i:i+h, j:j+w] * K).sum(): the kernel is not flipped (cross-correlation).",
        "Y[i, j] = (X[i:i+h, j:j+w] * K).sum()：卷积核不翻转（互相关）。"),
    ("conv.corr2d", "shape"): _h(
        "the \"valid\" output has (H - h + 1) rows and (W - w + 1) columns.",
        "“valid” 输出有 (H - h + 1) 行、(W - w + 1) 列。"),
    ("conv.corr2d", "grad"): _h(
        "build the output from differentiable operations (stack or sum of slices) instead of writing into a "
        "preallocated tensor under torch.no_grad().",
        "用可求导的运算（切片求和、stack）构造输出，不要在 torch.no_grad() 下写入预先分配的张量。"),
    ("conv.pool2d", "values"): _h(
        "padding counts as -inf for max pooling and as zeros (included in the count) for average pooling.",
        "最大池化时填充值视为 -inf，平均池化时视为 0（并计入个数）。"),
    ("conv.Conv2D", "values"): _h(
        "forward(x) = corr2d(x, self.weight) + self.bias; register weight and bias as nn.Parameter.",
        "forward(x) = corr2d(x, self.weight) + self.bias；weight 和 bias 要注册为 nn.Parameter。"),
    # --- autograd.py -----------------------------------------------------------------------------
    ("autograd.vjp", "values"): _h(
        "y.backward(gradient=v) computes Jᵀv when y is not a scalar (notes: 需要传入一个与 y 同形的 Tensor).",
        "y 不是标量时，y.backward(gradient=v) 计算 Jᵀv（笔记：需要传入一个与 y 同形的 Tensor）。"),
    ("autograd.jacobian", "values"): _h(
        "one backward pass per output element with retain_graph=True, and clear x.grad between passes: "
        "gradients accumulate (notes: 梯度不会自动清零).",
        "每个输出元素做一次 backward（retain_graph=True），每次之间清零 x.grad：梯度会累加（笔记：梯度不会自动清零）。"),
    ("autograd.second_derivative", "values"): _h(
        "take the first derivative with torch.autograd.grad(..., create_graph=True), then differentiate it again.",
        "先用 torch.autograd.grad(..., create_graph=True) 求一阶导数，再对它求导一次。"),
    ("autograd.accumulated_grad", "values"): _h(
        "do not zero w.grad between the steps: the notes print 5, 10, 15, 20 because gradients accumulate.",
        "步骤之间不要清零 w.grad：笔记中输出 5, 10, 15, 20，正是因为梯度会累加。"),
    ("autograd.sgd_step_", "values"): _h(
        "update the parameters under torch.no_grad() (p -= lr * p.grad), then zero the gradients; a leaf "
        "tensor cannot be changed in place while autograd records (notes: 叶子张量不可以执行 in-place 操作).",
        "在 torch.no_grad() 下更新参数（p -= lr * p.grad），然后清零梯度；autograd 记录时叶子张量不能原地修改"
        "（笔记：叶子张量不可以执行 in-place 操作）。"),
    # --- functions.py ---------------------------------------------------------------------------
    ("functions", "grad"): _h(
        "backward returns one gradient per input of forward (None for inputs that need none, such as coeff), "
        "and uses what forward saved with ctx.save_for_backward.",
        "backward 返回的梯度个数与 forward 的输入个数相同（不需要梯度的输入如 coeff 返回 None），"
        "并使用 forward 中 ctx.save_for_backward 保存的张量。"),
    ("functions.Exp", "grad"): _h(
        "save the result in forward (ctx.save_for_backward(result)); backward is grad_output * result.",
        "在 forward 中保存结果（ctx.save_for_backward(result)）；backward 返回 grad_output * result。"),
    ("functions.GradCoeff", "grad"): _h(
        "backward returns (ctx.coeff * grad_output, None): the second None is for coeff.",
        "backward 返回 (ctx.coeff * grad_output, None)：第二个 None 对应 coeff。"),
    ("functions.LegendreP3", "grad"): _h(
        "P3'(x) = 1.5 * (5x² - 1): backward is grad_output * 1.5 * (5 * x**2 - 1) with the saved input x.",
        "P3'(x) = 1.5 * (5x² - 1)：backward 用保存的输入 x 返回 grad_output * 1.5 * (5 * x**2 - 1)。"),
    # --- modules.py, data.py, training.py, devices.py, parallel.py --------------------------------
    ("modules.MLP", "keys"): _h(
        "name the submodules exactly hidden, act and output (the notes' MLP): parameter names come from them.",
        "子模块必须命名为 hidden、act 和 output（与笔记中的 MLP 一致）：参数名由它们决定。"),
    ("modules", "keys"): _h(
        "register parameters as attributes of the module (nn.Parameter, nn.ParameterList, nn.ParameterDict) so "
        "that named_parameters() lists them.",
        "把参数注册为模块的属性（nn.Parameter、nn.ParameterList、nn.ParameterDict），named_parameters() 才能列出它们。"),
    ("data.CSVDataset", "dtype"): _h(
        "features are float32 (torch.tensor(values, dtype=torch.float32)) and the label int64 "
        "(torch.tensor(label, dtype=torch.long)): parse features with float() and the label with int().",
        "特征为 float32（torch.tensor(values, dtype=torch.float32)），标签为 int64（torch.tensor(label, "
        "dtype=torch.long)）：特征用 float() 解析，标签用 int() 解析。"),
    ("data.CSVDataset", "shape"): _h(
        "features have shape (n_features,) (every column but the last) and the label shape (): "
        "torch.tensor(3), not torch.tensor([3]).",
        "特征的形状为 (n_features,)（除最后一列外的所有列），标签的形状为 ()：应为 torch.tensor(3)，"
        "而不是 torch.tensor([3])。"),
    ("data.make_loader", "value"): _h(
        "training loaders shuffle and drop the last incomplete batch (shuffle=True, drop_last=True); "
        "evaluation loaders do neither.",
        "训练用的 DataLoader 要打乱并丢弃最后不完整的批次（shuffle=True, drop_last=True）；验证用的都不要。"),
    ("training.train_step", "values"): _h(
        "model.train(), optimizer.zero_grad(), forward, loss, loss.backward(), optimizer.step(), in this order.",
        "按顺序：model.train()、optimizer.zero_grad()、前向、计算损失、loss.backward()、optimizer.step()。"),
    ("training.evaluate", "value"): _h(
        "model.eval() and torch.no_grad() while evaluating; accuracy = correct predictions / number of samples.",
        "评估时使用 model.eval() 和 torch.no_grad()；准确率 = 预测正确的样本数 / 样本总数。"),
    ("devices.to_device", "device"): _h(
        "move every tensor inside lists, tuples, dicts and sets with .to(device), and rebuild the container "
        "with the same type (a named tuple stays a named tuple).",
        "对列表、元组、字典、集合中的每个张量调用 .to(device)，并用同样的类型重建容器（命名元组仍是命名元组）。"),
    ("parallel.average_gradients", "values"): _h(
        "all_reduce sums the gradients over the ranks: divide by the world size to get the mean.",
        "all_reduce 对各进程的梯度求和：再除以进程数（world size）得到平均值。"),
    ("parallel.ddp_train_step", "values"): _h(
        "each rank trains on its shard; average the gradients before optimizer.step() so every rank takes the "
        "same step as one process on the whole batch.",
        "每个进程在自己的分片上训练；在 optimizer.step() 之前平均梯度，使各进程的更新与单进程处理整个批次相同。"),
}
