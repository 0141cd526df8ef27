/* gluonkit's C launcher: the last step of a generated launch (gluonkit/runtime/fastlaunch.py).
 *
 * Built on first use by gluonkit/runtime/claunch.py with the machine's C compiler (no CUDA
 * headers, no link step against libcuda: the caller passes cuLaunchKernelEx's address).
 * Without a compiler the generated launch packs with struct and calls the driver through
 * ctypes instead; this file only makes the same launch cheaper.
 *
 * plan(launch, function, block, shared, ctas, codes, offsets, size, release) -> capsule
 *     everything fixed for one loaded kernel: the driver entry point and CUfunction (as
 *     ints), the block, the dynamic shared memory, the CTAs per cluster along x (the grid's
 *     x is multiplied by it), per kernel parameter its struct code and byte offset, and
 *     whether to release the GIL during the driver call.
 * launch(plan, grid, stream, *values) -> CUresult (int)
 *     grid: a tuple of 1 to 3 ints, each 1 to 2**32 - 1.  Writes the values into a
 *     parameter block on the C stack, fills a CUlaunchConfig and calls the driver.  A grid
 *     or value that does not fit raises (OverflowError, TypeError, ValueError) before
 *     anything is launched.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* CUlaunchConfig of cuda.h (CUDA 11.8+), field for field. */
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void *hStream;
    void *attrs;
    unsigned int numAttrs;
} LaunchConfig;

typedef int (*LaunchEx)(const LaunchConfig *, void *, void **, void **);

#define MAX_PARAMS 512
#define MAX_BYTES 4096 /* the classic kernel parameter space; larger blocks keep the ctypes path */
#define CAPSULE "gluonkit.claunch.plan"

typedef struct {
    LaunchEx launch;
    void *function;
    unsigned int block[3];
    unsigned int shared;
    unsigned int ctas;
    int release;
    Py_ssize_t count;
    char codes[MAX_PARAMS];
    unsigned int offsets[MAX_PARAMS];
} Plan;

static void plan_free(PyObject *capsule) {
    PyMem_Free(PyCapsule_GetPointer(capsule, CAPSULE));
}

static PyObject *plan(PyObject *self, PyObject *args) {
    unsigned long long launch, function;
    unsigned int bx, by, bz, shared, ctas;
    const char *codes;
    Py_ssize_t ncodes;
    PyObject *offsets;
    Py_ssize_t size;
    int release;
    if (!PyArg_ParseTuple(args, "KK(III)IIy#O!np", &launch, &function, &bx, &by, &bz, &shared, &ctas, &codes,
                          &ncodes, &PyTuple_Type, &offsets, &size, &release))
        return NULL;
    if (ncodes > MAX_PARAMS || PyTuple_GET_SIZE(offsets) != ncodes || size < 0 || size > MAX_BYTES) {
        PyErr_SetString(PyExc_ValueError, "claunch.plan: too many parameters, or offsets not one per code");
        return NULL;
    }
    Plan *p = PyMem_Calloc(1, sizeof(Plan));
    if (p == NULL)
        return PyErr_NoMemory();
    p->launch = (LaunchEx)(uintptr_t)launch;
    p->function = (void *)(uintptr_t)function;
    p->block[0] = bx, p->block[1] = by, p->block[2] = bz;
    p->shared = shared;
    p->ctas = ctas;
    p->release = release;
    p->count = ncodes;
    for (Py_ssize_t i = 0; i < ncodes; i++) {
        size_t width = codes[i] == 'D' ? 128 : strchr("bB", codes[i]) ? 1 : strchr("hH", codes[i]) ? 2
                       : strchr("iIf", codes[i]) ? 4 : strchr("qQd", codes[i]) ? 8 : 0;
        long long offset = PyLong_AsLongLong(PyTuple_GET_ITEM(offsets, i));
        if (offset == -1 && PyErr_Occurred()) {
            PyMem_Free(p);
            return NULL;
        }
        if (width == 0 || offset < 0 || offset + (long long)width > size) {
            PyMem_Free(p);
            PyErr_Format(PyExc_ValueError, "claunch.plan: parameter %zd: code %c at offset %lld", i, codes[i],
                         offset);
            return NULL;
        }
        p->codes[i] = codes[i];
        p->offsets[i] = (unsigned int)offset;
    }
    PyObject *capsule = PyCapsule_New(p, CAPSULE, plan_free);
    if (capsule == NULL)
        PyMem_Free(p);
    return capsule;
}

/* An integer in [low, high], or -1 with OverflowError/TypeError set. */
static int integer(PyObject *value, long long low, unsigned long long high, unsigned long long *out) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow > 0 && high == ULLONG_MAX) { /* above int64: a uint64 */
        unsigned long long u = PyLong_AsUnsignedLongLong(value);
        if (u == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        *out = u;
        return 0;
    }
    if (overflow != 0 || v < low || (v > 0 && (unsigned long long)v > high)) {
        PyErr_SetString(PyExc_OverflowError, "kernel argument out of its type's range");
        return -1;
    }
    *out = (unsigned long long)v;
    return 0;
}

static int pack(char code, PyObject *value, unsigned char *at) {
    unsigned long long u;
    switch (code) {
    case 'b': if (integer(value, SCHAR_MIN, SCHAR_MAX, &u)) return -1; *(int8_t *)at = (int8_t)u; return 0;
    case 'B': if (integer(value, 0, UCHAR_MAX, &u)) return -1; *(uint8_t *)at = (uint8_t)u; return 0;
    case 'h': if (integer(value, SHRT_MIN, SHRT_MAX, &u)) return -1; memcpy(at, &(int16_t){(int16_t)u}, 2); return 0;
    case 'H': if (integer(value, 0, USHRT_MAX, &u)) return -1; memcpy(at, &(uint16_t){(uint16_t)u}, 2); return 0;
    case 'i': if (integer(value, INT_MIN, INT_MAX, &u)) return -1; memcpy(at, &(int32_t){(int32_t)u}, 4); return 0;
    case 'I': if (integer(value, 0, UINT_MAX, &u)) return -1; memcpy(at, &(uint32_t){(uint32_t)u}, 4); return 0;
    case 'q': if (integer(value, LLONG_MIN, LLONG_MAX, &u)) return -1; memcpy(at, &u, 8); return 0;
    case 'Q': if (integer(value, 0, ULLONG_MAX, &u)) return -1; memcpy(at, &u, 8); return 0;
    case 'f': {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        float f = (float)d;
        if (isinf(f) && !isinf(d)) { /* as struct's 'f': a finite value that rounds to infinity */
            PyErr_SetString(PyExc_OverflowError, "float too large to pack with f format");
            return -1;
        }
        memcpy(at, &f, 4);
        return 0;
    }
    case 'd': {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        memcpy(at, &d, 8);
        return 0;
    }
    case 'D': { /* a TMA descriptor's 128-byte tensor map, by value */
        char *bytes;
        Py_ssize_t length;
        if (PyBytes_AsStringAndSize(value, &bytes, &length) < 0)
            return -1;
        if (length != 128) {
            PyErr_SetString(PyExc_ValueError, "a tensor map is 128 bytes");
            return -1;
        }
        memcpy(at, bytes, 128);
        return 0;
    }
    }
    PyErr_SetString(PyExc_ValueError, "claunch: unknown parameter code");
    return -1;
}

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3) {
        PyErr_SetString(PyExc_TypeError, "claunch.launch(plan, grid, stream, *values)");
        return NULL;
    }
    Plan *p = PyCapsule_GetPointer(args[0], CAPSULE);
    if (p == NULL)
        return NULL;
    if (nargs - 3 != p->count) {
        PyErr_Format(PyExc_TypeError, "claunch.launch: %zd values for %zd parameters", nargs - 3, p->count);
        return NULL;
    }
    PyObject *dims = args[1];
    if (!PyTuple_Check(dims) || PyTuple_GET_SIZE(dims) < 1 || PyTuple_GET_SIZE(dims) > 3) {
        PyErr_SetString(PyExc_TypeError, "claunch.launch: the grid is a tuple of 1 to 3 ints");
        return NULL;
    }
    unsigned long long grid[3] = {1, 1, 1};
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dims); i++)
        if (integer(PyTuple_GET_ITEM(dims, i), 1, UINT_MAX, &grid[i]))
            return NULL;
    if (grid[0] * p->ctas > UINT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "grid too large");
        return NULL;
    }
    unsigned long long stream;
    if (integer(args[2], 0, ULLONG_MAX, &stream))
        return NULL;
    _Alignas(64) unsigned char storage[MAX_BYTES];
    void *params[MAX_PARAMS];
    for (Py_ssize_t i = 0; i < p->count; i++) {
        params[i] = storage + p->offsets[i];
        if (pack(p->codes[i], args[3 + i], params[i]))
            return NULL;
    }
    _Alignas(64) LaunchConfig config = {(unsigned int)(grid[0] * p->ctas), (unsigned int)grid[1],
                                        (unsigned int)grid[2], p->block[0], p->block[1], p->block[2], p->shared,
                                        (void *)(uintptr_t)stream, NULL, 0};
    int result;
    if (p->release) {
        Py_BEGIN_ALLOW_THREADS
        result = p->launch(&config, p->function, p->count ? params : NULL, NULL);
        Py_END_ALLOW_THREADS
    } else {
        result = p->launch(&config, p->function, p->count ? params : NULL, NULL);
    }
    return PyLong_FromLong(result);
}

static PyMethodDef methods[] = {
    {"plan", plan, METH_VARARGS, "plan(launch, function, block, shared, ctas, codes, offsets, size, release) -> capsule"},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(plan, grid, stream, *values) -> CUresult"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gluonkit_claunch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gluonkit_claunch(void) { return PyModule_Create(&module); }
