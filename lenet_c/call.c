// The Python call of the fused pass: a function the interpreter calls directly (METH_O), where
// ctypes builds a foreign call from Python objects each time. model.py builds it (build.extension)
// the way it builds the level's library, and binds it once to that library's lenet_fused and its
// buffers' table:
//
//   bind(fn, table, typenum) -> call   fn, table: addresses; typenum: NumPy's type of the dtype
//   call(images) -> probs | None       images (N, 28, 28, 1) of that dtype, C-contiguous, aligned
//                                      and in this machine's byte order: the pass reads them where
//                                      they are and writes a new (N, 10) array; None (nothing
//                                      done) for any other images: the caller checks and copies
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <limits.h>
#include <numpy/arrayobject.h>

typedef void (*fused_fn)(const void *const *table, const void *x, void *out, int n);

typedef struct {
    fused_fn fn;
    const void *const *table;
    int typenum;
} Bound;

#define CAPSULE "lenet_c.call.bound"

static PyObject *call(PyObject *capsule, PyObject *images) {
    const Bound *b = PyCapsule_GetPointer(capsule, CAPSULE);
    if (!b) return NULL;
    if (!PyArray_Check(images)) Py_RETURN_NONE;
    PyArrayObject *x = (PyArrayObject *)images;
    const npy_intp *d = PyArray_DIMS(x);
    if (PyArray_NDIM(x) != 4 || PyArray_TYPE(x) != b->typenum || !PyArray_ISCARRAY_RO(x) || d[0] < 1 ||
        d[0] > INT_MAX || d[1] != 28 || d[2] != 28 || d[3] != 1)
        Py_RETURN_NONE;
    npy_intp shape[2] = {d[0], 10};
    PyObject *out = PyArray_SimpleNew(2, shape, b->typenum);  // (N, 10), written by the pass
    if (!out) return NULL;
    const void *in = PyArray_DATA(x);
    void *probs = PyArray_DATA((PyArrayObject *)out);
    Py_BEGIN_ALLOW_THREADS  // as ctypes does: other threads run while the pass does (x stays alive)
    b->fn(b->table, in, probs, (int)d[0]);
    Py_END_ALLOW_THREADS
    return out;
}

static PyMethodDef CALL = {"fused", call, METH_O, "probabilities (N, 10) of images (N, 28, 28, 1), or None"};

static void release(PyObject *capsule) { PyMem_Free(PyCapsule_GetPointer(capsule, CAPSULE)); }

static PyObject *bind(PyObject *module, PyObject *args) {
    unsigned long long fn, table;
    int typenum;
    if (!PyArg_ParseTuple(args, "KKi", &fn, &table, &typenum)) return NULL;
    if (!fn || !table) return PyErr_Format(PyExc_ValueError, "bind: a null address (fn %llu, table %llu)", fn, table);
    Bound *b = PyMem_Malloc(sizeof *b);
    if (!b) return PyErr_NoMemory();
    *b = (Bound){(fused_fn)(uintptr_t)fn, (const void *const *)(uintptr_t)table, typenum};
    PyObject *capsule = PyCapsule_New(b, CAPSULE, release);
    if (!capsule) {
        PyMem_Free(b);
        return NULL;
    }
    PyObject *f = PyCFunction_New(&CALL, capsule);  // holds the capsule: freed with the function
    Py_DECREF(capsule);
    return f;
}

static PyMethodDef METHODS[] = {{"bind", bind, METH_VARARGS, "bind(fn, table, typenum) -> call"}, {NULL}};
static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "lenet_c_call", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit_lenet_c_call(void) {
    import_array();
    return PyModule_Create(&MODULE);
}
