/* Calls made on a data-stack chunk of their own.
 *
 * CPython 3.11 keeps Python frames in chunks of 16 KiB, mapped when a call
 * needs one more and unmapped as soon as its first frame returns. A loop that
 * calls across a chunk's end maps, faults in and unmaps a chunk on every call:
 * compiling a graph (inductor's lowering, sympy) then took 30% more CPU, most
 * of it page faults, depending only on how deep the stack stood when it began.
 * A compile run here starts at the bottom of a 1 MiB chunk instead.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define Py_BUILD_CORE
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE

#include "data_stack.h"

#define ROOMY_CHUNK_BYTES (1 << 20)

PyObject *vectorcall_with_room(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyThreadState *ts = PyThreadState_Get();
    _PyStackChunk *below = ts->datastack_chunk;
    if (below == NULL || ts->datastack_top == NULL)
        return PyObject_Vectorcall(callable, args, nargsf, kwnames);
    _PyStackChunk *chunk = PyMem_RawMalloc(ROOMY_CHUNK_BYTES);
    if (chunk == NULL)
        return PyObject_Vectorcall(callable, args, nargsf, kwnames);
    PyObject **top = ts->datastack_top, **limit = ts->datastack_limit;
    below->top = top - &below->data[0];  /* where a chunk popped above ours goes back to */
    chunk->previous = below;
    chunk->size = ROOMY_CHUNK_BYTES;
    chunk->top = 0;
    ts->datastack_chunk = chunk;
    ts->datastack_limit = (PyObject **)((char *)chunk + ROOMY_CHUNK_BYTES);
    /* Frames start after data[0], as in CPython's root chunk: popping the
     * first of them must not free a chunk that CPython did not allocate. */
    ts->datastack_top = &chunk->data[1];
    PyObject *result = PyObject_Vectorcall(callable, args, nargsf, kwnames);
    if (ts->datastack_chunk != chunk)
        return result;  /* (frames cannot outlive the call; were one left, its memory must stay) */
    ts->datastack_chunk = below;
    ts->datastack_top = top;
    ts->datastack_limit = limit;
    PyMem_RawFree(chunk);
    return result;
}
