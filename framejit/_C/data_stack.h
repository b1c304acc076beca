/* framejit._C._hook: calls made on a data-stack chunk of their own (data_stack.c). */
#ifndef FRAMEJIT_DATA_STACK_H
#define FRAMEJIT_DATA_STACK_H
#include <Python.h>

/* PyObject_Vectorcall(callable, args, nargsf, kwnames), its Python frames
 * pushed on a fresh data-stack chunk of ROOMY_CHUNK_BYTES. */
PyObject *vectorcall_with_room(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);

#endif
