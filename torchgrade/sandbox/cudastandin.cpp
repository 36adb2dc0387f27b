// torchgrade's compiled CUDA stand-in (see cudastandin.py): on a torch built without CUDA, tensors that
// are `cuda:0` to torch itself (device, dispatch keys, autograd's device threads) and whose memory is the
// CPU's. Every operator that reaches the CUDA dispatch key runs in `fallback`: it applies CUDA's placement
// rules (docs/devices.md, the same rules as standin.py), runs the operator's CPU kernel on CPU aliases of
// the same memory, and gives back what the operator returns on `cuda:0`.
//
// A plain CPython module (no pybind11): loading it registers the fallback, a one-device guard and an
// allocator for CUDA; `enable()` tells torch's Python bindings that CUDA needs no initialisation.
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

const c10::Device CUDA0(c10::kCUDA, 0);
const c10::Device CPU(c10::kCPU);
constexpr const char* MIXED = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!";
constexpr const char* INDEX_MIXED = "indices should be either on cpu or on the same device as the indexed tensor (cpu)";
std::atomic<long> operators{0};

// ---- the device: one CUDA device whose memory is the CPU's --------------------------------------------
struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = c10::alloc_cpu(n);
    return {p, p, &c10::free_cpu, CUDA0};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &c10::free_cpu; }
  void copy_data(void* dest, const void* src, std::size_t n) const override { std::memcpy(dest, src, n); }
};
Allocator allocator;

struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::kCUDA; }
  c10::Device exchangeDevice(c10::Device) const override { return CUDA0; }
  c10::Device getDevice() const override { return CUDA0; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() <= 0, "CUDA error: invalid device ordinal");
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, CUDA0); }
  c10::Stream exchangeStream(c10::Stream) const override { return c10::Stream(c10::Stream::DEFAULT, CUDA0); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  // one stream that runs everything at once: events are always complete
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

// ATen's view of CUDA: present (autograd asks for the accelerator's current stream), nothing to initialise.
// Generators, cuDNN and the rest keep the CPU build's answers (torch.Generator("cuda") raises).
struct Hooks final : at::CUDAHooksInterface {
  explicit Hooks(at::CUDAHooksArgs) {}
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool hasCUDA() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex current_device() const override { return 0; }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
  int getNumGPUs() const override { return 1; }
  void deviceSynchronize(c10::DeviceIndex) const override {}
};

// ---- what the fallback needs to know of an operator, worked out once per operator ---------------------
enum Kind { PLAIN, CROSSES, INDEXES, SETS };

struct Info {
  Kind kind = PLAIN;
  std::vector<int> writes;  // arguments the operator writes (self of an in-place op, out=)
  int device = -1;          // the `device` argument
  std::vector<int> generators;
};

Info describe(const c10::FunctionSchema& schema) {
  Info info;
  const std::string& name = schema.name();
  if (name == "aten::copy_" || name == "aten::_to_copy" || name == "aten::_copy_from" ||
      name == "aten::_copy_from_and_resize" || name == "aten::_foreach_copy_")
    info.kind = CROSSES;
  else if (name == "aten::index" || name == "aten::index_put_" || name == "aten::index_put" ||
           name == "aten::_index_put_impl_" || name == "aten::_unsafe_index" || name == "aten::_unsafe_index_put")
    info.kind = INDEXES;
  else if (name == "aten::set_")
    info.kind = SETS;
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto& a = arguments[i];
    if (a.alias_info() && a.alias_info()->isWrite()) info.writes.push_back(static_cast<int>(i));
    if (a.name() == "device") info.device = static_cast<int>(i);
    if (a.name() == "generator") info.generators.push_back(static_cast<int>(i));
  }
  return info;
}

const Info& info_of(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, Info> known;
  const c10::FunctionSchema& schema = op.schema();
  auto found = known.find(&schema);
  if (found != known.end()) return found->second;
  return known.emplace(&schema, describe(schema)).first->second;
}

bool on_cuda(const at::Tensor& t) { return t.defined() && t.device().type() == c10::kCUDA; }

template <typename F>
void each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined()) f(t);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) f(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (e.isTensor() && e.toTensor().defined()) f(e.toTensor());
  }
}

// CUDA's rule: one device, except CPU tensors of zero dimensions as inputs. 0: none, 1: cpu, 2: cuda.
struct Common {
  int where = 0;
  bool scalar = false;
  void add(const at::Tensor& t) {
    int w = on_cuda(t) ? 2 : 1;
    bool s = w == 1 && t.dim() == 0;
    if (where == 0) {
      where = w, scalar = s;
    } else if (w == where) {
      scalar = scalar && s;
    } else if (s) {
    } else if (scalar) {
      where = w, scalar = s;
    } else {
      TORCH_CHECK(false, MIXED);
    }
  }
};

// ---- aliases: a CUDA tensor's memory as a CPU tensor ----------------------------------------------------
struct Alias {
  c10::TensorImpl* original;
  at::Tensor alias;
  c10::StorageImpl* storage;  // the alias's storage (a CPU label on the original's memory)
  void* data;                 // where that memory was
};

at::Tensor alias_of(const at::Tensor& t, std::vector<Alias>& aliases) {
  for (const Alias& a : aliases)
    if (a.original == t.unsafeGetTensorImpl()) return a.alias;
  const c10::Storage& storage = t.storage();
  c10::StorageImpl* shared = nullptr;  // another alias of the same storage: views of one tensor stay views
  for (const Alias& a : aliases)
    if (a.data == storage.data() && a.storage->nbytes() == storage.nbytes()) shared = a.storage;
  c10::Storage cpu_storage;
  if (shared != nullptr) {
    cpu_storage = c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(shared));
  } else {
    cpu_storage = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), storage.sym_nbytes(),
        c10::DataPtr(const_cast<void*>(storage.data()), CPU), c10::GetCPUAllocator(), /*resizable=*/true));
  }
  c10::StorageImpl* raw = cpu_storage.unsafeGetStorageImpl();
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, std::move(cpu_storage),
                                                   c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  impl->_set_conj(t.is_conj());
  impl->_set_neg(t.is_neg());
  at::Tensor alias(std::move(impl));
  aliases.push_back({t.unsafeGetTensorImpl(), alias, raw, const_cast<void*>(storage.data())});
  return alias;
}

// A CPU tensor the CPU kernel made, on cuda:0: the same memory, a CUDA tensor.
at::Tensor on_device(const at::Tensor& cpu, const std::vector<Alias>& aliases, const std::vector<at::Tensor>& originals,
                     const std::vector<c10::StorageImpl*>& cpu_inputs) {
  c10::StorageImpl* storage = cpu.storage().unsafeGetStorageImpl();
  for (size_t i = 0; i < aliases.size(); ++i) {
    if (aliases[i].storage != storage) continue;
    // a view of an argument: a view of the CUDA tensor, with its keys (torch's rule under inference_mode)
    const at::Tensor& base = originals[i];
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(base.storage()),
                                                     base.key_set(), cpu.dtype());
    impl->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
    impl->_set_conj(cpu.is_conj());
    impl->_set_neg(cpu.is_neg());
    return at::Tensor(std::move(impl));
  }
  at::Tensor fresh = cpu;
  for (c10::StorageImpl* s : cpu_inputs)
    if (s == storage) fresh = cpu.clone();  // (the memory of a CPU tensor stays the CPU's)
  c10::Storage own = fresh.storage();
  own.unsafeGetStorageImpl()->_mutable_data_ptr_no_checks().unsafe_set_device(CUDA0);
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(own), c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                                   fresh.dtype());
  impl->set_sizes_and_strides(fresh.sizes(), fresh.strides(), fresh.storage_offset());
  impl->_set_conj(fresh.is_conj());
  impl->_set_neg(fresh.is_neg());
  return at::Tensor(std::move(impl));
}

// An argument the operator wrote: its new shape, and its new memory where the CPU kernel resized it.
void write_back(const Alias& a) {
  c10::TensorImpl* original = a.original;
  const at::Tensor& alias = a.alias;
  TORCH_CHECK(alias.storage().unsafeGetStorageImpl() == a.storage,
              "the CUDA stand-in cannot model set_ (a tensor given another's storage)");
  c10::StorageImpl* storage = original->storage().unsafeGetStorageImpl();
  if (a.storage->data() != storage->data() || a.storage->nbytes() != storage->nbytes()) {
    c10::DataPtr moved = std::move(a.storage->_mutable_data_ptr_no_checks());
    moved.unsafe_set_device(CUDA0);
    storage->set_data_ptr_noswap(std::move(moved));
    storage->set_nbytes(a.storage->nbytes());
    a.storage->set_data_ptr_noswap(c10::DataPtr(const_cast<void*>(storage->data()), CPU));
  }
  if (original->sizes() != alias.sizes() || original->strides() != alias.strides() ||
      original->storage_offset() != alias.storage_offset())
    original->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
}

// set_: the CUDA tensor takes the storage (of cuda:0) it is given, as on a GPU; no CPU kernel is involved.
void set_storage(torch::jit::Stack* stack, size_t first, size_t n) {
  at::Tensor self = (*stack)[first].toTensor();
  TORCH_CHECK(on_cuda(self), MIXED);
  c10::Storage storage;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  const int64_t item = static_cast<int64_t>(self.dtype().itemsize());
  if (n == 1) {
    storage = c10::Storage(c10::Storage::use_byte_size_t(), 0, &allocator, /*resizable=*/true);
    sizes = {0}, strides = {1};
  } else if ((*stack)[first + 1].isTensor()) {
    const at::Tensor& source = (*stack)[first + 1].toTensor();
    TORCH_CHECK(on_cuda(source), MIXED);
    storage = source.storage();
    sizes = source.sizes().vec(), strides = source.strides().vec(), offset = source.storage_offset();
  } else {
    storage = (*stack)[first + 1].toStorage();
    TORCH_CHECK(storage.device().type() == c10::kCUDA, MIXED);
    if (n == 2) {
      sizes = {static_cast<int64_t>(storage.nbytes()) / item}, strides = {1};
    } else {
      offset = (*stack)[first + 2].toInt();
      sizes = (*stack)[first + 3].toIntVector(), strides = (*stack)[first + 4].toIntVector();
    }
  }
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(storage);
  self.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, self);
}

void fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  operators.fetch_add(1, std::memory_order_relaxed);
  const Info& info = info_of(op);
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  const size_t first = stack->size() - n;
  if (info.kind == SETS) return set_storage(stack, first, n);

  // 1. where it runs, by CUDA's rules (the same as standin.py's _place)
  int there = 0;
  std::vector<c10::StorageImpl*> cpu_inputs;
  bool to_cuda = false, to_cpu = false;
  if (info.device >= 0) {
    const c10::IValue& d = (*stack)[first + info.device];
    if (d.isDevice()) (d.toDevice().type() == c10::kCUDA ? to_cuda : to_cpu) = true;
  }
  if (info.kind == CROSSES) {
    if (schema.name() == "aten::_to_copy") {
      there = to_cuda ? 2 : to_cpu ? 1 : (on_cuda((*stack)[first].toTensor()) ? 2 : 1);
    } else {
      there = 0;  // a copy writes into its destination, wherever that is
    }
  } else {
    Common common;
    if (info.kind == INDEXES) {
      const at::Tensor& self = (*stack)[first].toTensor();
      bool cuda_index = false;
      if (n > 1) each_tensor((*stack)[first + 1], [&](const at::Tensor& t) { cuda_index |= on_cuda(t); });
      TORCH_CHECK(on_cuda(self) || !cuda_index, INDEX_MIXED);
      for (size_t i = 0; i < n; ++i)
        if (i != 1) each_tensor((*stack)[first + i], [&](const at::Tensor& t) { common.add(t); });
    } else {
      for (size_t i = 0; i < n; ++i) each_tensor((*stack)[first + i], [&](const at::Tensor& t) { common.add(t); });
    }
    there = common.where;
    if (to_cuda && there == 0) there = 2;  // a factory function with device="cuda"
    for (int w : info.writes) {
      if (info.kind == INDEXES && w != 0) continue;
      each_tensor((*stack)[first + w], [&](const at::Tensor& t) {
        TORCH_CHECK(there == 0 || (on_cuda(t) ? 2 : 1) == there, MIXED);
      });
    }
  }
  if (there == 2) {
    for (int g : info.generators) {
      const c10::IValue& v = (*stack)[first + g];
      if (v.isGenerator() && v.toGenerator().defined())
        TORCH_CHECK(v.toGenerator().device().type() == c10::kCUDA,
                    "Expected a 'cuda' device type for generator but found '", v.toGenerator().device().type(), "'");
    }
  }

  // 2. the arguments on the CPU: CUDA tensors as CPU aliases of their memory, device="cuda" as "cpu"
  std::vector<Alias> aliases;
  std::vector<at::Tensor> originals;
  auto cpu_of = [&](const at::Tensor& t) -> at::Tensor {
    if (!on_cuda(t)) {
      if (t.defined() && t.has_storage()) cpu_inputs.push_back(t.storage().unsafeGetStorageImpl());
      return t;
    }
    size_t before = aliases.size();
    at::Tensor a = alias_of(t, aliases);
    if (aliases.size() > before) originals.push_back(t);
    return a;
  };
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) v = cpu_of(v.toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) list.set(j, cpu_of(list.get(j)));
    } else if (v.isList()) {
      auto list = v.toList();
      for (size_t j = 0; j < list.size(); ++j) {
        c10::IValue e = list.get(j);
        if (e.isTensor() && e.toTensor().defined()) list.set(j, cpu_of(e.toTensor()));
      }
    } else if (static_cast<int>(i) == info.device && to_cuda) {
      v = c10::IValue(CPU);
    }
  }

  // 3. the CPU kernel; what it calls in turn skips autograd (done above, on the CUDA tensors) and the version
  // counters (an alias has none: to ADInplaceOrView it would be an inference tensor written outside the mode)
  {
    at::AutoDispatchBelowADInplaceOrView below;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }

  // 4. written arguments take their new shape and memory; results land on cuda:0 where the operator ran there
  for (const Alias& a : aliases) write_back(a);  // (only what changed: an in-place op, out=, resize_)
  const size_t returns = schema.returns().size();
  auto result = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    for (size_t i = 0; i < aliases.size(); ++i)
      if (aliases[i].alias.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return originals[i];
    if (there != 2 || t.device().type() != c10::kCPU) return t;
    return on_device(t, aliases, originals, cpu_inputs);
  };
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = result(v.toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) list.set(j, result(list.get(j)));
    }
  }
}

// ---- CUDA-only kernels that torch's composites pick when `is_cuda()` ---------------------------------------
// The fused RNN cells have no CPU kernel. On autograd's CUDA key they compute what the CPU's cells compute,
// with differentiable operators (autograd records those; the workspace is nobody's but the fused backward's).
at::Tensor add_bias(at::Tensor gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                         const at::Tensor& cx, const std::optional<at::Tensor>& input_bias,
                                                         const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = add_bias(input_gates, input_bias) + add_bias(hidden_gates, hidden_bias);
  auto chunked = gates.unsafe_chunk(4, 1);
  at::Tensor in = chunked[0].sigmoid(), forget = chunked[1].sigmoid(), cell = chunked[2].tanh(),
             out = chunked[3].sigmoid();
  at::Tensor cy = forget * cx + in * cell;
  at::Tensor hy = out * cy.tanh();
  return {hy, cy, at::cat({in, forget, cell, out}, 1).detach()};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                            const std::optional<at::Tensor>& hidden_bias) {
  auto i = add_bias(input_gates, input_bias).unsafe_chunk(3, 1);
  auto h = add_bias(hidden_gates, hidden_bias).unsafe_chunk(3, 1);
  at::Tensor reset = (h[0] + i[0]).sigmoid(), update = (h[1] + i[1]).sigmoid();
  at::Tensor fresh = (i[2] + reset * h[2]).tanh();
  at::Tensor hy = (hx - fresh) * update + fresh;
  return {hy, at::cat({reset, update, fresh, hx, h[2]}, 1).detach()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradCUDA, m) {
  m.impl("_thnn_fused_lstm_cell", &lstm_cell);
  m.impl("_thnn_fused_gru_cell", &gru_cell);
}

C10_REGISTER_GUARD_IMPL(CUDA, Guard);
namespace at {
C10_REGISTER_CLASS(CUDAHooksRegistry, CUDAHooks, ::Hooks);
}  // namespace at

TORCH_LIBRARY_IMPL(_, CUDA, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>()); }

// An operator with a CompositeExplicitAutograd kernel would run it on the CUDA tensors themselves (torch
// fills the CUDA slot with it before any fallback), and its CPU code asks for CUDA's kernels (copy_'s
// DispatchStub, `is_cuda()` paths): the fallback takes the CUDA slot of each such operator explicitly.
// (Not of CompositeImplicitAutograd ones: those decompose above autograd, as on a GPU.)
static std::vector<c10::RegistrationHandleRAII> taken;

static void take_composites() {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::CUDA) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))
      continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
      continue;
    taken.push_back(dispatcher.registerImpl(name, c10::DispatchKey::CUDA,
                                            c10::KernelFunction::makeFromBoxedFunction<&fallback>(), std::nullopt,
                                            nullptr, "torchgrade cudastandin"));
  }
}

// ---- the Python module ----------------------------------------------------------------------------------
static PyObject* enable(PyObject*, PyObject*) {
  if (taken.empty()) take_composites();
  c10::SetAllocator(c10::kCUDA, &allocator);
  torch::utils::set_requires_device_init(at::kCUDA, false);
  Py_RETURN_NONE;
}

static PyObject* count(PyObject*, PyObject*) { return PyLong_FromLong(operators.load()); }

// Whether ATen took this library's CUDA hooks: only if it was loaded before torch._C initialised (which asks
// for them once); autograd needs them (the accelerator's current stream).
static PyObject* ready(PyObject*, PyObject*) { return PyBool_FromLong(at::hasCUDA()); }

static PyMethodDef methods[] = {
    {"ready", ready, METH_NOARGS, "Whether ATen uses these CUDA hooks."},
    {"enable", enable, METH_NOARGS, "CUDA needs no initialisation: its tensors are the stand-in's."},
    {"count", count, METH_NOARGS, "How many operators the stand-in ran."},
    {nullptr, nullptr, 0, nullptr}};

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_torchgrade_cudastandin", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__torchgrade_cudastandin() { return PyModule_Create(&module); }
