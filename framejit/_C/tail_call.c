/* Tail calls: a continuation run in the place of the frame that returned it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "tail_call.h"

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *args;  /* tuple */
} TailCall;

static void tail_call_dealloc(TailCall *self)
{
    Py_XDECREF(self->fn);
    Py_XDECREF(self->args);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject TailCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framejit._C._hook.TailCall",
    .tp_basicsize = sizeof(TailCall),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)tail_call_dealloc,
};

_Thread_local PyObject *tail_target;

PyObject *trampoline(PyObject *result)
{
    while (result != NULL && Py_IS_TYPE(result, &TailCallType)) {
        TailCall *tc = (TailCall *)result;
        PyObject *saved = tail_target;
        tail_target = tc->fn;
        PyObject *next = PyObject_Call(tc->fn, tc->args, NULL);
        tail_target = saved;
        Py_DECREF(result);
        result = next;
    }
    return result;
}

PyObject *tail_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "tail_call(fn, *args)");
        return NULL;
    }
    TailCall *tc = PyObject_New(TailCall, &TailCallType);
    if (tc == NULL)
        return NULL;
    tc->fn = Py_NewRef(args[0]);
    if ((tc->args = PyTuple_New(nargs - 1)) == NULL) {
        Py_DECREF(tc);
        return NULL;
    }
    for (Py_ssize_t i = 1; i < nargs; i++)
        PyTuple_SET_ITEM(tc->args, i - 1, Py_NewRef(args[i]));
    return (PyObject *)tc;
}

int tail_call_init(void)
{
    return PyType_Ready(&TailCallType);
}
