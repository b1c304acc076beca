/* Per-thread state of the frame hook: the callback, the C stack's floor, and
 * the data-stack chunks, in a slot owned by a capsule in the thread-state dict
 * (freed with the thread state) and reached through a TSS pointer. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__linux__)
#include <pthread.h>
#endif

#include "thread_slot.h"

Py_tss_t slot_tss = Py_tss_NEEDS_INIT;
static PyObject *slot_key;  /* our key in the thread-state dict */
static SwapCallback swap_off;  /* hook.c's swap_cb: turns a freed slot's callback off */

static uintptr_t thread_stack_floor(void)
{
#if defined(__linux__)
    pthread_attr_t attr;
    void *addr;
    size_t size;
    uintptr_t floor = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size >= 2 * C_STACK_MARGIN)
            floor = (uintptr_t)addr + C_STACK_MARGIN;
        pthread_attr_destroy(&attr);
    }
    return floor;
#else
    return 0;
#endif
}

static void slot_free(PyObject *capsule)
{
    ThreadSlot *slot = PyCapsule_GetPointer(capsule, "framejit.slot");
    PyObject *cb = swap_off(slot, NULL);
    spare_chunk_free(&slot->calls);
    spare_chunk_free(&slot->compiles);
    if (_PyThreadState_UncheckedGet() == slot->owner) {
        if (PyThread_tss_get(&slot_tss) == slot)
            PyThread_tss_set(&slot_tss, NULL);
        PyMem_RawFree(slot);
    } else {
        /* Cleared from another OS thread, whose TSS may still point here:
         * leak the few bytes rather than leave it dangling. */
        slot->owner = NULL;
    }
    Py_XDECREF(cb);
}

ThreadSlot *get_slot(void)
{
    ThreadSlot *slot = PyThread_tss_get(&slot_tss);
    PyThreadState *ts = PyThreadState_Get();
    if (slot != NULL && slot->owner == ts)
        return slot;
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "framejit: no thread-state dict");
        return NULL;
    }
    /* The TSS can be stale when several thread states share this OS thread. */
    PyObject *capsule = PyDict_GetItemWithError(dict, slot_key);
    if (capsule != NULL) {
        if ((slot = PyCapsule_GetPointer(capsule, "framejit.slot")) != NULL)
            PyThread_tss_set(&slot_tss, slot);
        return slot;
    }
    if (PyErr_Occurred())
        return NULL;
    slot = PyMem_RawCalloc(1, sizeof(ThreadSlot));
    if (slot == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    slot->owner = ts;
    slot->stack_floor = thread_stack_floor();
    slot->calls.bytes = CALL_CHUNK_BYTES;
    slot->compiles.bytes = COMPILE_CHUNK_BYTES;
    if ((capsule = PyCapsule_New(slot, "framejit.slot", slot_free)) == NULL) {
        PyMem_RawFree(slot);
        return NULL;
    }
    int err = PyDict_SetItem(dict, slot_key, capsule);
    Py_DECREF(capsule);
    if (err < 0)
        return NULL;
    PyThread_tss_set(&slot_tss, slot);
    return slot;
}

int thread_slot_init(SwapCallback swap)
{
    swap_off = swap;
    if (!PyThread_tss_is_created(&slot_tss) && PyThread_tss_create(&slot_tss) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "framejit: cannot create a TSS key");
        return -1;
    }
    if (slot_key == NULL && (slot_key = PyUnicode_InternFromString("framejit._C._hook.slot")) == NULL)
        return -1;
    return 0;
}
