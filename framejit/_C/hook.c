/* framejit._C._hook: the PEP 523 frame hook, and nothing else.
 *
 * Owns the per-thread callback, the per-code cache list / SKIP mark stored in
 * co_extra, running cache-entry guards and replacement functions from C, and
 * calling the Python callback on a miss. Tracing and policy live in Python.
 * CPython 3.11 only: it reads the _PyInterpreterFrame layout. Each thread's
 * callback lives in thread_slot.c, tail calls in tail_call.c, and the chunks
 * that compiles and compiled calls run on in data_stack.c.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define Py_BUILD_CORE
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE

#include "data_stack.h"
#include "tail_call.h"
#include "thread_slot.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "framejit._C._hook supports CPython 3.11 only"
#endif

#define SMALL_STACK 8
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif
#define NOT_PLAIN (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

static Py_ssize_t extra_index = -1;
static PyObject *SKIP;
static _PyFrameEvalFunction prev_eval;     /* foreign eval function to chain to, or NULL */
/* The frame handed to prev_eval: if prev_eval chains back to us with it, the
 * frame has had its turn and must run plainly, or the two hooks loop. */
static _Thread_local _PyInterpreterFrame *chaining;
static long n_hits, n_graph_hits, n_misses, n_guard_errors;  /* graph hits: of entries that run graphs */
static Py_ssize_t n_armed;  /* thread slots with a callback set */
static PyObject *swap_cb(ThreadSlot *slot, PyObject *cb);

static NOINLINE PyObject *stack_overflow(PyThreadState *ts, _PyInterpreterFrame *frame, int throw_flag)
{
    if (frame->owner != FRAME_OWNED_BY_THREAD)  /* generators: CPython recurses in C for them anyway */
        return _PyEval_EvalFrameDefault(ts, frame, throw_flag);
    PyErr_SetString(PyExc_RecursionError, "maximum recursion depth exceeded: the C stack is nearly full (under "
                    "framejit's frame hook each Python call takes C stack; lower sys.setrecursionlimit, or "
                    "raise the stack size: threading.stack_size, ulimit -s)");
    return NULL;
}

/* Hands back the disabled callback: restored only if no one set another meanwhile. */
static void restore_cb(ThreadSlot *slot, PyObject *cb)
{
    if (slot->cb == NULL)
        swap_cb(slot, cb);
    else
        Py_DECREF(cb);
}

static PyObject *eval_frame(PyThreadState *ts, _PyInterpreterFrame *frame, int throw_flag);

static PyObject *pass_through(PyThreadState *ts, _PyInterpreterFrame *frame, int throw_flag)
{
    _PyFrameEvalFunction prev = prev_eval;
    /* When prev is on top it called us: don't hand the frame back to it. */
    if (prev == NULL || prev == _PyInterpreterState_GetEvalFrameFunc(ts->interp))
        return _PyEval_EvalFrameDefault(ts, frame, throw_flag);
    _PyInterpreterFrame *saved = chaining;
    chaining = frame;
    PyObject *result = prev(ts, frame, throw_flag);
    chaining = saved;
    return result;
}

static PyInterpreterState *hooked_interp;  /* where ensure_installed last put us */

static void ensure_installed(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (cur == eval_frame)
        return;
    prev_eval = (cur == _PyEval_EvalFrameDefault) ? NULL : cur;
    hooked_interp = interp;
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
}

/* Hands the interpreter back the eval function it had before us (also from a
 * thread state being cleared, which may not be the current one). */
static void uninstall(void)
{
    if (hooked_interp != NULL && _PyInterpreterState_GetEvalFrameFunc(hooked_interp) == eval_frame)
        _PyInterpreterState_SetEvalFrameFunc(hooked_interp, prev_eval ? prev_eval : _PyEval_EvalFrameDefault);
}

/* Sets a slot's callback (steals `cb`, NULL for off) and returns the old one.
 * The hook is installed only while some thread has a callback: with any
 * eval-frame function installed CPython 3.11 stops inlining Python-to-Python
 * calls, and all the process's Python (the user's loop, the optimizer, a
 * backend compiling) runs up to 40% slower. */
static PyObject *swap_cb(ThreadSlot *slot, PyObject *cb)
{
    PyObject *old = slot->cb;
    slot->cb = cb;
    if (cb != NULL) {
        n_armed += old == NULL;
        ensure_installed();  /* (also when armed already: another hook may have replaced ours) */
    } else if (old != NULL && --n_armed == 0) {
        uninstall();
    }
    return old;
}

/* Whether `globals` is the namespace of a module in sys.modules (which holds it anyway). */
static int is_module_namespace(PyObject *globals)
{
    static PyObject *name_key;
    if (name_key == NULL && (name_key = PyUnicode_InternFromString("__name__")) == NULL)
        return -1;
    PyObject *name = PyDict_GetItemWithError(globals, name_key);
    if (name == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *mod = PyImport_GetModule(name);
    int is = mod != NULL && PyModule_Check(mod) && PyModule_GetDict(mod) == globals;
    Py_XDECREF(mod);
    return PyErr_Occurred() ? -1 : is;
}

/* memo = [closure, globals, function]: the replacement function for `code`,
 * rebuilt only when the frame's function has another closure or globals.
 * The memo sits in co_extra, which the garbage collector cannot see, so it
 * only keeps what outlives the code anyway: a module's globals and no closure.
 * A closure's cells (a model, the function itself) or exec'd globals (which
 * hold the function) would keep the code and all it compiled alive for good;
 * those calls make their function each time. */
static PyObject *memo_function(PyObject *memo, PyObject *code, PyFunctionObject *func)
{
    PyObject *closure = func->func_closure ? func->func_closure : Py_None;
    PyObject **m = ((PyListObject *)memo)->ob_item;
    if (m[0] == closure && m[1] == func->func_globals && m[2] != Py_None)
        return Py_NewRef(m[2]);
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "framejit: cache entry code is not a code object");
        return NULL;
    }
    Py_ssize_t nfree = closure == Py_None ? 0 : PyTuple_GET_SIZE(closure);
    if (((PyCodeObject *)code)->co_nfreevars != nfree) {
        PyErr_Format(PyExc_ValueError, "framejit: replacement code %R needs %d free vars, "
                     "the function has %zd", code, ((PyCodeObject *)code)->co_nfreevars, nfree);
        return NULL;
    }
    PyObject *fn = PyFunction_New(code, func->func_globals);
    if (fn == NULL)
        return NULL;
    if (closure != Py_None && PyFunction_SetClosure(fn, closure) < 0) {
        Py_DECREF(fn);
        return NULL;
    }
    int keep = closure == Py_None ? is_module_namespace(func->func_globals) : 0;
    if (keep <= 0) {
        if (keep < 0)
            Py_CLEAR(fn);
        return fn;
    }
    /* Swap all three before releasing the old ones: their finalizers may run code. */
    PyObject *old[3] = {m[0], m[1], m[2]};
    m[0] = Py_NewRef(closure);
    m[1] = Py_NewRef(func->func_globals);
    m[2] = Py_NewRef(fn);
    for (int i = 0; i < 3; i++)
        Py_DECREF(old[i]);
    return fn;
}

/* Runs the guards of `cache` in order, skipping entries owned by another callback.
 * Returns the replacement function of the first entry whose guard passes (new
 * ref), or NULL: *err says whether that is an error (set) or a miss. A guard
 * that raises counts as failing. */
static PyObject *lookup(PyObject *cache, PyObject *cb, _PyInterpreterFrame *frame, Py_ssize_t nargs, int *err)
{
    PyObject *small[SMALL_STACK], **stack = small, *fn = NULL;
    *err = 0;
    if (nargs + 1 > SMALL_STACK && (stack = PyMem_Malloc((nargs + 1) * sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        *err = 1;
        return NULL;
    }
    stack[0] = (PyObject *)frame->f_func;
    memcpy(stack + 1, frame->localsplus, nargs * sizeof(PyObject *));
    Py_INCREF(cache);  /* a guard may replace co_extra or mutate the list */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cache); i++) {
        PyObject *entry = PyList_GET_ITEM(cache, i);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 5) {  /* contracts.CacheEntry */
            PyErr_SetString(PyExc_TypeError,
                            "framejit: cache entry is not a (guard, code, memo, owner, runs_graphs) tuple");
            *err = 1;
            break;
        }
        /* Entries belong to the callback (backend) that compiled them; run-only mode uses any. */
        PyObject *owner = PyTuple_GET_ITEM(entry, 3);
        if (cb != Py_False && owner != Py_None && owner != cb)
            continue;
        Py_INCREF(entry);
        PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(entry, 0), stack, nargs + 1, NULL);
        int ok = r == NULL ? -1 : r == Py_True ? 1 : r == Py_False ? 0 : PyObject_IsTrue(r);
        Py_XDECREF(r);
        if (ok < 0) {
            PyErr_Clear();
            n_guard_errors++;
        } else if (ok) {
            PyObject *memo = PyTuple_GET_ITEM(entry, 2);
            if (!PyList_CheckExact(memo) || PyList_GET_SIZE(memo) != 3)
                PyErr_SetString(PyExc_TypeError, "framejit: cache entry memo is not a list of 3");
            else
                fn = memo_function(memo, PyTuple_GET_ITEM(entry, 1), frame->f_func);
            *err = fn == NULL;
            Py_DECREF(entry);
            n_hits++;
            n_graph_hits += PyTuple_GET_ITEM(entry, 4) == Py_True;
            break;
        }
        Py_DECREF(entry);
    }
    Py_DECREF(cache);
    if (stack != small)
        PyMem_Free(stack);
    return fn;
}

/* Asks the callback for a replacement: new ref, Py_None to run the frame as is, NULL on error. */
static PyObject *ask_callback(PyObject *cb, _PyInterpreterFrame *frame, Py_ssize_t nargs, ThreadSlot *slot)
{
    PyObject *args = PyTuple_New(nargs);
    if (args == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(args, i, Py_NewRef(frame->localsplus[i]));
    PyObject *stack[2] = {(PyObject *)frame->f_func, args};
    PyObject *r = vectorcall_on_spare(&slot->compiles, cb, stack, 2, NULL);  /* (tracing and compiling) */
    Py_DECREF(args);
    return r;
}

/* Everything but the common "no callback on this thread" case; kept out of
 * line so that case costs a TSS read and a tail call. */
static NOINLINE PyObject *
eval_hooked(PyThreadState *ts, _PyInterpreterFrame *frame, int throw_flag, ThreadSlot *slot)
{
    if (prev_eval != NULL && frame == chaining)
        return _PyEval_EvalFrameDefault(ts, frame, throw_flag);
    int tail = tail_target != NULL && (PyObject *)frame->f_func == tail_target;
    if (tail)
        tail_target = NULL;  /* calls the continuation makes are not tail calls */
    PyCodeObject *code = frame->f_code;
    /* Only fresh frames of ordinary functions (CO_OPTIMIZED excludes module
     * and class bodies); generators, coroutines and throw() run untouched. */
    if (throw_flag || frame->owner != FRAME_OWNED_BY_THREAD
            || (code->co_flags & (NOT_PLAIN | CO_OPTIMIZED)) != CO_OPTIMIZED
            || frame->prev_instr != _PyCode_CODE(code) - 1
            || !PyFunction_Check(frame->f_func))
        return pass_through(ts, frame, throw_flag);
    if (slot == NULL)
        slot = PyThread_tss_get(&slot_tss);
    if (slot == NULL || slot->cb == NULL || slot->owner != ts)
        return pass_through(ts, frame, throw_flag);
    if (STACK_HERE() < slot->stack_floor)
        return stack_overflow(ts, frame, throw_flag);
    /* Another hook on top chains to us: it owns this frame; never rewrite twice. */
    if (_PyInterpreterState_GetEvalFrameFunc(ts->interp) != eval_frame)
        return pass_through(ts, frame, throw_flag);
    PyObject *extra = NULL;
    if (_PyCode_GetExtra((PyObject *)code, extra_index, (void **)&extra) < 0)
        return NULL;
    if (extra == SKIP)
        return pass_through(ts, frame, throw_flag);

    int flags = code->co_flags;
    Py_ssize_t nargs = code->co_argcount + code->co_kwonlyargcount
        + ((flags & CO_VARARGS) != 0) + ((flags & CO_VARKEYWORDS) != 0);
    /* Disabled while guards and the callback run: their own calls aren't hooked. */
    PyObject *cb = swap_cb(slot, NULL), *fn = NULL;
    int err = 0;
    if (extra != NULL)
        fn = lookup(extra, cb, frame, nargs, &err);
    if (fn == NULL && !err) {
        n_misses++;
        if (cb != Py_False) {
            fn = ask_callback(cb, frame, nargs, slot);
            err = fn == NULL;
        }
    }
    restore_cb(slot, cb);
    if (err)
        return NULL;
    if (fn == NULL || fn == Py_None) {
        Py_XDECREF(fn);
        return pass_through(ts, frame, throw_flag);
    }
    /* The replacement takes the argument slots positionally; the caller then
     * pops the untouched original frame. */
    PyObject *result = PyObject_Vectorcall(fn, frame->localsplus, nargs, NULL);
    Py_DECREF(fn);
    return tail ? result : trampoline(result);
}

static PyObject *eval_frame(PyThreadState *ts, _PyInterpreterFrame *frame, int throw_flag)
{
    ThreadSlot *slot = NULL;
    if (prev_eval == NULL) {
        slot = PyThread_tss_get(&slot_tss);
        if (slot == NULL || slot->cb == NULL) {
            if (slot != NULL && STACK_HERE() < slot->stack_floor)  /* the floor is per OS thread */
                return stack_overflow(ts, frame, throw_flag);
            return _PyEval_EvalFrameDefault(ts, frame, throw_flag);
        }
    }
    return eval_hooked(ts, frame, throw_flag, slot);
}

/* ---- module functions ---- */

static int check_cb(PyObject *cb)
{
    if (cb == Py_None || cb == Py_False || PyCallable_Check(cb))
        return 0;
    PyErr_Format(PyExc_TypeError, "callback must be None, False or callable, not %.100s",
                 Py_TYPE(cb)->tp_name);
    return -1;
}

static PyObject *set_callback(PyObject *self, PyObject *cb)
{
    ThreadSlot *slot;
    if (check_cb(cb) < 0 || (slot = get_slot()) == NULL)
        return NULL;
    PyObject *old = swap_cb(slot, cb == Py_None ? NULL : Py_NewRef(cb));
    return old ? old : Py_NewRef(Py_None);
}

static PyObject *get_callback(PyObject *self, PyObject *unused)
{
    ThreadSlot *slot = PyThread_tss_get(&slot_tss);
    if (slot == NULL || slot->cb == NULL || slot->owner != PyThreadState_Get())
        Py_RETURN_NONE;
    return Py_NewRef(slot->cb);
}

/* fn(*args, **kwargs) with this thread's callback set to `cb` meanwhile; on a
 * chunk of the thread's own where `compiling`, or where it is the outermost
 * call with a callback (a compiled function's call). */
static PyObject *call_under(PyObject *cb, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int compiling)
{
    ThreadSlot *slot;
    if (check_cb(cb) < 0 || (slot = get_slot()) == NULL)
        return NULL;
    /* we hold the previous callback's reference until it is restored */
    PyObject *prev = swap_cb(slot, cb == Py_None ? NULL : Py_NewRef(cb));
    SpareChunk *spare = compiling ? &slot->compiles : prev == NULL && cb != Py_None ? &slot->calls : NULL;
    PyObject *result = spare ? vectorcall_on_spare(spare, args[0], args + 1, nargs - 1, kwnames)
                             : PyObject_Vectorcall(args[0], args + 1, nargs - 1, kwnames);
    Py_XDECREF(swap_cb(slot, prev));
    return result;
}

static PyObject *call_with_callback(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                                    PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "call_with_callback(cb, fn, *args, **kwargs)");
        return NULL;
    }
    return call_under(args[0], args + 1, nargs - 1, kwnames, 0);
}

static PyObject *call_compiler(PyObject *self, PyObject *const *args, Py_ssize_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "call_compiler(fn, *args, **kwargs)");
        return NULL;
    }
    return call_under(Py_None, args, nargs, kwnames, 1);
}

static PyObject *get_extra(PyObject *self, PyObject *code)
{
    PyObject *extra = NULL;
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "expected a code object");
        return NULL;
    }
    if (_PyCode_GetExtra(code, extra_index, (void **)&extra) < 0)
        return NULL;
    return Py_NewRef(extra ? extra : Py_None);
}

static PyObject *set_extra(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyCode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set_extra(code, obj)");
        return NULL;
    }
    PyObject *obj = args[1], *old = NULL;
    if (obj != Py_None && obj != SKIP && !PyList_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "set_extra: obj must be None, SKIP or a list");
        return NULL;
    }
    if (_PyCode_GetExtra(args[0], extra_index, (void **)&old) < 0)
        return NULL;
    /* Keep the old value alive until the slot holds the new one: the free
     * function's decref could otherwise run code that reads a freed slot. */
    Py_XINCREF(old);
    PyObject *new = obj == Py_None ? NULL : Py_NewRef(obj);
    if (_PyCode_SetExtra(args[0], extra_index, new) < 0) {
        Py_XDECREF(new);
        Py_XDECREF(old);
        return NULL;
    }
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *is_installed(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == eval_frame);
}

static PyObject *get_stats(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("{sl,sl,sl,sl}", "hits", n_hits, "graph_hits", n_graph_hits, "misses", n_misses,
                         "guard_errors", n_guard_errors);
}

static PyObject *reset_stats(PyObject *self, PyObject *unused)
{
    n_hits = n_graph_hits = n_misses = n_guard_errors = 0;
    Py_RETURN_NONE;
}

static void free_extra(void *obj)
{
    Py_XDECREF((PyObject *)obj);
}

static PyObject *skip_repr(PyObject *self)
{
    return PyUnicode_FromString("<framejit SKIP>");
}

static PyTypeObject SkipType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framejit._C._hook.SkipType",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = skip_repr,
};

static PyMethodDef methods[] = {
    {"set_callback", set_callback, METH_O, "set_callback(cb) -> previous: None, False or cb(func, args)."},
    {"get_callback", get_callback, METH_NOARGS, "This thread's callback (None when unset)."},
    {"call_with_callback", (PyCFunction)(void (*)(void))call_with_callback,
     METH_FASTCALL | METH_KEYWORDS, "call_with_callback(cb, fn, *args, **kwargs)"},
    {"call_compiler", (PyCFunction)(void (*)(void))call_compiler, METH_FASTCALL | METH_KEYWORDS,
     "call_compiler(fn, *args, **kwargs): capture off, on a data-stack chunk of its own (a compiler's call)"},
    {"get_extra", get_extra, METH_O, "get_extra(code) -> None | SKIP | list"},
    {"set_extra", (PyCFunction)(void (*)(void))set_extra, METH_FASTCALL,
     "set_extra(code, obj): obj is None (clear), SKIP or a list of (guard, code, memo, owner, runs_graphs)."},
    {"is_installed", is_installed, METH_NOARGS, "Whether our eval-frame function is the current one."},
    {"tail_call", (PyCFunction)(void (*)(void))tail_call, METH_FASTCALL,
     "tail_call(fn, *args): returned by replacement code, the hook then calls fn(*args) in the frame's place."},
    {"get_stats", get_stats, METH_NOARGS, "Counters: hits, misses, guard_errors."},
    {"reset_stats", reset_stats, METH_NOARGS, "Zero the counters."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "framejit._C._hook", "The PEP 523 frame hook.", -1, methods,
};

PyMODINIT_FUNC PyInit__hook(void)
{
    if (PyType_Ready(&SkipType) < 0 || tail_call_init() < 0 || thread_slot_init(swap_cb) < 0)
        return NULL;
    if (extra_index < 0 && (extra_index = _PyEval_RequestCodeExtraIndex(free_extra)) < 0) {
        PyErr_SetString(PyExc_RuntimeError, "framejit: no co_extra index left");
        return NULL;
    }
    if (SKIP == NULL && (SKIP = PyObject_New(PyObject, &SkipType)) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "SKIP", SKIP) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
