// torchgrade's compiled watch: a RecordFunction observer that computes, while a request runs, what
// torchgrade.sandbox.recorder.Findings computes from a Kineto profile afterwards (see observer.py).
//
// A plain CPython module (no pybind11, no torch/extension.h): it compiles in seconds. Per event it keeps
// one byte of context on a thread-local stack: whether the event is inside what counts (a window in
// the arming thread; anything in another thread), inside a `seen` marker or a builtin operator, inside
// an autograd node's evaluation.
#include <Python.h>

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr unsigned char ACTIVE = 1, SEEN = 2, EVALUATING = 4;
// A direct child of the evaluation of torch's own node (STEPS), or of AccumulateGrad's own range (ACCUMULATING).
// On the evaluation itself: its last child was a `sum` (AFTER_SUM), its node's range has run (FORMULA_DONE),
// something other than the reduction of its gradients has run since (LATE): recorder._engine_step.
constexpr unsigned char STEPS = 8, ACCUMULATING = 16, AFTER_SUM = 32, FORMULA_DONE = 64, LATE = 128;
constexpr unsigned char PHASES = STEPS | ACCUMULATING | AFTER_SUM | FORMULA_DONE | LATE;
constexpr const char* EVALUATE = "autograd::engine::evaluate_function: ";
constexpr const char* ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad";
// recorder._BEFORE_FORMULA, _REDUCING, _LATE_STEPS and _ACCUMULATE_STEPS: what the engine itself runs there.
const char* const BEFORE_FORMULA[] = {"clone", "add", nullptr};
const char* const REDUCING[] = {"sum", "view", "to", "_to_copy", "copy_", nullptr};
const char* const LATE_STEPS[] = {"add", "add_", nullptr};
const char* const ACCUMULATE_STEPS[] = {"detach", "add", "add_", "clone", "copy_", "new_empty_strided",
                                        "empty_strided", "empty_like", "_indices", "_values", "coalesce",
                                        "_coalesce", "to", "_to_copy", nullptr};

std::string window_marker, seen_marker;  // set by arm (the nonce is secret)
std::vector<std::string> builtin;        // recorder._BUILTIN
std::thread::id main_thread;
std::atomic<uint64_t> generation{0};
std::atomic<bool> armed{false};
std::atomic<long> windows{0}, markers{0}, events{0};
std::mutex names_lock;
std::vector<std::string> names;
std::set<std::string> named;
bool registered = false;
at::CallbackHandle handle = 0;

struct Stack {
  uint64_t generation = 0;
  std::vector<unsigned char> contexts;
};
thread_local Stack stack;

struct Frame : at::ObserverContext {
  Frame(uint64_t g, size_t d, bool w) : generation(g), depth(d), window(w) {}
  uint64_t generation;
  size_t depth;  // the stack's size before this event (an outer range ended first ends what it holds)
  bool window;
};

void add(const char* name) {
  std::lock_guard<std::mutex> guard(names_lock);
  if (named.insert(name).second) names.emplace_back(name);
}

bool ends_with(const char* s, size_t n, const char* suffix) {
  size_t m = std::strlen(suffix);
  return n >= m && std::memcmp(s + n - m, suffix, m) == 0;
}

// recorder._BUILTIN_NODE: `Backward<digits>` at the end, or torch::autograd's own nodes.
bool builtin_node(const char* node) {
  if (std::strncmp(node, "torch::autograd::", 17) == 0) return true;
  size_t n = std::strlen(node), digits = 0;
  while (digits < n && node[n - 1 - digits] >= '0' && node[n - 1 - digits] <= '9') ++digits;
  return digits > 0 && ends_with(node, n - digits, "Backward");
}

bool listed(const char* const* list, const char* op) {
  for (; *list != nullptr; ++list) {
    if (std::strcmp(*list, op) == 0) return true;
  }
  return false;
}

// recorder._engine_step: whether `op` (nullptr: not an operator) is one of the engine's own steps where the
// evaluation stands, which it moves on.
bool engine_step(unsigned char& evaluation, const char* op) {
  bool after_sum = evaluation & AFTER_SUM;
  evaluation &= ~AFTER_SUM;
  if (!(evaluation & FORMULA_DONE)) return op != nullptr && listed(BEFORE_FORMULA, op);
  if (!(evaluation & LATE)) {
    if (op != nullptr && listed(REDUCING, op) && (std::strcmp(op, "view") != 0 || after_sum)) {
      if (std::strcmp(op, "sum") == 0) evaluation |= AFTER_SUM;
      return true;
    }
    evaluation |= LATE;
  }
  return op != nullptr && listed(LATE_STEPS, op);
}

// An operator of a builtin namespace: its name after the namespace, else nullptr.
const char* builtin_op(const char* name) {
  const char* sep = std::strstr(name, "::");
  if (sep == nullptr) return nullptr;
  std::string space(name, sep - name);
  for (const auto& b : builtin) {
    if (b == space) return sep + 2;
  }
  return nullptr;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!armed.load(std::memory_order_acquire)) return nullptr;
  uint64_t g = generation.load(std::memory_order_acquire);
  if (stack.generation != g) {  // a new request: what this thread had open belongs to an earlier one
    stack.generation = g;
    stack.contexts.clear();
  }
  bool main = std::this_thread::get_id() == main_thread;
  unsigned char parent = stack.contexts.empty() ? (main ? 0 : ACTIVE) : stack.contexts.back();
  unsigned char child = parent & ~PHASES;
  bool window = false;
  const char* name = fn.name();
  events.fetch_add(1, std::memory_order_relaxed);
  // In the evaluation of torch's own node, its own range (no student's range has this scope) is its derivative
  // formula, torch's business; beside it, only the engine's own steps are torch's: anything else ran in a hook.
  bool formula = (parent & (STEPS | ACCUMULATING)) && builtin_node(name) &&
                 fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
  bool step = false;
  if (parent & STEPS) {
    unsigned char& evaluation = stack.contexts.back();
    if (formula) {
      evaluation = (evaluation & ~AFTER_SUM) | FORMULA_DONE;
    } else {
      step = engine_step(evaluation, builtin_op(name));
    }
  } else if ((parent & ACCUMULATING) && !formula) {
    const char* op = builtin_op(name);
    step = op != nullptr && listed(ACCUMULATE_STEPS, op);
  }
  if (!(parent & ACTIVE)) {  // the probe's own thread, outside the student's windows
    if (window_marker == name) {
      child = ACTIVE;
      window = true;
    } else if (seen_marker == name) {
      markers.fetch_add(1);  // a marker outside a window: not the recorder's
    }
  } else if (seen_marker == name) {
    markers.fetch_add(1);
    child |= SEEN;
  } else if (std::strncmp(name, EVALUATE, std::strlen(EVALUATE)) == 0) {
    // Autograd run inside a backward; or started where the mode did not see it, in the student's thread or at
    // the top of any other (a request runs autograd in the thread that asks: recorder.DispatchWatch.armed).
    // Such a run is the student's whole (recorder.Findings._walk). In a run the mode saw, torch's own node: its
    // range and the engine's steps are torch's (below); a custom Function's is the student's.
    if ((parent & EVALUATING) || !(parent & SEEN)) {
      add("backward");
      add("grad");
      child = ACTIVE | EVALUATING;
    } else {
      child = ACTIVE | EVALUATING | (builtin_node(name + std::strlen(EVALUATE)) ? STEPS : 0);
    }
  } else if (formula) {
    child = ACTIVE | EVALUATING | (std::strcmp(name, ACCUMULATE_GRAD) == 0 ? ACCUMULATING : SEEN);
  } else if (const char* op = builtin_op(name)) {
    if (!(parent & SEEN) && !step) add(op);
    child |= SEEN;  // what an operator runs inside is its implementation
  }
  stack.contexts.push_back(child);
  return std::make_unique<Frame>(g, stack.contexts.size() - 1, window);
}

void on_end(const at::RecordFunction&, at::ObserverContext* context) {
  auto* frame = static_cast<Frame*>(context);
  if (frame == nullptr || frame->generation != stack.generation || stack.contexts.size() <= frame->depth) return;
  stack.contexts.resize(frame->depth);
  if (frame->window && frame->generation == generation.load()) windows.fetch_add(1);  // whole windows only
}

// A named range (the grader's markers): torch's _RecordFunctionFast records only while a profiler is on.
struct Marker {
  explicit Marker(const char* n) : name(n), range(at::RecordScope::USER_SCOPE) {
    if (range.isActive()) range.before(std::string_view(name));  // (RecordFunction keeps the view)
  }
  std::string name;
  at::RecordFunction range;
};

void drop_marker(PyObject* capsule) {
  delete static_cast<Marker*>(PyCapsule_GetPointer(capsule, "torchgrade.marker"));  // (ends it if open)
}

PyObject* enter(PyObject*, PyObject* name) {
  const char* text = PyUnicode_AsUTF8(name);
  if (text == nullptr) return nullptr;
  return PyCapsule_New(new Marker(text), "torchgrade.marker", drop_marker);
}

PyObject* leave(PyObject*, PyObject* capsule) {
  auto* marker = static_cast<Marker*>(PyCapsule_GetPointer(capsule, "torchgrade.marker"));
  if (marker == nullptr) return nullptr;
  marker->range.end();
  Py_RETURN_NONE;
}

PyObject* arm(PyObject*, PyObject* args) {
  const char *window, *seen;
  PyObject* spaces;
  if (!PyArg_ParseTuple(args, "ssO!", &window, &seen, &PyTuple_Type, &spaces)) return nullptr;
  std::vector<std::string> parsed;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(spaces); ++i) {
    const char* s = PyUnicode_AsUTF8(PyTuple_GET_ITEM(spaces, i));
    if (s == nullptr) return nullptr;
    parsed.emplace_back(s);
  }
  armed.store(false);
  // (cleared by someone else: removing it again would print a warning into the student's output)
  if (registered && at::hasGlobalCallbacks()) at::removeCallback(handle);
  window_marker = window;
  seen_marker = seen;
  builtin = std::move(parsed);
  main_thread = std::this_thread::get_id();
  windows = 0;
  markers = 0;
  events = 0;
  {
    std::lock_guard<std::mutex> guard(names_lock);
    names.clear();
    named.clear();
  }
  generation.fetch_add(1);
  handle = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end).needsInputs(false));
  registered = true;
  armed.store(true, std::memory_order_release);
  Py_RETURN_NONE;
}

// (names, windows, markers, events, was armed): the watch stops; a second call finds it stopped.
PyObject* collect(PyObject*, PyObject*) {
  bool was = armed.exchange(false);
  if (registered && at::hasGlobalCallbacks()) at::removeCallback(handle);
  registered = false;
  PyObject* list = PyList_New(0);
  if (list == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> guard(names_lock);
    for (const auto& n : names) {
      PyObject* s = PyUnicode_FromString(n.c_str());
      if (s == nullptr || PyList_Append(list, s) < 0) {
        Py_XDECREF(s);
        Py_DECREF(list);
        return nullptr;
      }
      Py_DECREF(s);
    }
  }
  return Py_BuildValue("(NlllO)", list, windows.load(), markers.load(), events.load(), was ? Py_True : Py_False);
}

// The recorder's profile hook inside a call its mode saw (recorder._callbacks), with its commonest answer
// given here: while no student frame runs (state[0] is None), a builtin's call or return, a Python frame's
// return, and the call of a file all of whose code is installed (a True in `files`, provenance.files) need
// nothing; everything else goes to the Python hook, as sys.setprofile would send it. The stand-in makes
// hundreds of such events per operator, each a call of Python code otherwise.
const char* const EVENT_NAMES[] = {"call", "exception", "line", "return", "c_call", "c_exception", "c_return", "opcode"};
PyObject* event_names[8] = {};

int filtered(PyObject* obj, PyFrameObject* frame, int what, PyObject* arg) {
  PyObject* files = PyTuple_GET_ITEM(obj, 0);
  PyObject* hook = PyTuple_GET_ITEM(obj, 1);
  PyObject* state = PyTuple_GET_ITEM(obj, 2);
  if (PyList_GET_SIZE(state) == 1 && PyList_GET_ITEM(state, 0) == Py_None) {  // (a list emptied by anyone: all to Python)
    if (what != PyTrace_CALL) return 0;
    PyCodeObject* code = PyFrame_GetCode(frame);
    PyObject* known = PyDict_GetItemWithError(files, code->co_filename);  // (borrowed)
    Py_DECREF(code);
    if (known == Py_True) return 0;
    if (known == nullptr && PyErr_Occurred()) PyErr_Clear();
  }
  if (what < 0 || what > 7) return 0;
  PyObject* result = PyObject_CallFunctionObjArgs(hook, reinterpret_cast<PyObject*>(frame), event_names[what],
                                                  arg != nullptr ? arg : Py_None, nullptr);
  if (result == nullptr) {  // as sys.setprofile's own trampoline: a hook that raises is removed
    PyEval_SetProfile(nullptr, nullptr);
    return -1;
  }
  Py_DECREF(result);
  return 0;
}

// profile(files, hook, state): the filtered hook for this thread (sys.getprofile() then gives the triple).
PyObject* profile(PyObject*, PyObject* args) {
  PyObject *files, *hook, *state;
  if (!PyArg_ParseTuple(args, "O!OO!", &PyDict_Type, &files, &hook, &PyList_Type, &state)) return nullptr;
  if (PyList_GET_SIZE(state) != 1 || !PyCallable_Check(hook)) {
    PyErr_SetString(PyExc_ValueError, "profile(files, hook, [frame or None])");
    return nullptr;
  }
  for (int i = 0; i < 8; ++i) {
    if (event_names[i] == nullptr && (event_names[i] = PyUnicode_InternFromString(EVENT_NAMES[i])) == nullptr) return nullptr;
  }
  PyObject* triple = PyTuple_Pack(3, files, hook, state);
  if (triple == nullptr) return nullptr;
  PyEval_SetProfile(filtered, triple);  // (it holds its own reference)
  Py_DECREF(triple);
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"arm", arm, METH_VARARGS, "arm(window_marker, seen_marker, builtin_namespaces): watch from now on"},
    {"enter", enter, METH_O, "enter(name) -> token: a named range opens in this thread"},
    {"leave", leave, METH_O, "leave(token): that range closes"},
    {"collect", collect, METH_NOARGS, "collect() -> (names, windows, markers, events, armed): stop watching"},
    {"profile", profile, METH_VARARGS, "profile(files, hook, state): recorder._callbacks's hook, filtered here"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_torchgrade_observer", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__torchgrade_observer() { return PyModule_Create(&module); }
