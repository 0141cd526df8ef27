/* gluonkit's C launcher: the checks and the driver call of a generated launch
 * (gluonkit/runtime/fastlaunch.py).
 *
 * Built on first use by gluonkit/runtime/claunch.py with the machine's C compiler (no CUDA
 * headers, no link step against libcuda: the caller passes cuLaunchKernelEx's address).
 * Without a compiler the generated launch checks in Python, packs with struct and calls the
 * driver through ctypes instead; this file only makes the same launch cheaper.
 *
 * plan(launch, function, block, shared, ctas, release, device, params) -> capsule
 *     everything fixed for one loaded kernel: the driver entry point and CUfunction (as
 *     ints), the block, the dynamic shared memory, the CTAs per cluster along x (the grid's
 *     x is multiplied by it), whether to release the GIL during the driver call, the device
 *     of its tensors (-1: the only device, so a tensor's is_cuda is enough), and per kernel
 *     parameter (kind, byte offset, divisibility, dtype):
 *       raw kinds, values already checked by the caller, packed as struct packs them:
 *         b B h H i I q Q f d, and D (a TMA descriptor's 128-byte tensor map);
 *       checked kinds, the argument as the user gave it, the launch declined when it is not
 *       of the specialization the kernel was compiled for:
 *         T  a torch CUDA tensor: its dtype is the parameter's dtype object (identical or
 *            equal), it is on the device, its data_ptr() is divisible by 16 as specified;
 *         n  an int (exactly) in int32's range, divisible by 16 as specified (int32);
 *         N  an int (exactly) in int64's range and outside int32's (int64), the same;
 *         F  a float (exactly), packed as float32;
 *         Z  a bool, packed as one byte;
 *       divisibility: 1 divisible by 16, 0 not divisible, -1 not specialized.
 * launch(plan, grid, stream, *arguments) -> int
 *     grid: a tuple of 1 to 3 ints, each 1 to 2**32 - 1.  Checks and writes the arguments
 *     into a parameter block on the C stack, fills a CUlaunchConfig and calls the driver;
 *     returns the CUresult (0: launched), or -1 when an argument is not of the plan's
 *     specialization (nothing launched).  A grid or raw value that does not fit raises
 *     (OverflowError, TypeError, ValueError) before anything is launched.
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
#define DECLINED 1 /* pack()'s result for an argument of another specialization */

typedef struct {
    char kind;
    signed char divisible;
    unsigned int offset;
    PyObject *dtype; /* T only (a strong reference) */
} Param;

typedef struct {
    LaunchEx launch;
    void *function;
    unsigned int block[3];
    unsigned int shared;
    unsigned int ctas;
    int release;
    long device;
    Py_ssize_t count;
    Param params[];
} Plan;

static PyObject *s_dtype, *s_is_cuda, *s_get_device, *s_data_ptr;

static void plan_free(PyObject *capsule) {
    Plan *p = PyCapsule_GetPointer(capsule, CAPSULE);
    for (Py_ssize_t i = 0; i < p->count; i++)
        Py_XDECREF(p->params[i].dtype);
    PyMem_Free(p);
}

static size_t width(char kind) {
    switch (kind) {
    case 'b': case 'B': case 'Z': return 1;
    case 'h': case 'H': return 2;
    case 'i': case 'I': case 'f': case 'n': case 'F': return 4;
    case 'q': case 'Q': case 'd': case 'N': case 'T': return 8;
    case 'D': return 128;
    }
    return 0;
}

static PyObject *plan(PyObject *self, PyObject *args) {
    unsigned long long launch, function;
    unsigned int bx, by, bz, shared, ctas;
    int release;
    long device;
    PyObject *params;
    if (!PyArg_ParseTuple(args, "KK(III)IIplO!", &launch, &function, &bx, &by, &bz, &shared, &ctas, &release,
                          &device, &PyTuple_Type, &params))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(params);
    if (count > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "claunch.plan: too many parameters");
        return NULL;
    }
    Plan *p = PyMem_Calloc(1, sizeof(Plan) + count * sizeof(Param));
    if (p == NULL)
        return PyErr_NoMemory();
    *p = (Plan){(LaunchEx)(uintptr_t)launch, (void *)(uintptr_t)function, {bx, by, bz}, shared, ctas, release,
                device, 0};
    PyObject *capsule = PyCapsule_New(p, CAPSULE, plan_free);
    if (capsule == NULL) {
        PyMem_Free(p);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int kind, divisible;
        unsigned int offset;
        PyObject *dtype;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(params, i), "CIiO", &kind, &offset, &divisible, &dtype)) {
            Py_DECREF(capsule);
            return NULL;
        }
        size_t bytes = width((char)kind);
        if (bytes == 0 || offset + bytes > MAX_BYTES || offset % (kind == 'D' ? 64 : bytes) || divisible < -1 ||
            divisible > 1) {
            Py_DECREF(capsule);
            PyErr_Format(PyExc_ValueError, "claunch.plan: parameter %zd: kind %c at offset %u", i, kind, offset);
            return NULL;
        }
        Py_INCREF(dtype);
        p->params[i] = (Param){(char)kind, (signed char)divisible, offset, dtype};
        p->count = i + 1;
    }
    return capsule;
}

/* An integer in [low, high] into *out: 0, or -1 with OverflowError/TypeError set. */
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

/* Whether v's divisibility by 16 is what the parameter was specialized on. */
static int divisibility_holds(const Param *param, unsigned long long v) {
    return param->divisible < 0 || (param->divisible == 1) == (v % 16 == 0);
}

/* A torch CUDA tensor of the parameter's dtype on the plan's device with the specialized
 * alignment: its address into *out and 0, DECLINED, or -1 with an exception set. */
static int tensor(const Plan *p, const Param *param, PyObject *value, unsigned long long *out) {
    PyObject *dtype = PyObject_GetAttr(value, s_dtype);
    if (dtype == NULL)
        return -1;
    int same = dtype == param->dtype ? 1 : PyObject_RichCompareBool(dtype, param->dtype, Py_EQ);
    Py_DECREF(dtype);
    if (same != 1)
        return same < 0 ? -1 : DECLINED;
    if (p->device < 0) {
        PyObject *is_cuda = PyObject_GetAttr(value, s_is_cuda);
        if (is_cuda == NULL)
            return -1;
        Py_DECREF(is_cuda);
        if (is_cuda != Py_True)
            return DECLINED;
    } else {
        PyObject *device = PyObject_CallMethodNoArgs(value, s_get_device);
        if (device == NULL)
            return -1;
        long d = PyLong_AsLong(device);
        Py_DECREF(device);
        if (d == -1 && PyErr_Occurred())
            return -1;
        if (d != p->device)
            return DECLINED;
    }
    PyObject *address = PyObject_CallMethodNoArgs(value, s_data_ptr);
    if (address == NULL)
        return -1;
    int failed = integer(address, 0, ULLONG_MAX, out);
    Py_DECREF(address);
    if (failed)
        return -1;
    return divisibility_holds(param, *out) ? 0 : DECLINED;
}

/* Check and write one argument at `at`: 0, DECLINED, or -1 with an exception set. */
static int pack(const Plan *p, const Param *param, PyObject *value, unsigned char *at) {
    unsigned long long u;
    switch (param->kind) {
    case 'b': if (integer(value, SCHAR_MIN, SCHAR_MAX, &u)) return -1; *(int8_t *)at = (int8_t)u; return 0;
    case 'B': if (integer(value, 0, UCHAR_MAX, &u)) return -1; *(uint8_t *)at = (uint8_t)u; return 0;
    case 'h': if (integer(value, SHRT_MIN, SHRT_MAX, &u)) return -1; memcpy(at, &(int16_t){(int16_t)u}, 2); return 0;
    case 'H': if (integer(value, 0, USHRT_MAX, &u)) return -1; memcpy(at, &(uint16_t){(uint16_t)u}, 2); return 0;
    case 'i': if (integer(value, INT_MIN, INT_MAX, &u)) return -1; memcpy(at, &(int32_t){(int32_t)u}, 4); return 0;
    case 'I': if (integer(value, 0, UINT_MAX, &u)) return -1; memcpy(at, &(uint32_t){(uint32_t)u}, 4); return 0;
    case 'q': if (integer(value, LLONG_MIN, LLONG_MAX, &u)) return -1; memcpy(at, &u, 8); return 0;
    case 'Q': if (integer(value, 0, ULLONG_MAX, &u)) return -1; memcpy(at, &u, 8); return 0;
    case 'T': {
        int result = tensor(p, param, value, &u);
        if (result == 0)
            memcpy(at, &u, 8);
        return result;
    }
    case 'n': case 'N': {
        if (!PyLong_CheckExact(value))
            return DECLINED;
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        int int32 = !overflow && v >= INT_MIN && v <= INT_MAX;
        if (overflow || int32 != (param->kind == 'n') || !divisibility_holds(param, (unsigned long long)v))
            return DECLINED;
        if (param->kind == 'n')
            memcpy(at, &(int32_t){(int32_t)v}, 4);
        else
            memcpy(at, &v, 8);
        return 0;
    }
    case 'Z':
        if (!PyBool_Check(value))
            return DECLINED;
        *(int8_t *)at = value == Py_True;
        return 0;
    case 'F': case 'f': case 'd': {
        if (param->kind == 'F' && !PyFloat_CheckExact(value))
            return DECLINED;
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        if (param->kind == 'd') {
            memcpy(at, &d, 8);
            return 0;
        }
        float f = (float)d;
        if (isinf(f) && !isinf(d)) { /* as struct's 'f': a finite value that rounds to infinity */
            PyErr_SetString(PyExc_OverflowError, "float too large to pack with f format");
            return -1;
        }
        memcpy(at, &f, 4);
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
    PyErr_SetString(PyExc_ValueError, "claunch: unknown parameter kind");
    return -1;
}

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3) {
        PyErr_SetString(PyExc_TypeError, "claunch.launch(plan, grid, stream, *arguments)");
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
        params[i] = storage + p->params[i].offset;
        int result = pack(p, &p->params[i], args[3 + i], params[i]);
        if (result < 0)
            return NULL;
        if (result == DECLINED)
            return PyLong_FromLong(-1);
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
    {"plan", plan, METH_VARARGS, "plan(launch, function, block, shared, ctas, release, device, params) -> capsule"},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(plan, grid, stream, *arguments) -> CUresult, or -1 for arguments of another specialization"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gluonkit_claunch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gluonkit_claunch(void) {
    if (!(s_dtype = PyUnicode_InternFromString("dtype")) || !(s_is_cuda = PyUnicode_InternFromString("is_cuda")) ||
        !(s_get_device = PyUnicode_InternFromString("get_device")) ||
        !(s_data_ptr = PyUnicode_InternFromString("data_ptr")))
        return NULL;
    return PyModule_Create(&module);
}
