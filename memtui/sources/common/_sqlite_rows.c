/* The rows of one SQLite query as typed column buffers, stepped through SQLite's own C API.
 *
 * ``Reader(uri)`` opens one read-only connection (``SQLITE_OPEN_NOMUTEX``: a reader is
 * used by one thread at a time, so SQLite's per-value connection mutex is not taken) on
 * the system's libsqlite3, the library Python's own ``sqlite3`` loads.
 * ``Reader.query(sql, kinds)`` steps every row without the GIL and hands back, for each
 * result column, the buffers of an Arrow array:
 *
 *   ``i``: int64       (values, validity or None, null_count)
 *   ``t``: large text  (int64 offsets, data, validity or None, null_count)
 *   ``d``: dictionary  (int32 indices, dictionary's int64 offsets, dictionary's data,
 *                       validity or None, null_count): each distinct text stored once
 *
 * A text column takes any value that is not NULL as SQLite's own text of it (what
 * ``CAST(x AS TEXT)`` gives: a number's digits, a BLOB's bytes).  It returns ``(rows,
 * columns)``, or None where a number column holds a value that is not a whole number (a
 * text, a REAL, a BLOB): the caller reads that query another way then.  An SQLite error raises OSError.  Every buffer grows by checked sizes;
 * the buffers are kept from one query to the next (a reader reads many chunks), and each
 * result is a fresh ``bytes`` of its exact size.  Text is handed over as SQLite stores it:
 * the caller checks that it is UTF-8.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (extra > SIZE_MAX - b->len) return -1;
    size_t need = b->len + extra;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) { cap = need; break; }
        cap *= 2;
    }
    char *grown = realloc(b->data, cap);
    if (grown == NULL) return -1;
    b->data = grown;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

typedef struct {
    char kind;          /* 'i', 't' or 'd' */
    Buf values;         /* i: int64 values; t: the texts; d: int32 indices */
    Buf offsets;        /* t: int64 offsets; d: the dictionary's int64 offsets */
    Buf validity;       /* one bit a row, set where the value is not NULL */
    Buf dict;           /* d: the dictionary's texts */
    Buf hashes;         /* d: uint64 hash of each dictionary entry */
    Buf slots;          /* d: open addressing, uint32 entry + 1, 0 for empty */
    size_t entries;     /* d: distinct texts */
    int64_t nulls;
} Column;

static void column_reset(Column *c, char kind) {
    c->kind = kind;
    c->values.len = c->offsets.len = c->validity.len = 0;
    c->dict.len = c->hashes.len = c->slots.len = 0;
    c->entries = 0;
    c->nulls = 0;
}

static void column_free(Column *c) {
    buf_free(&c->values);
    buf_free(&c->offsets);
    buf_free(&c->validity);
    buf_free(&c->dict);
    buf_free(&c->hashes);
    buf_free(&c->slots);
}

static int put_valid(Column *c, int64_t row, int valid) {
    if ((row & 7) == 0) {
        unsigned char zero = 0;
        if (buf_put(&c->validity, &zero, 1)) return -1;
    }
    if (valid)
        ((unsigned char *)c->validity.data)[row >> 3] |= (unsigned char)(1u << (row & 7));
    else
        c->nulls++;
    return 0;
}

static int put_offset(Buf *offsets, size_t value) {
    int64_t v = (int64_t)value;
    return buf_put(offsets, &v, sizeof v);
}

/* Four independent lanes of eight bytes: fast on long texts, and only a hint (every
 * match is confirmed by comparing the bytes). */
static uint64_t hash_bytes(const unsigned char *p, size_t n) {
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t a = k ^ n, b = 0xbf58476d1ce4e5b9ULL, c = 0x94d049bb133111ebULL, d = k * 3;
    uint64_t w[4];
    while (n >= 32) {
        memcpy(w, p, 32);
        a = (a ^ w[0]) * k; b = (b ^ w[1]) * k; c = (c ^ w[2]) * k; d = (d ^ w[3]) * k;
        a ^= a >> 29; b ^= b >> 29; c ^= c >> 29; d ^= d >> 29;
        p += 32;
        n -= 32;
    }
    uint64_t h = a ^ (b * 3) ^ (c * 5) ^ (d * 7);
    while (n >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        h = (h ^ x) * k;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t x = 0;
    memcpy(&x, p, n);
    h = (h ^ x ^ (n << 56)) * 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static int dict_grow(Column *c) {
    size_t slots = c->slots.len / sizeof(uint32_t);
    size_t grown = slots ? slots * 2 : 1024;
    if (grown > SIZE_MAX / sizeof(uint32_t)) return -1;
    c->slots.len = 0;
    if (buf_reserve(&c->slots, grown * sizeof(uint32_t))) return -1;
    memset(c->slots.data, 0, grown * sizeof(uint32_t));
    c->slots.len = grown * sizeof(uint32_t);
    uint32_t *table = (uint32_t *)c->slots.data;
    const uint64_t *hashes = (const uint64_t *)c->hashes.data;
    size_t mask = grown - 1;
    for (size_t e = 0; e < c->entries; e++) {
        size_t at = (size_t)hashes[e] & mask;
        while (table[at]) at = (at + 1) & mask;
        table[at] = (uint32_t)(e + 1);
    }
    return 0;
}

/* The dictionary index of text ``p[0:n]``, added if new; -1 on failure. */
static int64_t dict_index(Column *c, const unsigned char *p, size_t n) {
    size_t slots = c->slots.len / sizeof(uint32_t);
    if (slots == 0 || (c->entries + 1) * 2 > slots) {
        if (c->entries >= (size_t)INT32_MAX - 1 || dict_grow(c)) return -1;
        slots = c->slots.len / sizeof(uint32_t);
    }
    uint64_t h = hash_bytes(p, n);
    uint32_t *table = (uint32_t *)c->slots.data;
    const uint64_t *hashes = (const uint64_t *)c->hashes.data;
    const int64_t *offsets = (const int64_t *)c->offsets.data;
    size_t mask = slots - 1, at = (size_t)h & mask;
    while (table[at]) {
        size_t e = table[at] - 1;
        size_t start = (size_t)offsets[e], len = (size_t)offsets[e + 1] - start;
        if (hashes[e] == h && len == n && (n == 0 || memcmp(c->dict.data + start, p, n) == 0))
            return (int64_t)e;
        at = (at + 1) & mask;
    }
    if (buf_put(&c->dict, p, n) || put_offset(&c->offsets, c->dict.len)
            || buf_put(&c->hashes, &h, sizeof h))
        return -1;
    table[at] = (uint32_t)(c->entries + 1);
    return (int64_t)c->entries++;
}

enum { STEP_OK = 0, STEP_MISMATCH = 1, STEP_NOMEM = 2 };

/* Append the current row's value of column ``i`` of ``stmt`` to ``c``. */
static int put_value(Column *c, sqlite3_stmt *stmt, int i, int64_t row) {
    int type = sqlite3_column_type(stmt, i);
    if (type == SQLITE_NULL) {
        if (put_valid(c, row, 0)) return STEP_NOMEM;
        if (c->kind == 'i') {
            int64_t zero = 0;
            return buf_put(&c->values, &zero, sizeof zero) ? STEP_NOMEM : STEP_OK;
        }
        if (c->kind == 't') return put_offset(&c->offsets, c->values.len) ? STEP_NOMEM : STEP_OK;
        int32_t zero = 0;
        return buf_put(&c->values, &zero, sizeof zero) ? STEP_NOMEM : STEP_OK;
    }
    if (c->kind == 'i') {
        if (type != SQLITE_INTEGER) return STEP_MISMATCH;
        int64_t value = sqlite3_column_int64(stmt, i);
        return (put_valid(c, row, 1) || buf_put(&c->values, &value, sizeof value))
            ? STEP_NOMEM : STEP_OK;
    }
    const unsigned char *text = sqlite3_column_text(stmt, i);
    int bytes = sqlite3_column_bytes(stmt, i);
    if (text == NULL || bytes < 0) {
        if (sqlite3_errcode(sqlite3_db_handle(stmt)) == SQLITE_NOMEM) return STEP_NOMEM;
        text = (const unsigned char *)"";
        bytes = 0;
    }
    if (put_valid(c, row, 1)) return STEP_NOMEM;
    if (c->kind == 't') {
        return (buf_put(&c->values, text, (size_t)bytes)
                || put_offset(&c->offsets, c->values.len)) ? STEP_NOMEM : STEP_OK;
    }
    int64_t index = dict_index(c, text, (size_t)bytes);
    if (index < 0) return STEP_NOMEM;
    int32_t narrow = (int32_t)index;
    return buf_put(&c->values, &narrow, sizeof narrow) ? STEP_NOMEM : STEP_OK;
}

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
    Column *columns;
    int ncolumns;
    int busy;
} Reader;

static void reader_close_db(Reader *self) {
    if (self->db != NULL) {
        sqlite3_close_v2(self->db);
        self->db = NULL;
    }
    for (int i = 0; i < self->ncolumns; i++) column_free(&self->columns[i]);
    free(self->columns);
    self->columns = NULL;
    self->ncolumns = 0;
}

static int Reader_init(Reader *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"uri", NULL};
    const char *uri;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s", names, &uri)) return -1;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the reader is in use");
        return -1;
    }
    reader_close_db(self);
    sqlite3 *db = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                         NULL);
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK) {
        PyErr_Format(PyExc_OSError, "SQLite could not open the file: %s",
                     db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close_v2(db);
        return -1;
    }
    self->db = db;
    return 0;
}

static void Reader_dealloc(Reader *self) {
    reader_close_db(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *bytes_of(const Buf *b) {
    return PyBytes_FromStringAndSize(b->len ? b->data : "", (Py_ssize_t)b->len);
}

static PyObject *validity_of(const Column *c) {
    if (c->nulls == 0) Py_RETURN_NONE;
    return bytes_of(&c->validity);
}

static PyObject *column_result(const Column *c) {
    if (c->kind == 'i')
        return Py_BuildValue("(NNL)", bytes_of(&c->values), validity_of(c), (long long)c->nulls);
    if (c->kind == 't')
        return Py_BuildValue("(NNNL)", bytes_of(&c->offsets), bytes_of(&c->values),
                             validity_of(c), (long long)c->nulls);
    return Py_BuildValue("(NNNNL)", bytes_of(&c->values), bytes_of(&c->offsets),
                         bytes_of(&c->dict), validity_of(c), (long long)c->nulls);
}

static int prepare_columns(Reader *self, const char *kinds, int n) {
    if (n > self->ncolumns) {
        Column *grown = realloc(self->columns, (size_t)n * sizeof(Column));
        if (grown == NULL) return -1;
        memset(grown + self->ncolumns, 0, (size_t)(n - self->ncolumns) * sizeof(Column));
        self->columns = grown;
        self->ncolumns = n;
    }
    for (int i = 0; i < n; i++) {
        Column *c = &self->columns[i];
        column_reset(c, kinds[i]);
        if (kinds[i] != 'i' && put_offset(&c->offsets, 0)) return -1;
    }
    return 0;
}

/* Step every row of ``stmt`` into the columns; the SQLite result code, or -1 for a value
 * of the wrong kind, -2 for memory. */
static int step_rows(Reader *self, sqlite3_stmt *stmt, int n, int64_t *rows) {
    int rc;
    int64_t row = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        for (int i = 0; i < n; i++) {
            int got = put_value(&self->columns[i], stmt, i, row);
            if (got == STEP_MISMATCH) return -1;
            if (got == STEP_NOMEM) return -2;
        }
        row++;
    }
    *rows = row;
    return rc;
}

static PyObject *Reader_query(Reader *self, PyObject *args) {
    const char *sql, *kinds;
    Py_ssize_t sql_len, nkinds;
    if (!PyArg_ParseTuple(args, "s#s#", &sql, &sql_len, &kinds, &nkinds)) return NULL;
    if (self->db == NULL) {
        PyErr_SetString(PyExc_ValueError, "the reader is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the reader is in use by another thread");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkinds; i++) {
        if (kinds[i] != 'i' && kinds[i] != 't' && kinds[i] != 'd') {
            PyErr_SetString(PyExc_ValueError, "kinds are 'i', 't' or 'd'");
            return NULL;
        }
    }
    if (nkinds > 32767 || sql_len > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many columns or too long a query");
        return NULL;
    }
    self->busy = 1;
    sqlite3_stmt *stmt = NULL;
    int rc, n = (int)nkinds, prepared_columns = -1, failed_setup = 0;
    int64_t rows = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = sqlite3_prepare_v2(self->db, sql, (int)sql_len, &stmt, NULL);
    if (rc == SQLITE_OK && stmt != NULL) {
        prepared_columns = sqlite3_column_count(stmt);
        if (prepared_columns == n) {
            if (prepare_columns(self, kinds, n)) failed_setup = 1;
            else rc = step_rows(self, stmt, n, &rows);
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc > 0) {
        PyErr_Format(PyExc_OSError, "SQLite: %s", sqlite3_errmsg(self->db));
    } else if (stmt == NULL && rc == SQLITE_OK) {
        PyErr_SetString(PyExc_ValueError, "no statement in the query");
    } else if (prepared_columns != n) {
        PyErr_Format(PyExc_ValueError, "the query has %d columns, %d kinds were given",
                     prepared_columns, n);
    } else if (failed_setup || rc == -2) {
        PyErr_NoMemory();
    } else if (rc == -1) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *columns = PyList_New(n);
        if (columns != NULL) {
            for (int i = 0; i < n; i++) {
                PyObject *one = column_result(&self->columns[i]);
                if (one == NULL) { Py_CLEAR(columns); break; }
                PyList_SET_ITEM(columns, i, one);
            }
        }
        if (columns != NULL) result = Py_BuildValue("(LN)", (long long)rows, columns);
    }
    Py_BEGIN_ALLOW_THREADS
    sqlite3_finalize(stmt);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    return result;
}

static PyObject *Reader_close(Reader *self, PyObject *Py_UNUSED(ignored)) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the reader is in use by another thread");
        return NULL;
    }
    reader_close_db(self);
    Py_RETURN_NONE;
}

static PyMethodDef Reader_methods[] = {
    {"query", (PyCFunction)Reader_query, METH_VARARGS,
     "query(sql, kinds) -> (rows, columns) or None: every row of sql as column buffers"},
    {"close", (PyCFunction)Reader_close, METH_NOARGS, "close the connection"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "memtui.sources.common._sqlite_rows.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(uri): a read-only SQLite connection whose queries give column buffers",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sqlite_rows",
    "SQLite query rows as typed column buffers (see the C file's comment)", -1, NULL,
};

PyMODINIT_FUNC PyInit__sqlite_rows(void) {
    if (PyType_Ready(&ReaderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "sqlite_version", sqlite3_libversion()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
