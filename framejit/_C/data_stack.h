/* framejit._C._hook: calls made on a data-stack chunk of their own (data_stack.c). */
#ifndef FRAMEJIT_DATA_STACK_H
#define FRAMEJIT_DATA_STACK_H
#include <Python.h>

/* A thread's chunk, kept between calls: allocated on first use, `busy` while a call runs on it. */
typedef struct {
    void *chunk;   /* _PyStackChunk */
    size_t bytes;
    int busy;
} SpareChunk;

#define CALL_CHUNK_BYTES (256 * 1024)   /* a compiled call: guards, replacement code, the graph's wrappers */
#define COMPILE_CHUNK_BYTES (1 << 20)   /* a trace or a backend's compile */

/* PyObject_Vectorcall(callable, args, nargsf, kwnames), its Python frames
 * pushed from the bottom of `spare`'s chunk; a plain call where that chunk is
 * in use already (a nested call) or cannot be allocated. */
PyObject *vectorcall_on_spare(SpareChunk *spare, PyObject *callable, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames);

/* Frees the chunk (the thread is going away); kept if a call still runs on it. */
void spare_chunk_free(SpareChunk *spare);

#endif
