// A cache entry's guard as one C++ object: a straight-line program over registers, run by the frame hook as
// guard(fn, *argument_slots) -> bool. framejit/guard_program.py builds it from the guards' records.
//
// Registers 0..nargs-1 hold the call's arguments (the function, then its argument slots). A load instruction
// reads a value from a register (an attribute, an item, a free variable...) into a new register; a check
// instruction tests registers and stops the program with False when the test fails. An exception raised by a
// load or a check propagates: the hook counts it as a failed guard. Values are loaded where first needed, so a
// program that fails early reads nothing more.
//
// An instruction is made in Python as (op, out, in, obj, regs): `out` the register a load writes (-1 for a
// check), `in` the register it reads (-1 where none), `obj` the op's constant (a name, a key, a type, a spec,
// a callable...), `regs` the further registers a check reads. make_guard_program checks every register is
// written before it is read, and written once, so running the program needs no checks of its own.
#include <Python.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "guard_checks.h"

namespace {

enum Op {
  // loads: r[out] = ...
  LOAD_ATTR = 0,          // r[in].obj
  LOAD_GENERIC_ATTR = 1,  // object.__getattribute__(r[in], obj)
  LOAD_ITEM = 2,          // r[in][obj]
  LOAD_CALL = 3,          // obj(r[in])
  LOAD_CONST = 4,         // obj
  LOAD_GLOBALS = 5,       // r[in].__globals__
  LOAD_FREE = 6,          // r[in].__closure__[obj].cell_contents
  LOAD_CELL_CONTENTS = 7, // r[in].cell_contents
  // checks
  TYPE_IS = 10,           // type(r[in]) is obj
  IS = 11,                // r[in] is obj
  ID_IS = 12,             // id(r[in]) == obj
  EQUALS = 13,            // r[in] == obj
  FALSY = 14,             // not r[in]
  LIST_EQUALS = 15,       // list(r[in]) == obj
  LEN_IS = 16,            // len(r[in]) == obj
  CODE_IS = 17,           // r[in].__code__ is obj
  NO_ATTR = 18,           // not hasattr(r[in], obj)
  NO_KEY = 19,            // obj not in r[in]
  SAME = 20,              // r[in] is r[regs[0]]
  NOT_SAME = 21,          // r[in] is not r[regs[0]]
  ALL_DISTINCT = 22,      // the r[regs] are distinct objects
  TENSORS = 23,           // TENSOR_MATCH and storage sharing of r[regs], against the spec obj
  VALUES = 24,            // values_match(obj, r[in])
  NO_HOOKS = 25,          // modules_without_hooks(obj, *r[regs])
  CALL_IS = 26,           // obj = (f, args, expected): f(*args) is expected
  CALL_EQUALS = 27,       // obj = (f, args, expected): f(*args) == expected
  PY_CHECK = 28,          // obj(*r[regs]) is true
};

struct Instr {
  int op, out, in;
  PyObject* obj;  // borrowed from the program's instruction tuple
  std::vector<int> regs;
  Py_ssize_t number;  // LOAD_FREE's index, ID_IS's id, LEN_IS's length
  PyObject *fn, *args, *expected;  // CALL_IS, CALL_EQUALS
};

struct GuardProgram {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* weakrefs;
  PyObject* instructions;  // the tuple it was made from: owns every object the Instrs borrow
  std::vector<Instr>* program;
  int nargs, nregs;
};

PyObject *globals_name, *closure_name, *cell_contents_name, *code_name, *getattribute_name;
PyObject* object_getattribute;  // object.__getattribute__

// base.name. Where the class's __getattribute__ is object's (a module's is: it only adds __getattr__), its
// generic lookup is called straight away, and __getattr__ (through the full lookup) only when that fails.
PyObject* load_attr(PyObject* base, PyObject* name) {
  PyTypeObject* type = Py_TYPE(base);
  if (type->tp_getattro != PyObject_GenericGetAttr && _PyType_Lookup(type, getattribute_name) == object_getattribute) {
    PyObject* value = PyObject_GenericGetAttr(base, name);
    if (value != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return value;
    PyErr_Clear();
  }
  return PyObject_GetAttr(base, name);
}

PyObject* load(const Instr& i, PyObject* const* r) {
  PyObject* base = i.in >= 0 ? r[i.in] : nullptr;
  switch (i.op) {
    case LOAD_ATTR:
      return load_attr(base, i.obj);
    case LOAD_GENERIC_ATTR:
      return PyObject_GenericGetAttr(base, i.obj);
    case LOAD_ITEM:
      if (PyDict_CheckExact(base)) {
        PyObject* value = PyDict_GetItemWithError(base, i.obj);
        if (value != nullptr) return Py_NewRef(value);
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, i.obj);
        return nullptr;
      }
      return PyObject_GetItem(base, i.obj);
    case LOAD_CALL:
      return PyObject_CallOneArg(i.obj, base);
    case LOAD_CONST:
      return Py_NewRef(i.obj);
    case LOAD_GLOBALS:
      return PyFunction_Check(base) ? Py_NewRef(PyFunction_GET_GLOBALS(base)) : PyObject_GetAttr(base, globals_name);
    case LOAD_FREE: {
      PyObject* closure = PyFunction_Check(base) ? Py_XNewRef(PyFunction_GET_CLOSURE(base))
                                                 : PyObject_GetAttr(base, closure_name);
      if (closure == nullptr) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "guard: the function has no closure");
        return nullptr;
      }
      PyObject* cell = PySequence_GetItem(closure, i.number);
      Py_DECREF(closure);
      if (cell == nullptr) return nullptr;
      PyObject* value = PyObject_GetAttr(cell, cell_contents_name);
      Py_DECREF(cell);
      return value;
    }
    case LOAD_CELL_CONTENTS:
      return PyObject_GetAttr(base, cell_contents_name);
  }
  PyErr_SetString(PyExc_SystemError, "guard program: unknown load");
  return nullptr;
}

int list_equals(PyObject* value, PyObject* expected) {
  PyObject* items = PySequence_List(value);
  if (items == nullptr) return -1;
  int same = PyObject_RichCompareBool(items, expected, Py_EQ);
  Py_DECREF(items);
  return same;
}

int call_check(const Instr& i) {
  PyObject* result = PyObject_Call(i.fn, i.args, nullptr);
  if (result == nullptr) return -1;
  int ok = i.op == CALL_IS ? result == i.expected : PyObject_RichCompareBool(result, i.expected, Py_EQ);
  Py_DECREF(result);
  return ok;
}

// The registers `regs` name, gathered for a call taking them in a row (on the stack for up to kInline of them:
// the tensor and module checks run on every call).
class Gathered {
 public:
  Gathered(const std::vector<int>& regs, PyObject* const* r) : size_(regs.size()) {
    if (size_ > kInline) heap_.resize(size_);
    PyObject** items = data();
    for (size_t k = 0; k < size_; ++k) items[k] = r[regs[k]];
  }
  PyObject** data() { return size_ > kInline ? heap_.data() : inline_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInline = 128;
  size_t size_;
  PyObject* inline_[kInline];
  std::vector<PyObject*> heap_;
};

int check(const Instr& i, PyObject* const* r) {
  PyObject* value = i.in >= 0 ? r[i.in] : nullptr;
  switch (i.op) {
    case TYPE_IS:
      return reinterpret_cast<PyObject*>(Py_TYPE(value)) == i.obj;
    case IS:
      return value == i.obj;
    case ID_IS:
      return reinterpret_cast<Py_ssize_t>(value) == i.number;
    case EQUALS:
      return PyObject_RichCompareBool(value, i.obj, Py_EQ);
    case FALSY: {
      int truth = PyObject_IsTrue(value);
      return truth < 0 ? -1 : !truth;
    }
    case LIST_EQUALS:
      return list_equals(value, i.obj);
    case LEN_IS: {
      Py_ssize_t n = PyObject_Length(value);
      return n < 0 ? -1 : n == i.number;
    }
    case CODE_IS: {
      if (PyFunction_Check(value)) return PyFunction_GET_CODE(value) == i.obj;
      PyObject* code = PyObject_GetAttr(value, code_name);
      if (code == nullptr) return -1;
      int same = code == i.obj;
      Py_DECREF(code);
      return same;
    }
    case NO_ATTR: {
      PyObject* attr;
      int found = _PyObject_LookupAttr(value, i.obj, &attr);
      Py_XDECREF(attr);
      return found < 0 ? -1 : !found;
    }
    case NO_KEY: {
      int found = PySequence_Contains(value, i.obj);
      return found < 0 ? -1 : !found;
    }
    case SAME:
      return value == r[i.regs[0]];
    case NOT_SAME:
      return value != r[i.regs[0]];
    case ALL_DISTINCT:
      for (size_t a = 0; a < i.regs.size(); ++a) {
        for (size_t b = 0; b < a; ++b) {
          if (r[i.regs[a]] == r[i.regs[b]]) return 0;
        }
      }
      return 1;
    case TENSORS: {
      Gathered g(i.regs, r);
      return framejit::tensors_match(i.obj, g.data(), g.size());
    }
    case VALUES:
      return framejit::values_match(i.obj, value);
    case NO_HOOKS: {
      Gathered g(i.regs, r);
      return framejit::modules_without_hooks(PyBytes_AS_STRING(i.obj), g.data(), g.size());
    }
    case CALL_IS:
    case CALL_EQUALS:
      return call_check(i);
    case PY_CHECK: {
      Gathered g(i.regs, r);
      PyObject* result = PyObject_Vectorcall(i.obj, g.data(), g.size(), nullptr);
      if (result == nullptr) return -1;
      int truth = PyObject_IsTrue(result);
      Py_DECREF(result);
      return truth;
    }
  }
  PyErr_SetString(PyExc_SystemError, "guard program: unknown check");
  return -1;
}

constexpr int kInlineRegisters = 256;

PyObject* run(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* p = reinterpret_cast<GuardProgram*>(self);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (p->program == nullptr || nargs != p->nargs || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0)) {
    PyErr_Format(PyExc_TypeError, "guard program takes %d positional arguments, got %zd", p->nargs, nargs);
    return nullptr;
  }
  PyObject* inline_registers[kInlineRegisters];
  std::vector<PyObject*> heap_registers;
  PyObject** r = inline_registers;
  if (p->nregs > kInlineRegisters) {
    heap_registers.resize(p->nregs);
    r = heap_registers.data();
  }
  std::copy(args, args + nargs, r);  // borrowed: only the loaded registers are released below
  std::fill(r + nargs, r + p->nregs, nullptr);
  int ok = 1;
  for (const Instr& i : *p->program) {
    if (i.out >= 0) {
      r[i.out] = load(i, r);
      if (r[i.out] == nullptr) {
        ok = -1;
        break;
      }
    } else if ((ok = check(i, r)) <= 0) {
      break;
    }
  }
  for (int k = p->nargs; k < p->nregs; ++k) Py_XDECREF(r[k]);
  if (ok < 0) return nullptr;
  return Py_NewRef(ok ? Py_True : Py_False);
}

bool is_load(int op) { return op <= LOAD_CELL_CONTENTS; }

// Fills `instr` from one (op, out, in, obj, regs) tuple; false (an error set) if it is malformed or reads a
// register not yet written.
bool parse(PyObject* t, std::vector<bool>& written, Instr& instr) {
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5 || !PyTuple_Check(PyTuple_GET_ITEM(t, 4))) {
    PyErr_SetString(PyExc_TypeError, "make_guard_program: each instruction is (op, out, in, obj, regs)");
    return false;
  }
  instr.op = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
  instr.out = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
  instr.in = PyLong_AsLong(PyTuple_GET_ITEM(t, 2));
  instr.obj = PyTuple_GET_ITEM(t, 3);
  PyObject* regs = PyTuple_GET_ITEM(t, 4);
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(regs); ++k) instr.regs.push_back(PyLong_AsLong(PyTuple_GET_ITEM(regs, k)));
  if (PyErr_Occurred()) return false;
  int nregs = static_cast<int>(written.size());
  auto readable = [&](int reg) { return reg >= 0 && reg < nregs && written[reg]; };
  bool needs_in = instr.op != LOAD_CONST && instr.op != ALL_DISTINCT && instr.op != TENSORS &&
                  instr.op != NO_HOOKS && instr.op != CALL_IS && instr.op != CALL_EQUALS && instr.op != PY_CHECK;
  bool valid = (is_load(instr.op) || (instr.op >= TYPE_IS && instr.op <= PY_CHECK)) &&
               (needs_in ? readable(instr.in) : instr.in == -1) &&
               (is_load(instr.op) ? instr.out >= 0 && instr.out < nregs && !written[instr.out] : instr.out == -1);
  for (int reg : instr.regs) valid = valid && readable(reg);
  if ((instr.op == SAME || instr.op == NOT_SAME) && instr.regs.size() != 1) valid = false;
  if (instr.op == NO_HOOKS && (!PyBytes_Check(instr.obj) ||
                               PyBytes_GET_SIZE(instr.obj) != static_cast<Py_ssize_t>(instr.regs.size()))) {
    valid = false;
  }
  if (instr.op == LOAD_FREE || instr.op == ID_IS || instr.op == LEN_IS) {
    instr.number = PyLong_AsSsize_t(instr.obj);
    if (PyErr_Occurred()) return false;
  }
  if (instr.op == CALL_IS || instr.op == CALL_EQUALS) {
    valid = valid && PyTuple_Check(instr.obj) && PyTuple_GET_SIZE(instr.obj) == 3 &&
            PyTuple_Check(PyTuple_GET_ITEM(instr.obj, 1));
    if (valid) {
      instr.fn = PyTuple_GET_ITEM(instr.obj, 0);
      instr.args = PyTuple_GET_ITEM(instr.obj, 1);
      instr.expected = PyTuple_GET_ITEM(instr.obj, 2);
    }
  }
  if (!valid) {
    PyErr_Format(PyExc_ValueError, "make_guard_program: invalid instruction %R", t);
    return false;
  }
  if (instr.out >= 0) written[instr.out] = true;
  return true;
}

void dealloc(PyObject* self) {
  auto* p = reinterpret_cast<GuardProgram*>(self);
  PyObject_GC_UnTrack(self);
  if (p->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  Py_CLEAR(p->instructions);
  delete p->program;
  PyObject_GC_Del(self);
}

int traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<GuardProgram*>(self)->instructions);
  return 0;
}

PyTypeObject GuardProgramType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// make_guard_program(nargs, nregs, instructions) -> a GuardProgram
PyObject* make_guard_program(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyLong_Check(args[0]) || !PyLong_Check(args[1]) || !PyTuple_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "make_guard_program(nargs, nregs, tuple of instructions)");
    return nullptr;
  }
  long n_in = PyLong_AsLong(args[0]), n_regs = PyLong_AsLong(args[1]);
  if (n_in < 0 || n_regs < n_in || n_regs > (1 << 20)) {
    PyErr_SetString(PyExc_ValueError, "make_guard_program: bad register counts");
    return nullptr;
  }
  auto program = new std::vector<Instr>();
  std::vector<bool> written(n_regs, false);
  std::fill(written.begin(), written.begin() + n_in, true);
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(args[2]); ++k) {
    Instr instr{};
    if (!parse(PyTuple_GET_ITEM(args[2], k), written, instr)) {
      delete program;
      return nullptr;
    }
    program->push_back(std::move(instr));
  }
  auto* p = PyObject_GC_New(GuardProgram, &GuardProgramType);
  if (p == nullptr) {
    delete program;
    return nullptr;
  }
  p->vectorcall = run;
  p->weakrefs = nullptr;
  p->instructions = Py_NewRef(args[2]);
  p->program = program;
  p->nargs = static_cast<int>(n_in);
  p->nregs = static_cast<int>(n_regs);
  PyObject_GC_Track(p);
  return reinterpret_cast<PyObject*>(p);
}

PyMethodDef method = {"make_guard_program",
                      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(make_guard_program)),
                      METH_FASTCALL, "make_guard_program(nargs, nregs, instructions) -> guard(*args) -> bool"};

}  // namespace

namespace framejit {

int add_guard_program(PyObject* module) {
  GuardProgramType.tp_name = "framejit._C._tensor_guard.GuardProgram";
  GuardProgramType.tp_basicsize = sizeof(GuardProgram);
  GuardProgramType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  GuardProgramType.tp_doc = "A cache entry's guard: guard(fn, *argument_slots) -> bool";
  GuardProgramType.tp_dealloc = dealloc;
  GuardProgramType.tp_traverse = traverse;
  GuardProgramType.tp_call = PyVectorcall_Call;
  GuardProgramType.tp_vectorcall_offset = offsetof(GuardProgram, vectorcall);
  GuardProgramType.tp_weaklistoffset = offsetof(GuardProgram, weakrefs);
  globals_name = PyUnicode_InternFromString("__globals__");
  closure_name = PyUnicode_InternFromString("__closure__");
  cell_contents_name = PyUnicode_InternFromString("cell_contents");
  code_name = PyUnicode_InternFromString("__code__");
  getattribute_name = PyUnicode_InternFromString("__getattribute__");
  if (getattribute_name == nullptr) return -1;
  object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute_name);  // borrowed: object's lives forever
  if (globals_name == nullptr || closure_name == nullptr || cell_contents_name == nullptr || code_name == nullptr ||
      object_getattribute == nullptr || PyType_Ready(&GuardProgramType) < 0) {
    return -1;
  }
  PyObject* fn = PyCFunction_New(&method, nullptr);
  if (fn == nullptr || PyModule_AddObject(module, "make_guard_program", fn) < 0) {
    Py_XDECREF(fn);
    return -1;
  }
  Py_INCREF(&GuardProgramType);
  if (PyModule_AddObject(module, "GuardProgram", reinterpret_cast<PyObject*>(&GuardProgramType)) < 0) {
    Py_DECREF(&GuardProgramType);
    return -1;
  }
  return 0;
}

}  // namespace framejit
