/* framejit._C._hook: tail calls (tail_call.c). */
#ifndef FRAMEJIT_TAIL_CALL_H
#define FRAMEJIT_TAIL_CALL_H
#include <Python.h>

/* A continuation to run in place of the frame that returns it (a tail call).
 * Replacement code ends a graph break with `return tail_call(resume_fn, *args)`
 * instead of calling the continuation itself; the hook that ran the user's
 * frame then calls it after that frame is gone. So the continuation's frame
 * sits where the user's frame sat: a loop that breaks on every iteration keeps
 * one frame on the stack, and `inspect`/tracebacks see the user's depth. */

/* The function the trampoline is about to call: the hook returns that frame's
 * TailCall to the trampoline as is, so the C stack does not grow either. */
extern _Thread_local PyObject *tail_target;

int tail_call_init(void);

/* Runs the TailCalls `result` names until one returns a value (steals `result`). */
PyObject *trampoline(PyObject *result);

/* tail_call(fn, *args): what replacement code returns, for the hook to call fn(*args) in the frame's place. */
PyObject *tail_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
