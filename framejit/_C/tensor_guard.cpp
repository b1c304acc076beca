// The guard checks the guard program (guard_program.cpp) runs as single instructions: TENSOR_MATCH of every
// guarded tensor of a cache entry against a spec made once from the example tensors (make_spec), storage sharing
// included (STORAGE_SHARING); NO_HOOKS of every module an entry calls; and the value guards on one object's
// attributes and items (make_value_spec). Readable checks for failure messages stay in Python
// (framejit/guards.py); this is only the fast path.
#include <Python.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/python_variable.h>

#include "guard_checks.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace {

struct TensorSpec {
  PyTypeObject* type;
  c10::DispatchKeySet keys;  // with thread-local includes/excludes applied, as dispatch sees them
  at::ScalarType dtype;
  c10::Device device;
  bool requires_grad;
  std::vector<int64_t> sizes;    // -1: a dynamic dim, any size (the shape guards check it)
  std::vector<int64_t> strides;  // -1: a symbolic stride, any (the shape guards check it)
  int64_t storage_offset;        // -1: a symbolic offset, any (the shape guards check it)
  int64_t shares_with;  // the first earlier example with the same storage, or -1 (none, or no storage)
};

using Spec = std::vector<TensorSpec>;

// (unsafe_storage: a wrapper subclass's storage() throws; its own empty storage is distinct from any other)
const void* storage_id(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
}

// A set of storage ids, open addressing in a table of 2^k slots at least twice the count: one multiply and, as
// allocators hand out distinct addresses, almost always one probe per insert.
class StorageIdSet {
 public:
  explicit StorageIdSet(size_t count) {
    size_t slots = 64;
    while (slots < 2 * count) slots *= 2;
    shift_ = 64 - __builtin_ctzll(slots);
    table_ = slots <= kInline ? inline_ : (heap_ = std::vector<const void*>(slots)).data();
    mask_ = slots - 1;
    std::fill(table_, table_ + slots, nullptr);
  }
  // false where `id` is in the set already
  bool insert(const void* id) {
    size_t i = (reinterpret_cast<uintptr_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_;
    for (; table_[i] != nullptr; i = (i + 1) & mask_) {
      if (table_[i] == id) return false;
    }
    table_[i] = id;
    return true;
  }

 private:
  static constexpr size_t kInline = 1024;
  const void* inline_[kInline];
  std::vector<const void*> heap_;
  const void** table_;
  size_t mask_;
  int shift_;
};

// Each tensor shares storage with its example's `shares_with`, and the others' storages are all distinct.
bool same_storage_sharing(const Spec& spec, PyObject* const* tensors) {
  StorageIdSet alone(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    const void* id = storage_id(THPVariable_Unpack(tensors[i]));
    int64_t with = spec[i].shares_with;
    if (with >= 0) {
      if (id == nullptr || id != storage_id(THPVariable_Unpack(tensors[with]))) return false;
    } else if (id != nullptr && !alone.insert(id)) {
      return false;
    }
  }
  return true;
}

c10::DispatchKeySet effective_keys(const at::Tensor& t) {
  auto tls = c10::impl::tls_local_dispatch_key_set();
  return (t.key_set() | tls.included_) - tls.excluded_;
}

bool matches(const TensorSpec& s, PyObject* obj) {
  if (Py_TYPE(obj) != s.type || !THPVariable_Check(obj)) return false;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (t.scalar_type() != s.dtype || t.device() != s.device || t.requires_grad() != s.requires_grad) return false;
  if (effective_keys(t) != s.keys || (s.storage_offset >= 0 && t.storage_offset() != s.storage_offset)) return false;
  if (t.dim() != static_cast<int64_t>(s.sizes.size())) return false;
  auto sizes = t.sizes();
  auto strides = t.strides();
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    if (s.sizes[i] >= 0 && sizes[i] != s.sizes[i]) return false;
  }
  for (size_t i = 0; i < s.strides.size(); ++i) {
    if (s.strides[i] >= 0 && strides[i] != s.strides[i]) return false;
  }
  return true;
}

void free_spec(PyObject* capsule) {
  delete static_cast<Spec*>(PyCapsule_GetPointer(capsule, "framejit.TensorSpec"));
}

// Sets entries[d] = -1 for each dim d listed in dims[i] (a list per example, or None for no list at all).
bool mark_any(PyObject* dims_per_example, Py_ssize_t i, std::vector<int64_t>& entries) {
  PyObject* dims = dims_per_example == Py_None ? nullptr : PyList_GET_ITEM(dims_per_example, i);
  if (dims == nullptr || !PyList_Check(dims)) return true;
  for (Py_ssize_t k = 0; k < PyList_GET_SIZE(dims); ++k) {
    int64_t d = PyLong_AsLongLong(PyList_GET_ITEM(dims, k));
    if (d < 0 || d >= static_cast<int64_t>(entries.size())) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "make_spec: dynamic dim out of range");
      return false;
    }
    entries[d] = -1;
  }
  return true;
}

bool per_example(PyObject* lists, PyObject* examples) {
  return lists == Py_None || (PyList_Check(lists) && PyList_GET_SIZE(lists) == PyList_GET_SIZE(examples));
}

// make_spec(examples, dynamic_dims=None, dynamic_strides=None, dynamic_offsets=None): dynamic_dims[i] lists the
// dims of examples[i] whose size is symbolic, dynamic_strides[i] those whose stride is, dynamic_offsets the
// indices of the examples whose storage offset is; every other size, stride and offset is checked.
PyObject* make_spec(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* examples = nargs > 0 ? args[0] : nullptr;
  PyObject* dynamic = nargs > 1 ? args[1] : Py_None;
  PyObject* dynamic_strides = nargs > 2 ? args[2] : Py_None;
  PyObject* dynamic_offsets = nargs > 3 ? args[3] : Py_None;
  if (nargs < 1 || nargs > 4 || !PyList_Check(examples) || !per_example(dynamic, examples) ||
      !per_example(dynamic_strides, examples) || (dynamic_offsets != Py_None && !PyList_Check(dynamic_offsets))) {
    PyErr_SetString(PyExc_TypeError, "make_spec(list of tensors, dynamic dims per tensor or None, dynamic strides "
                    "per tensor or None, indices of the tensors of symbolic storage offset or None)");
    return nullptr;
  }
  auto spec = new Spec();
  std::unordered_map<const void*, Py_ssize_t> first_with_storage;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(examples); ++i) {
    PyObject* obj = PyList_GET_ITEM(examples, i);
    if (!THPVariable_Check(obj)) {
      delete spec;
      PyErr_SetString(PyExc_TypeError, "make_spec expects tensors");
      return nullptr;
    }
    const at::Tensor& t = THPVariable_Unpack(obj);
    TensorSpec ts{Py_TYPE(obj), effective_keys(t), t.scalar_type(), t.device(), t.requires_grad(),
                  t.sizes().vec(), t.strides().vec(), t.storage_offset(), -1};
    if (const void* id = storage_id(t)) {
      auto first = first_with_storage.emplace(id, i).first;
      if (first->second != i) ts.shares_with = first->second;
    }
    if (!mark_any(dynamic, i, ts.sizes) || !mark_any(dynamic_strides, i, ts.strides)) {
      delete spec;
      return nullptr;
    }
    spec->push_back(std::move(ts));
  }
  for (Py_ssize_t k = 0; dynamic_offsets != Py_None && k < PyList_GET_SIZE(dynamic_offsets); ++k) {
    int64_t i = PyLong_AsLongLong(PyList_GET_ITEM(dynamic_offsets, k));
    if (i < 0 || i >= static_cast<int64_t>(spec->size())) {
      delete spec;
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "make_spec: dynamic offset index out of range");
      return nullptr;
    }
    (*spec)[i].storage_offset = -1;
  }
  return PyCapsule_New(spec, "framejit.TensorSpec", free_spec);
}

int tensors_match_spec(PyObject* capsule, PyObject* const* tensors, Py_ssize_t n) {
  auto spec = static_cast<Spec*>(PyCapsule_GetPointer(capsule, "framejit.TensorSpec"));
  if (spec == nullptr) return -1;
  if (static_cast<size_t>(n) != spec->size()) {
    PyErr_SetString(PyExc_TypeError, "guard program: wrong number of tensors for this spec");
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!matches((*spec)[i], tensors[i])) return 0;
  }
  return n < 2 || same_storage_sharing(*spec, tensors);
}

PyObject* as_bool(int result) {
  if (result < 0) return nullptr;
  return Py_NewRef(result ? Py_True : Py_False);
}

// NO_HOOKS of the modules an entry calls, in one call: for each module, its backward hook dicts are empty, and
// where its flag has FORWARD_HOOKS its forward ones too, and where it has NO_FORWARD_ATTR no `forward` is in its
// instance dict. Each attribute is read from the instance dict, where nn.Module keeps it; one not found there
// takes the generic lookup, as the Python check's attribute read would.
constexpr char FORWARD_HOOKS = 1;
constexpr char NO_FORWARD_ATTR = 2;
PyObject* hook_names[4];  // _backward_hooks, _backward_pre_hooks, _forward_hooks, _forward_pre_hooks
PyObject* forward_name;

int truth_of_attribute(PyObject* module, PyObject* dict, PyObject* name) {
  PyObject* value = dict != nullptr ? PyDict_GetItemWithError(dict, name) : nullptr;  // borrowed
  if (value != nullptr) return PyObject_IsTrue(value);
  if (PyErr_Occurred()) return -1;
  value = PyObject_GetAttr(module, name);
  if (value == nullptr) return -1;
  int truth = PyObject_IsTrue(value);
  Py_DECREF(value);
  return truth;
}

int module_without_hooks(PyObject* module, char flags) {
  PyObject* dict = PyObject_GenericGetDict(module, nullptr);  // new reference; nullptr (and an error) if none
  if (dict == nullptr) PyErr_Clear();
  int result = 1;
  for (int i = 0; i < ((flags & FORWARD_HOOKS) ? 4 : 2) && result == 1; ++i) {
    int truth = truth_of_attribute(module, dict, hook_names[i]);
    result = truth < 0 ? -1 : !truth;
  }
  if (result == 1 && (flags & NO_FORWARD_ATTR)) {
    if (dict == nullptr) {
      PyErr_SetString(PyExc_AttributeError, "modules_without_hooks: a module without an instance __dict__");
      result = -1;
    } else {
      int found = PyDict_Contains(dict, forward_name);
      result = found < 0 ? -1 : !found;
    }
  }
  Py_XDECREF(dict);
  return result;
}

int all_without_hooks(const char* flags, PyObject* const* modules, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; ++i) {
    int ok = module_without_hooks(modules[i], flags[i]);
    if (ok <= 0) return ok;
  }
  return 1;
}

PyObject* modules_without_hooks(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || !PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != nargs - 1) {
    PyErr_SetString(PyExc_TypeError, "modules_without_hooks(flags: one byte per module, *modules)");
    return nullptr;
  }
  return as_bool(all_without_hooks(PyBytes_AS_STRING(args[0]), args + 1, nargs - 1));
}

// The value guards on one object's attributes and items (and the keys it must not have), in one call: spec is
// made once (make_value_spec) from a tuple of (how, name or key, mode, expected, type). how: 0 obj.name, 1 obj[key] (read as the Python check reads
// them, by the generic lookups), 2 `key not in obj`. mode: 0 the value is of exactly `type` and == expected;
// 1 it is expected; 2 it is what the weak reference `expected` refers to; 3 it is of exactly `type` and its
// __code__ is expected (a function by its code). A read that raises makes the call raise (a miss).
enum How { ATTRIBUTE = 0, ITEM = 1, ABSENT_KEY = 2 };
enum Mode { EQUAL = 0, IDENTICAL = 1, WEAKLY_IDENTICAL = 2, SAME_CODE = 3 };
PyObject* code_name;

int value_matches(PyObject* value, long mode, PyObject* expected, PyObject* type) {
  switch (mode) {
    case EQUAL:
      return reinterpret_cast<PyObject*>(Py_TYPE(value)) == type ? PyObject_RichCompareBool(value, expected, Py_EQ)
                                                                  : 0;
    case IDENTICAL:
      return value == expected;
    case WEAKLY_IDENTICAL:
      return PyWeakref_Check(expected) && PyWeakref_GET_OBJECT(expected) == value;
    case SAME_CODE: {
      if (reinterpret_cast<PyObject*>(Py_TYPE(value)) != type) return 0;
      PyObject* code = PyObject_GetAttr(value, code_name);
      if (code == nullptr) return -1;
      int same = code == expected;
      Py_DECREF(code);
      return same;
    }
  }
  PyErr_SetString(PyExc_ValueError, "values_match: unknown mode");
  return -1;
}

struct ValueCheck {
  long how, mode;
  PyObject* name;  // the references below are the spec's own
  PyObject* expected;
  PyObject* type;
};
using ValueSpec = std::vector<ValueCheck>;

void free_value_spec(PyObject* capsule) {
  auto spec = static_cast<ValueSpec*>(PyCapsule_GetPointer(capsule, "framejit.ValueSpec"));
  for (ValueCheck& c : *spec) {
    Py_DECREF(c.name);
    Py_DECREF(c.expected);
    Py_DECREF(c.type);
  }
  delete spec;
}

// make_value_spec(entries) -> the spec values_match reads, made once per entry (the tuple checked and parsed here,
// not on every call)
PyObject* make_value_spec(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1 || !PyTuple_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "make_value_spec(tuple of (how, name, mode, expected, type))");
    return nullptr;
  }
  auto spec = new ValueSpec();
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[0]); ++i) {
    PyObject* entry = PyTuple_GET_ITEM(args[0], i);
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 5) {
      PyErr_SetString(PyExc_TypeError, "make_value_spec: each entry is (how, name, mode, expected, type)");
    } else {
      long how = PyLong_AsLong(PyTuple_GET_ITEM(entry, 0)), mode = PyLong_AsLong(PyTuple_GET_ITEM(entry, 2));
      if (!PyErr_Occurred() && (how < ATTRIBUTE || how > ABSENT_KEY || mode < EQUAL || mode > SAME_CODE)) {
        PyErr_SetString(PyExc_ValueError, "make_value_spec: unknown how or mode");
      }
      if (!PyErr_Occurred()) {
        PyObject *name = PyTuple_GET_ITEM(entry, 1), *expected = PyTuple_GET_ITEM(entry, 3),
                 *type = PyTuple_GET_ITEM(entry, 4);
        Py_INCREF(name);
        Py_INCREF(expected);
        Py_INCREF(type);
        spec->push_back({how, mode, name, expected, type});
        continue;
      }
    }
    PyObject* capsule = PyCapsule_New(spec, "framejit.ValueSpec", free_value_spec);  // frees what was taken
    Py_XDECREF(capsule);
    return nullptr;
  }
  return PyCapsule_New(spec, "framejit.ValueSpec", free_value_spec);
}

int values_match_spec(PyObject* capsule, PyObject* obj) {
  auto spec = static_cast<ValueSpec*>(PyCapsule_GetPointer(capsule, "framejit.ValueSpec"));
  if (spec == nullptr) return -1;
  for (const ValueCheck& c : *spec) {
    int ok;
    if (c.how == ABSENT_KEY) {
      int found = PySequence_Contains(obj, c.name);
      ok = found < 0 ? -1 : !found;
    } else {
      PyObject* value = c.how == ATTRIBUTE ? PyObject_GetAttr(obj, c.name) : PyObject_GetItem(obj, c.name);
      if (value == nullptr) return -1;
      ok = value_matches(value, c.mode, c.expected, c.type);
      Py_DECREF(value);
    }
    if (ok <= 0) return ok;
  }
  return 1;
}

PyObject* values_match(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "values_match(spec, obj)");
    return nullptr;
  }
  return as_bool(values_match_spec(args[0], args[1]));
}

PyMethodDef methods[] = {
    {"make_spec", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(make_spec)), METH_FASTCALL,
     "make_spec(list of example tensors, dynamic dims of each or None, dynamic strides of each or None) -> spec"},
    {"modules_without_hooks", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(modules_without_hooks)),
     METH_FASTCALL,
     "modules_without_hooks(flags, *modules) -> bool: NO_HOOKS of each module (flags: a byte each, 1: forward hook "
     "dicts too, 2: no instance `forward`)"},
    {"make_value_spec", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(make_value_spec)),
     METH_FASTCALL, "make_value_spec(entries: (how, name or key, mode, expected, type) each) -> spec"},
    {"values_match", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(values_match)), METH_FASTCALL,
     "values_match(spec, obj) -> bool: the value guards of obj's attributes and items, and keys it must not have "
     "(see tensor_guard.cpp)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tensor_guard", "Guards in C++: TENSOR_MATCH, NO_HOOKS, grouped value guards and the guard program", -1,
                      methods};

}  // namespace

namespace framejit {
int tensors_match(PyObject* spec, PyObject* const* tensors, Py_ssize_t n) {
  return tensors_match_spec(spec, tensors, n);
}
int modules_without_hooks(const char* flags, PyObject* const* modules, Py_ssize_t n) {
  return all_without_hooks(flags, modules, n);
}
int values_match(PyObject* spec, PyObject* obj) { return values_match_spec(spec, obj); }
}  // namespace framejit

PyMODINIT_FUNC PyInit__tensor_guard() {
  const char* names[4] = {"_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks"};
  for (int i = 0; i < 4; ++i) {
    hook_names[i] = PyUnicode_InternFromString(names[i]);
    if (hook_names[i] == nullptr) return nullptr;
  }
  forward_name = PyUnicode_InternFromString("forward");
  code_name = PyUnicode_InternFromString("__code__");
  if (forward_name == nullptr || code_name == nullptr) return nullptr;
  PyObject* m = PyModule_Create(&module);
  if (m == nullptr || framejit::add_guard_program(m) < 0) {
    Py_XDECREF(m);
    return nullptr;
  }
  return m;
}
