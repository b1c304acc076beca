/* framejit._C._hook: each thread's callback and what goes with it (thread_slot.c). */
#ifndef FRAMEJIT_THREAD_SLOT_H
#define FRAMEJIT_THREAD_SLOT_H
#include <Python.h>
#include <stdint.h>

#include "data_stack.h"

/* Per-thread callback. The eval hook reads it through a TSS pointer (cheap);
 * the slot itself is owned by a capsule in the thread-state dict, so the
 * callback is released when the thread state is cleared at thread exit. */
typedef struct {
    PyObject *cb;            /* strong; NULL means None (off) */
    PyThreadState *owner;
    uintptr_t stack_floor;   /* see stack_overflow(); 0 when unknown */
    SpareChunk calls;        /* data-stack chunks (data_stack.c) for compiled calls, */
    SpareChunk compiles;     /* and for traces and compiles */
} ThreadSlot;

/* The slot of the thread running now, or NULL: read by the hook on every frame. */
extern Py_tss_t slot_tss;

/* With an eval-frame hook installed, CPython 3.11 evaluates every Python call
 * in a C call of its own (without one it inlines them), so a recursion limit
 * raised to a depth plain Python runs fine could overflow the C stack: below
 * this much headroom a new frame raises RecursionError instead of crashing. */
#define C_STACK_MARGIN (256 * 1024)
#if defined(__GNUC__)
#define STACK_HERE() ((uintptr_t)__builtin_frame_address(0))
#else
#define STACK_HERE() ((uintptr_t)0)  /* no check */
#endif

/* Sets a slot's callback (steals `cb`, NULL for off) and returns the old one: hook.c's, which also installs or
 * removes the frame hook. */
typedef PyObject *(*SwapCallback)(ThreadSlot *slot, PyObject *cb);

/* Creates the TSS key and the thread-state dict key; `swap` is called to switch a slot's callback off when the
 * slot is freed. -1 with an error set on failure. */
int thread_slot_init(SwapCallback swap);

/* This thread state's slot, created on first use; NULL with an error set on failure. */
ThreadSlot *get_slot(void);


#endif
