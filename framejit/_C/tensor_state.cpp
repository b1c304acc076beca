// What a compiled graph's call may have to undo: a snapshot of the small inputs it writes, taken before each call
// (framejit/rerun.py, checking_writes). One call copies the bytes of every such CPU tensor into one buffer and
// notes every input's version, without the dispatcher's cost per tensor (a ResNet's batch-norm statistics are
// three tensors per layer, written by every training step).
#include <Python.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <memory>
#include <vector>

namespace {

struct Snapshot {
  std::vector<char> bytes;
  std::vector<int64_t> offsets;   // per input: where its bytes start in `bytes`, or -1 (not kept)
  std::vector<int64_t> nbytes;
  std::vector<int64_t> versions;   // per input, before the call
  std::vector<Py_ssize_t> tracked;  // small inputs autograd tracks: Python clones them, history included
};

void free_snapshot(PyObject* capsule) {
  delete static_cast<Snapshot*>(PyCapsule_GetPointer(capsule, "framejit.Snapshot"));
}

Snapshot* unpack_snapshot(PyObject* capsule) {
  return static_cast<Snapshot*>(PyCapsule_GetPointer(capsule, "framejit.Snapshot"));
}

// the bytes a dense, non-overlapping tensor's elements occupy: one block, whatever its strides
// (not a tensor subclass with Python-defined sizes or storage: those are copied with torch ops)
bool copyable(const at::Tensor& t) {
  auto impl = t.unsafeGetTensorImpl();
  return !impl->is_python_dispatch() && t.device().is_cpu() && t.layout() == at::kStrided && !t.is_neg() && !t.is_conj() &&
         impl->unsafe_storage().data() != nullptr && t.is_non_overlapping_and_dense();
}

const char* first_byte(const at::Tensor& t) {
  return static_cast<const char*>(t.unsafeGetTensorImpl()->unsafe_storage().data()) +
         t.storage_offset() * t.element_size();
}

bool all_tensors(PyObject* list) {
  if (!PyList_Check(list)) return false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i) {
    if (!THPVariable_Check(PyList_GET_ITEM(list, i))) return false;
  }
  return true;
}

// take(inputs, limit, grad_mode) -> snapshot, or None where a small input it would copy is not a dense CPU tensor
// (the caller copies with torch ops then). Small: at most `limit` elements; tracked: requires grad in grad mode.
PyObject* take(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 3 || !all_tensors(args[0])) {
    PyErr_SetString(PyExc_TypeError, "take(list of tensors, limit, grad_mode)");
    return nullptr;
  }
  int64_t limit = PyLong_AsLongLong(args[1]);
  if (limit == -1 && PyErr_Occurred()) return nullptr;
  bool grad_mode = PyObject_IsTrue(args[2]);
  auto snap = std::make_unique<Snapshot>();
  Py_ssize_t n = PyList_GET_SIZE(args[0]);
  snap->offsets.assign(n, -1);
  snap->nbytes.assign(n, 0);
  snap->versions.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const at::Tensor& t = THPVariable_Unpack(PyList_GET_ITEM(args[0], i));
    snap->versions[i] = t._version();
    if (t.numel() > limit) continue;
    if (grad_mode && t.requires_grad()) {
      snap->tracked.push_back(i);
      continue;
    }
    if (!copyable(t)) Py_RETURN_NONE;
    snap->offsets[i] = static_cast<int64_t>(snap->bytes.size());
    snap->nbytes[i] = t.numel() * t.element_size();
    snap->bytes.insert(snap->bytes.end(), first_byte(t), first_byte(t) + snap->nbytes[i]);
  }
  PyObject* capsule = PyCapsule_New(snap.get(), "framejit.Snapshot", free_snapshot);
  if (capsule != nullptr) snap.release();
  return capsule;
  END_HANDLE_TH_ERRORS
}

// tracked(snapshot) -> the positions of the small inputs autograd tracks
PyObject* tracked(PyObject*, PyObject* capsule) {
  HANDLE_TH_ERRORS
  Snapshot* snap = unpack_snapshot(capsule);
  if (snap == nullptr) return nullptr;
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(snap->tracked.size()));
  for (size_t k = 0; out != nullptr && k < snap->tracked.size(); ++k) {
    PyList_SET_ITEM(out, k, PyLong_FromSsize_t(snap->tracked[k]));
  }
  return out;
  END_HANDLE_TH_ERRORS
}

// moved(snapshot, inputs) -> the positions whose version counter moved since the snapshot
PyObject* moved(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  Snapshot* snap = nargs == 2 ? unpack_snapshot(args[0]) : nullptr;
  if (snap == nullptr || !all_tensors(args[1]) ||
      PyList_GET_SIZE(args[1]) != static_cast<Py_ssize_t>(snap->versions.size())) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "moved(snapshot, the same list of tensors)");
    return nullptr;
  }
  PyObject* out = PyList_New(0);
  for (Py_ssize_t i = 0; out != nullptr && i < PyList_GET_SIZE(args[1]); ++i) {
    if (THPVariable_Unpack(PyList_GET_ITEM(args[1], i))._version() != snap->versions[i]) {
      PyObject* index = PyLong_FromSsize_t(i);
      if (index == nullptr || PyList_Append(out, index) < 0) Py_CLEAR(out);
      Py_XDECREF(index);
    }
  }
  return out;
  END_HANDLE_TH_ERRORS
}

// restore(snapshot, inputs, i) -> whether input i was kept; if so its bytes are put back (its version moves, as
// a copy_ would move it)
PyObject* restore(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  Snapshot* snap = nargs == 3 ? unpack_snapshot(args[0]) : nullptr;
  Py_ssize_t i = nargs == 3 ? PyLong_AsSsize_t(args[2]) : -1;
  if (snap == nullptr || !all_tensors(args[1]) || i < 0 || i >= static_cast<Py_ssize_t>(snap->offsets.size()) ||
      PyList_GET_SIZE(args[1]) != static_cast<Py_ssize_t>(snap->offsets.size())) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "restore(snapshot, the same list of tensors, position)");
    return nullptr;
  }
  if (snap->offsets[i] < 0) Py_RETURN_FALSE;
  const at::Tensor& t = THPVariable_Unpack(PyList_GET_ITEM(args[1], i));
  if (!copyable(t) || t.numel() * t.element_size() != snap->nbytes[i]) Py_RETURN_FALSE;
  std::memcpy(const_cast<char*>(first_byte(t)), snap->bytes.data() + snap->offsets[i], snap->nbytes[i]);
  t.unsafeGetTensorImpl()->bump_version();
  Py_RETURN_TRUE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"take", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(take)), METH_FASTCALL,
     "take(inputs, limit, grad_mode) -> snapshot or None"},
    {"tracked", tracked, METH_O, "tracked(snapshot) -> positions of the small inputs autograd tracks"},
    {"moved", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(moved)), METH_FASTCALL,
     "moved(snapshot, inputs) -> positions whose version moved"},
    {"restore", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(restore)), METH_FASTCALL,
     "restore(snapshot, inputs, position) -> whether it was kept and is put back"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tensor_state", "snapshots of small inputs a graph writes", -1,
                      methods};

}  // namespace

PyMODINIT_FUNC PyInit__tensor_state() { return PyModule_Create(&module); }
