// The checks of tensor_guard.cpp that a guard program (guard_program.cpp) runs as its own instructions.
// Each returns 1 (holds), 0 (does not) or -1 (an error is set).
#pragma once
#include <Python.h>

namespace framejit {

// TENSOR_MATCH of every guarded tensor and their storage sharing, against a make_spec capsule
int tensors_match(PyObject* spec, PyObject* const* tensors, Py_ssize_t n);
// NO_HOOKS of each module, `flags` one byte per module
int modules_without_hooks(const char* flags, PyObject* const* modules, Py_ssize_t n);
// the value guards on one object's attributes and items, against a make_value_spec capsule
int values_match(PyObject* spec, PyObject* obj);

// Adds the GuardProgram type and make_guard_program to the module (guard_program.cpp); -1 on error.
int add_guard_program(PyObject* module);

}  // namespace framejit
