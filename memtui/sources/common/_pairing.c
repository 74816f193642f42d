/* memtui.sources.common._pairing: open and close events on one address into lifetimes, in one
 * pass in event order.
 *
 * What it owns: the hot loop of :func:`memtui.sources.common.lifetimes.pair_by_address` on big
 * traces.  The rule is the one that module states (within one address, each open event starts
 * a lifetime and the close events after it, up to the next open, belong to it; closes before
 * an address's first open form one more lifetime); here it is a hash table from address to the
 * lifetime open on it, walked once in the events' own order, so lifetimes are numbered in the
 * order of their first event and every row index it returns increases with the lifetime.  The
 * numpy path of that module (a stable sort by address, then runs) is the reference and the
 * fallback where this was not built; tests require identical results from both.
 *
 * Why C: the numpy path's stable sort of the addresses and its gathers at rows scattered over
 * the trace cost about 0.4 s per million events, most of the model's build of a big snapshot;
 * this pass costs a few tens of milliseconds.  No numpy headers: the inputs come through the
 * buffer protocol and the outputs are bytearrays the Python side views as int64 arrays.
 *
 * Safety: the inputs' lengths and item sizes are checked against each other before the loop;
 * every output is sized by the number of events (a lifetime needs at least one event), so
 * memory is bounded by the input; the table grows by doubling, to at most four slots per event
 * (16 bytes each) where every address differs.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { K_OTHER = 0, K_OPEN = 1, K_CLOSE = 2, K_REQUEST = 3 };

typedef struct {
    uint64_t *keys;
    int64_t *values;  /* the lifetime open on the key's address, -1 for an empty slot */
    size_t cap, len;
} Table;

static size_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int table_init(Table *t, size_t cap) {
    t->cap = cap;
    t->len = 0;
    t->keys = PyMem_RawMalloc(cap * sizeof(uint64_t));
    t->values = PyMem_RawMalloc(cap * sizeof(int64_t));
    if (!t->keys || !t->values) return -1;
    memset(t->values, 0xff, cap * sizeof(int64_t));  /* every slot -1: empty */
    return 0;
}

static void table_free(Table *t) {
    PyMem_RawFree(t->keys);
    PyMem_RawFree(t->values);
    t->keys = NULL;
    t->values = NULL;
}

/* The slot of ``key``: where it is, or the empty slot where it goes. */
static size_t table_slot(const Table *t, uint64_t key) {
    size_t mask = t->cap - 1, i = mix(key) & mask;
    while (t->values[i] >= 0 && t->keys[i] != key) i = (i + 1) & mask;
    return i;
}

static int table_grow(Table *t) {
    Table bigger;
    if (table_init(&bigger, t->cap * 2)) {
        table_free(&bigger);
        return -1;
    }
    for (size_t j = 0; j < t->cap; j++) {
        if (t->values[j] < 0) continue;
        size_t i = table_slot(&bigger, t->keys[j]);
        bigger.keys[i] = t->keys[j];
        bigger.values[i] = t->values[j];
    }
    bigger.len = t->len;
    table_free(t);
    *t = bigger;
    return 0;
}

static int view(PyObject *obj, Py_buffer *buf, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(obj, buf, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (buf->itemsize != 1 && buf->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: items of %zd bytes, expected %zd", name,
                     buf->itemsize, itemsize);
        PyBuffer_Release(buf);
        return -1;
    }
    if (buf->len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: a length not a multiple of %zd", name, itemsize);
        PyBuffer_Release(buf);
        return -1;
    }
    return 0;
}

static PyObject *int64_column(Py_ssize_t n) {
    return PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
}

#define I64(o) ((int64_t *)PyByteArray_AS_STRING(o))

PyDoc_STRVAR(pair_doc,
"pair(addr, kind) -> (lifetime, open_row, close_row, request_row, closes)\n\n"
"addr: uint64 per event (a buffer); kind: uint8 per event, 0 other, 1 open, 2 close,\n"
"3 request.  Returns bytearrays of int64: each event's lifetime (numbered in the order of\n"
"their first event), and per lifetime the row of its open, first close and first request\n"
"(-1 where none) and its count of closes.");

static PyObject *pair(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *addr_obj, *kind_obj;
    if (!PyArg_ParseTuple(args, "OO:pair", &addr_obj, &kind_obj)) return NULL;
    Py_buffer addr_buf, kind_buf;
    if (view(addr_obj, &addr_buf, 8, "addr")) return NULL;
    if (view(kind_obj, &kind_buf, 1, "kind")) {
        PyBuffer_Release(&addr_buf);
        return NULL;
    }
    Py_ssize_t n = addr_buf.len / 8;
    PyObject *lifetime = NULL, *open_row = NULL, *close_row = NULL, *request_row = NULL,
             *closes = NULL, *result = NULL;
    Table table = {NULL, NULL, 0, 0};
    if (kind_buf.len != n) {
        PyErr_SetString(PyExc_ValueError, "addr and kind differ in length");
        goto done;
    }
    lifetime = int64_column(n);
    open_row = int64_column(n);
    close_row = int64_column(n);
    request_row = int64_column(n);
    closes = int64_column(n);
    if (!lifetime || !open_row || !close_row || !request_row || !closes) goto done;
    if (table_init(&table, 1024)) {
        PyErr_NoMemory();
        goto done;
    }
    const uint64_t *addr = addr_buf.buf;
    const uint8_t *kind = kind_buf.buf;
    int64_t *life = I64(lifetime), *opens = I64(open_row), *first_close = I64(close_row),
            *first_request = I64(request_row), *n_closes = I64(closes);
    int64_t runs = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t row = 0; row < n; row++) {
        if (2 * (table.len + 1) > table.cap && table_grow(&table)) {
            runs = -1;
            break;
        }
        size_t slot = table_slot(&table, addr[row]);
        int64_t run = table.values[slot];
        if (run < 0 || kind[row] == K_OPEN) {  /* a new address, or an open: a new lifetime */
            run = runs++;
            opens[run] = first_close[run] = first_request[run] = -1;
            n_closes[run] = 0;
            if (table.values[slot] < 0) {
                table.keys[slot] = addr[row];
                table.len++;
            }
            table.values[slot] = run;
        }
        life[row] = run;
        switch (kind[row]) {
        case K_OPEN: opens[run] = row; break;
        case K_CLOSE:
            if (first_close[run] < 0) first_close[run] = row;
            n_closes[run]++;
            break;
        case K_REQUEST:
            if (first_request[run] < 0) first_request[run] = row;
            break;
        default: break;
        }
    }
    Py_END_ALLOW_THREADS
    if (runs < 0) {
        PyErr_NoMemory();
        goto done;
    }
    /* the per-lifetime columns give back what the events' count over-reserved */
    Py_ssize_t kept = (Py_ssize_t)runs * (Py_ssize_t)sizeof(int64_t);
    if (PyByteArray_Resize(open_row, kept) || PyByteArray_Resize(close_row, kept) ||
        PyByteArray_Resize(request_row, kept) || PyByteArray_Resize(closes, kept))
        goto done;
    result = Py_BuildValue("(OOOOO)", lifetime, open_row, close_row, request_row, closes);
done:
    table_free(&table);
    Py_XDECREF(lifetime);
    Py_XDECREF(open_row);
    Py_XDECREF(close_row);
    Py_XDECREF(request_row);
    Py_XDECREF(closes);
    PyBuffer_Release(&addr_buf);
    PyBuffer_Release(&kind_buf);
    return result;
}

static PyMethodDef methods[] = {
    {"pair", pair, METH_VARARGS, pair_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_pairing",
    "Open and close events on one address into lifetimes, in one pass (see the C source).",
    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pairing(void) { return PyModule_Create(&module_def); }
