/* Calls made on a data-stack chunk of their own.
 *
 * CPython 3.11 keeps Python frames in chunks of 16 KiB, mapped when a call
 * needs one more and unmapped as soon as its first frame returns. A loop that
 * calls across a chunk's end maps, faults in and unmaps a chunk on every call:
 * compiling a graph (inductor's lowering, sympy) then took 30% more CPU, most
 * of it page faults, depending only on how deep the stack stood when it began,
 * and a compiled call standing there paid it on every call. Traces, compiles
 * and compiled calls start at the bottom of a roomy chunk of the thread's own
 * instead, which stays mapped between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define Py_BUILD_CORE
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE

#include "data_stack.h"

PyObject *vectorcall_on_spare(SpareChunk *spare, PyObject *callable, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames)
{
    PyThreadState *ts = PyThreadState_Get();
    _PyStackChunk *below = ts->datastack_chunk;
    if (spare->busy || below == NULL || ts->datastack_top == NULL)
        return PyObject_Vectorcall(callable, args, nargsf, kwnames);
    if (spare->chunk == NULL && (spare->chunk = PyMem_RawMalloc(spare->bytes)) == NULL)
        return PyObject_Vectorcall(callable, args, nargsf, kwnames);
    _PyStackChunk *chunk = spare->chunk;
    PyObject **top = ts->datastack_top, **limit = ts->datastack_limit;
    below->top = top - &below->data[0];  /* where a chunk popped above ours goes back to */
    chunk->previous = below;
    chunk->size = spare->bytes;
    chunk->top = 0;
    ts->datastack_chunk = chunk;
    ts->datastack_limit = (PyObject **)((char *)chunk + spare->bytes);
    /* Frames start after data[0], as in CPython's root chunk: popping the
     * first of them must not free a chunk that CPython did not allocate. */
    ts->datastack_top = &chunk->data[1];
    spare->busy = 1;
    PyObject *result = PyObject_Vectorcall(callable, args, nargsf, kwnames);
    spare->busy = 0;
    if (ts->datastack_chunk != chunk) {
        spare->chunk = NULL;  /* (frames cannot outlive the call; were one left, its memory must stay) */
        return result;
    }
    ts->datastack_chunk = below;
    ts->datastack_top = top;
    ts->datastack_limit = limit;
    return result;
}

void spare_chunk_free(SpareChunk *spare)
{
    if (!spare->busy)
        PyMem_RawFree(spare->chunk);
    spare->chunk = NULL;
}
