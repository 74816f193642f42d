/* memtui.sources.torch_snapshot._reader: a PyTorch memory snapshot pickle straight to columns.
 *
 * What it owns: walking the pickle opcode stream of a snapshot (protocols 2 to 5, framing,
 * memo, the containers and scalars PyTorch's writer emits) and appending each trace entry's
 * fields (``device_traces[d][i]``) into typed column buffers (bytearrays the Python side sees
 * as numpy arrays without a copy), interning action names and frame lists once.  The trace
 * entries never become dicts; everything else in the file (segments, blocks, annotations,
 * settings: small beside the trace) is built as the ordinary Python objects pickle would build.
 *
 * It is an accelerator, never a judge: the first thing outside what a snapshot uses (a global,
 * a reduce, any opcode not listed in ``run``, a trace entry of the wrong shape or with a value
 * the Python check would drop, a shared entry, a stack underflow, a truncated file, an
 * allocation that fails) makes ``read`` return ``(None, reason)`` and the caller reads the file
 * again with the safe Python unpickler, which then gives the warnings and the one-line errors.
 * So the two readers agree by construction on every file the compiled one does not finish.
 *
 * Why C against the CPython API (not Cython, not Rust): it needs only the compiler that
 * ``pip install`` already uses for any extension and setuptools, which the project builds
 * with anyway (no Cython or maturin at build time, no numpy headers: the columns are
 * bytearrays); and the loop is a byte-at-a-time state machine over a buffer, where C is as
 * short as anything else.  The safety rules are local and checked in one place each:
 *   - every read goes through ``need`` (a length past the end of the file: bail, before
 *     anything is allocated for it);
 *   - memo indices must stay near the memo's size (a ``LONG_BINPUT 2**31`` in a 20-byte
 *     file is refused, not allocated), and each trace row costs at least one byte of input,
 *     so every buffer is bounded by the file's size;
 *   - the caller runs it inside the same ``RLIMIT_DATA`` bound as the Python path.
 * The file is read in chunks with the GIL released while reading (as pickle.load does).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* ---- values on the stack ------------------------------------------------------------------ */

enum { T_OBJ = 0, T_INT = 1, T_UINT = 2 };

typedef struct {
    PyObject *o;     /* T_OBJ: an owned reference */
    int64_t i;       /* T_INT: the value; T_UINT: (uint64_t) the value */
    Py_ssize_t slot; /* the memo slot it was last put in or got from, or -1 */
    int tag;
} Val;

/* fields of a trace entry with a typed column */
enum { F_ACTION = 0, F_ADDR, F_SIZE, F_STREAM, F_TIME, F_FRAMES, N_FIELDS };
static const char *FIELD_NAMES[N_FIELDS] = {"action", "addr", "size", "stream", "time_us", "frames"};
/* state of a field in a row: 2 bits each */
enum { S_ABSENT = 0, S_NONE = 1, S_VALUE = 2 };

#define SIZE_MAX_OK (((int64_t)1) << 62)
#define TIME_MAX_OK (INT64_MAX / 1000)

/* ---- the column trace type ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, cap;
    PyObject *action, *addr, *size, *stream, *time_us, *frames, *state; /* bytearrays */
    PyObject *extras;  /* dict: key -> list of values (None where absent) */
    PyObject *present; /* dict: key -> bytearray of 0/1 */
    PyObject *names;   /* list: action code -> str (shared by the file's traces) */
    PyObject *stacks;  /* list: frames code -> list (shared) */
    Py_ssize_t pending; /* rows begun, not yet appended */
} ColumnTrace;

static void ct_dealloc(ColumnTrace *self) {
    Py_XDECREF(self->action); Py_XDECREF(self->addr); Py_XDECREF(self->size);
    Py_XDECREF(self->stream); Py_XDECREF(self->time_us); Py_XDECREF(self->frames);
    Py_XDECREF(self->state); Py_XDECREF(self->extras); Py_XDECREF(self->present);
    Py_XDECREF(self->names); Py_XDECREF(self->stacks);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ct_len_get(ColumnTrace *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->n);
}

#include <structmember.h>
static PyMemberDef ct_members[] = {
    {"action", T_OBJECT, offsetof(ColumnTrace, action), READONLY, "int32 action codes"},
    {"addr", T_OBJECT, offsetof(ColumnTrace, addr), READONLY, "uint64"},
    {"size", T_OBJECT, offsetof(ColumnTrace, size), READONLY, "int64"},
    {"stream", T_OBJECT, offsetof(ColumnTrace, stream), READONLY, "int64"},
    {"time_us", T_OBJECT, offsetof(ColumnTrace, time_us), READONLY, "int64"},
    {"frames", T_OBJECT, offsetof(ColumnTrace, frames), READONLY, "int32 frames codes, -1 none"},
    {"state", T_OBJECT, offsetof(ColumnTrace, state), READONLY, "uint16: 2 bits per field"},
    {"extras", T_OBJECT, offsetof(ColumnTrace, extras), READONLY, "other keys' values"},
    {"present", T_OBJECT, offsetof(ColumnTrace, present), READONLY, "other keys' presence"},
    {"names", T_OBJECT, offsetof(ColumnTrace, names), READONLY, "action names"},
    {"stacks", T_OBJECT, offsetof(ColumnTrace, stacks), READONLY, "distinct frame lists"},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef ct_getset[] = {
    {"rows", (getter)ct_len_get, NULL, "number of entries", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ColumnTraceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "memtui.sources.torch_snapshot._reader.RawColumns",
    .tp_basicsize = sizeof(ColumnTrace),
    .tp_dealloc = (destructor)ct_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One device trace's entries as column buffers (made by read only).",
    .tp_members = ct_members,
    .tp_getset = ct_getset,
};

/* ---- pointer hash set (guards lists that were interned as stacks) ------------------------- */

typedef struct {
    void **keys;
    size_t cap, len;
} PtrSet;

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
    return (size_t)x;
}

static int ptrset_has(PtrSet *s, const void *p) {
    if (!s->cap) return 0;
    for (size_t i = ptr_hash(p) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (s->keys[i] == p) return 1;
        if (!s->keys[i]) return 0;
    }
}

static int ptrset_add(PtrSet *s, void *p) {
    if ((s->len + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        void **keys = PyMem_RawCalloc(cap, sizeof(void *));
        if (!keys) return -1;
        for (size_t j = 0; j < s->cap; j++) {
            if (!s->keys[j]) continue;
            size_t i = ptr_hash(s->keys[j]) & (cap - 1);
            while (keys[i]) i = (i + 1) & (cap - 1);
            keys[i] = s->keys[j];
        }
        PyMem_RawFree(s->keys);
        s->keys = keys;
        s->cap = cap;
    }
    size_t i = ptr_hash(p) & (s->cap - 1);
    while (s->keys[i] && s->keys[i] != p) i = (i + 1) & (s->cap - 1);
    if (!s->keys[i]) { s->keys[i] = p; s->len++; }
    return 0;
}

/* ---- the machine --------------------------------------------------------------------------- */

#define N_KEY_CACHE 32
#define N_NAME_CACHE 16

typedef struct { uint64_t hash; int32_t code; } StackSlot;

typedef struct {
    /* input */
    int fd;
    char *buf;
    Py_ssize_t cap, pos, end;
    int64_t file_left, file_size;
    /* stack and marks */
    Val *stack;
    Py_ssize_t sp, stack_cap;
    Py_ssize_t *marks;
    Py_ssize_t nmarks, marks_cap;
    /* memo */
    PyObject **memo;
    int32_t *memo_code;
    Py_ssize_t memo_cap, memo_len;
    /* the snapshot's traces */
    PyObject *container;   /* the device_traces list (borrowed: it lives on the stack or in a dict) */
    ColumnTrace *cur;      /* the trace rows are being added to */
    PyObject *entry;       /* the sentinel standing for a trace entry on the stack */
    uint16_t row_state;
    /* interning */
    PyObject *names;       /* list of action names */
    PyObject *name_codes;  /* dict str -> code */
    PyObject *name_ptr[N_NAME_CACHE];
    int32_t name_code[N_NAME_CACHE];
    int n_name_ptr;
    PyObject *key_ptr[N_KEY_CACHE];
    int key_id[N_KEY_CACHE];  /* field, or N_FIELDS + an extra key's index */
    int n_key_ptr;
    PyObject *extra_keys;  /* list of str */
    PyObject *stacks;      /* list of distinct frame lists */
    StackSlot *stack_table;
    size_t stack_table_cap;
    PtrSet guarded;
    const char *reason;
    PyObject *progress;    /* progress(bytes read, size) after each chunk, or NULL */
    int raised;            /* progress raised: its exception is the result */
} VM;

static int bail(VM *vm, const char *why) {
    if (!vm->reason) vm->reason = why;
    return -1;
}

/* -- input -- */

static int need_slow(VM *vm, Py_ssize_t n);

/* Are ``n`` more bytes of input there?  Read more where not (bail past the file's end). */
static inline int need(VM *vm, Py_ssize_t n) {
    if (vm->end - vm->pos >= n) return 0;
    return need_slow(vm, n);
}

static int need_slow(VM *vm, Py_ssize_t n) {
    if (n < 0 || (int64_t)n > (int64_t)(vm->end - vm->pos) + vm->file_left)
        return bail(vm, "truncated");
    if (vm->pos) {
        memmove(vm->buf, vm->buf + vm->pos, (size_t)(vm->end - vm->pos));
        vm->end -= vm->pos;
        vm->pos = 0;
    }
    if (n > vm->cap) {
        Py_ssize_t cap = vm->cap * 2 > n ? vm->cap * 2 : n;
        char *buf = PyMem_RawRealloc(vm->buf, (size_t)cap);
        if (!buf) return bail(vm, "out of memory");
        vm->buf = buf;
        vm->cap = cap;
    }
    while (vm->end < n) {
        Py_ssize_t want = vm->cap - vm->end;
        if ((int64_t)want > vm->file_left) want = (Py_ssize_t)vm->file_left;
        ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        got = read(vm->fd, vm->buf + vm->end, (size_t)want);
        Py_END_ALLOW_THREADS
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return bail(vm, "read failed");
        vm->end += got;
        vm->file_left -= got;
        if (vm->progress) {
            PyObject *r = PyObject_CallFunction(vm->progress, "LL",
                                                (long long)(vm->file_size - vm->file_left),
                                                (long long)vm->file_size);
            if (!r) { vm->raised = 1; return bail(vm, "the progress listener raised"); }
            Py_DECREF(r);
        }
    }
    return 0;
}

static inline uint64_t le_u(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}

/* -- stack -- */

static int grow_stack(VM *vm, Val v);

static inline int push(VM *vm, Val v) {
    if (vm->sp == vm->stack_cap) return grow_stack(vm, v);
    vm->stack[vm->sp++] = v;
    return 0;
}

static int grow_stack(VM *vm, Val v) {
    {
        Py_ssize_t cap = vm->stack_cap ? vm->stack_cap * 2 : 256;
        if ((int64_t)cap > vm->file_size + 256) { /* each item costs an opcode */
            if (v.tag == T_OBJ) Py_XDECREF(v.o);
            return bail(vm, "stack larger than the file");
        }
        Val *s = PyMem_RawRealloc(vm->stack, (size_t)cap * sizeof(Val));
        if (!s) { if (v.tag == T_OBJ) Py_XDECREF(v.o); return bail(vm, "out of memory"); }
        vm->stack = s;
        vm->stack_cap = cap;
    }
    vm->stack[vm->sp++] = v;
    return 0;
}

static int push_obj(VM *vm, PyObject *o) {  /* steals o */
    if (!o) { PyErr_Clear(); return bail(vm, "object"); }
    Val v = {o, 0, -1, T_OBJ};
    return push(vm, v);
}

static int push_int(VM *vm, int64_t i) {
    Val v = {NULL, i, -1, T_INT};
    return push(vm, v);
}

static void val_clear(Val *v) {
    if (v->tag == T_OBJ) Py_CLEAR(v->o);
}

static int is_ct(PyObject *o) { return o && Py_TYPE(o) == &ColumnTraceType; }

/* A new reference to the object a value stands for: ints made PyLongs.  The entry sentinel,
 * a column trace and the trace container may not go into containers (except where the caller
 * checks first): a file that would put them anywhere else is not a snapshot as written. */
static PyObject *val_object(VM *vm, Val *v) {
    if (v->tag == T_INT) {
        PyObject *o = PyLong_FromLongLong(v->i);
        if (!o) { PyErr_Clear(); bail(vm, "out of memory"); }
        return o;
    }
    if (v->tag == T_UINT) {
        PyObject *o = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)v->i);
        if (!o) { PyErr_Clear(); bail(vm, "out of memory"); }
        return o;
    }
    if (v->o == vm->entry || is_ct(v->o) || (vm->container && v->o == vm->container)) {
        bail(vm, "a trace entry or trace list used as a value");
        return NULL;
    }
    Py_INCREF(v->o);
    return v->o;
}

static Py_ssize_t top_mark(VM *vm) {
    return vm->nmarks ? vm->marks[vm->nmarks - 1] : -1;
}

static void pop_to(VM *vm, Py_ssize_t sp) {
    while (vm->sp > sp) val_clear(&vm->stack[--vm->sp]);
}

/* -- memo -- */

static int memo_put(VM *vm, Py_ssize_t idx) {
    if (vm->sp < 1) return bail(vm, "memo put on an empty stack");
    if (idx < 0 || idx > vm->memo_len + 65536) return bail(vm, "memo index far past its size");
    if (idx >= vm->memo_cap) {
        Py_ssize_t cap = vm->memo_cap ? vm->memo_cap : 1024;
        while (cap <= idx) cap *= 2;
        if ((int64_t)cap > 2 * vm->file_size + 131072) return bail(vm, "memo larger than the file");
        PyObject **memo = PyMem_RawRealloc(vm->memo, (size_t)cap * sizeof(PyObject *));
        if (!memo) return bail(vm, "out of memory");
        vm->memo = memo;
        int32_t *codes = PyMem_RawRealloc(vm->memo_code, (size_t)cap * sizeof(int32_t));
        if (!codes) return bail(vm, "out of memory");
        vm->memo_code = codes;
        for (Py_ssize_t k = vm->memo_cap; k < cap; k++) { memo[k] = NULL; codes[k] = -1; }
        vm->memo_cap = cap;
    }
    Val *top = &vm->stack[vm->sp - 1];
    if (top->tag != T_OBJ) {  /* a memoised int: make it an object once */
        PyObject *o = val_object(vm, top);
        if (!o) return -1;
        top->o = o;
        top->tag = T_OBJ;
    }
    Py_INCREF(top->o);
    Py_XSETREF(vm->memo[idx], top->o);
    vm->memo_code[idx] = -1;
    top->slot = idx;
    if (idx >= vm->memo_len) vm->memo_len = idx + 1;
    return 0;
}

static int memo_get(VM *vm, Py_ssize_t idx) {
    if (idx < 0 || idx >= vm->memo_len || !vm->memo[idx]) return bail(vm, "memo get of nothing");
    PyObject *o = vm->memo[idx];
    if (o == vm->entry || is_ct(o) || o == vm->container)
        return bail(vm, "a trace entry or trace list referenced twice");
    Py_INCREF(o);
    Val v = {o, 0, idx, T_OBJ};
    return push(vm, v);
}

/* -- column traces -- */

static int grow_bytes(PyObject *ba, Py_ssize_t bytes) {
    return PyByteArray_Resize(ba, bytes);
}

static ColumnTrace *ct_new(VM *vm) {
    ColumnTrace *ct = PyObject_New(ColumnTrace, &ColumnTraceType);
    if (!ct) return NULL;
    ct->n = ct->cap = ct->pending = 0;
    ct->action = PyByteArray_FromStringAndSize(NULL, 0);
    ct->addr = PyByteArray_FromStringAndSize(NULL, 0);
    ct->size = PyByteArray_FromStringAndSize(NULL, 0);
    ct->stream = PyByteArray_FromStringAndSize(NULL, 0);
    ct->time_us = PyByteArray_FromStringAndSize(NULL, 0);
    ct->frames = PyByteArray_FromStringAndSize(NULL, 0);
    ct->state = PyByteArray_FromStringAndSize(NULL, 0);
    ct->extras = PyDict_New();
    ct->present = PyDict_New();
    ct->names = Py_NewRef(vm->names);
    ct->stacks = Py_NewRef(vm->stacks);
    if (!ct->action || !ct->addr || !ct->size || !ct->stream || !ct->time_us || !ct->frames ||
        !ct->state || !ct->extras || !ct->present) {
        Py_DECREF(ct);
        return NULL;
    }
    return ct;
}

static int ct_resize(ColumnTrace *ct, Py_ssize_t cap) {
    if (grow_bytes(ct->action, cap * 4) || grow_bytes(ct->addr, cap * 8) ||
        grow_bytes(ct->size, cap * 8) || grow_bytes(ct->stream, cap * 8) ||
        grow_bytes(ct->time_us, cap * 8) || grow_bytes(ct->frames, cap * 4) ||
        grow_bytes(ct->state, cap * 2))
        return -1;
    ct->cap = cap;
    return 0;
}

#define COL(ct, name, type) ((type *)PyByteArray_AS_STRING((ct)->name))

static int begin_row(VM *vm, ColumnTrace *ct) {
    if (ct->n == ct->cap) {
        Py_ssize_t cap = ct->cap ? ct->cap + ct->cap / 2 : 1024;
        if (ct_resize(ct, cap)) { PyErr_Clear(); return bail(vm, "out of memory"); }
    }
    Py_ssize_t r = ct->n++;
    COL(ct, action, int32_t)[r] = -1;
    COL(ct, addr, uint64_t)[r] = 0;
    COL(ct, size, int64_t)[r] = 0;
    COL(ct, stream, int64_t)[r] = 0;
    COL(ct, time_us, int64_t)[r] = 0;
    COL(ct, frames, int32_t)[r] = -1;
    COL(ct, state, uint16_t)[r] = 0;
    ct->pending++;
    vm->cur = ct;
    return 0;
}

static int key_of(VM *vm, Val *key) {
    if (key->tag != T_OBJ || !PyUnicode_CheckExact(key->o)) return -1;
    for (int k = 0; k < vm->n_key_ptr; k++)
        if (vm->key_ptr[k] == key->o) return vm->key_id[k];
    int id = -1;
    for (int f = 0; f < N_FIELDS; f++)
        if (PyUnicode_CompareWithASCIIString(key->o, FIELD_NAMES[f]) == 0) { id = f; break; }
    if (id < 0) {
        Py_ssize_t n = PyList_GET_SIZE(vm->extra_keys);
        for (Py_ssize_t k = 0; k < n && id < 0; k++) {
            int eq = PyUnicode_Compare(PyList_GET_ITEM(vm->extra_keys, k), key->o);
            if (eq == 0) id = N_FIELDS + (int)k;
        }
        if (PyErr_Occurred()) { PyErr_Clear(); return -1; }
        if (id < 0) {
            if (n >= 64) return -1; /* not a snapshot's handful of keys */
            if (PyList_Append(vm->extra_keys, key->o)) { PyErr_Clear(); return -1; }
            id = N_FIELDS + (int)n;
        }
    }
    if (vm->n_key_ptr < N_KEY_CACHE) { /* held, so its address is never reused */
        Py_INCREF(key->o);
        vm->key_ptr[vm->n_key_ptr] = key->o;
        vm->key_id[vm->n_key_ptr++] = id;
    }
    return id;
}

static int32_t name_code(VM *vm, PyObject *s) {
    for (int k = 0; k < vm->n_name_ptr; k++)
        if (vm->name_ptr[k] == s) return vm->name_code[k];
    PyObject *code = PyDict_GetItemWithError(vm->name_codes, s);
    int32_t c;
    if (code) {
        c = (int32_t)PyLong_AsLong(code);
    } else {
        if (PyErr_Occurred()) { PyErr_Clear(); return -1; }
        Py_ssize_t n = PyList_GET_SIZE(vm->names);
        if (n >= 1 << 20) return -1;
        PyObject *num = PyLong_FromSsize_t(n);
        if (!num || PyDict_SetItem(vm->name_codes, s, num) || PyList_Append(vm->names, s)) {
            Py_XDECREF(num); PyErr_Clear(); return -1;
        }
        Py_DECREF(num);
        c = (int32_t)n;
    }
    if (vm->n_name_ptr < N_NAME_CACHE) {
        Py_INCREF(s);
        vm->name_ptr[vm->n_name_ptr] = s;
        vm->name_code[vm->n_name_ptr++] = c;
    }
    return c;
}

/* An integer value of an entry: 1 and *out set, 0 for None, -1 for anything else (a bool, a
 * float, an int past 64 bits: the Python check would drop the entry, so the reader bails). */
static int entry_int(Val *v, int64_t *out, int *is_unsigned) {
    *is_unsigned = 0;
    if (v->tag == T_INT) { *out = v->i; return 1; }
    if (v->tag == T_UINT) { *out = v->i; *is_unsigned = 1; return 1; }
    if (v->o == Py_None) return 0;
    if (!PyLong_CheckExact(v->o)) return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v->o, &overflow);
    if (!overflow) { *out = x; return 1; }
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v->o);
        if (PyErr_Occurred()) { PyErr_Clear(); return -1; }
        *out = (int64_t)u;
        *is_unsigned = 1;
        return 1;
    }
    return -1;
}

static uint64_t items_hash(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        h ^= (uint64_t)(uintptr_t)PyList_GET_ITEM(list, k);
        h *= 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return h | 1;  /* 0 marks an empty slot */
}

static int same_items(PyObject *a, PyObject *b) {
    Py_ssize_t n = PyList_GET_SIZE(a);
    if (PyList_GET_SIZE(b) != n) return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyList_GET_ITEM(a, k) != PyList_GET_ITEM(b, k)) return 0;
    return 1;
}

/* The code of a frames list: lists holding the very same frame objects share one code (the
 * builder would intern them to one stack anyway, by content); the list kept is the first. */
static int32_t stack_code(VM *vm, Val *v) {
    PyObject *list = v->o;
    Py_ssize_t slot = v->slot;
    if (slot >= 0 && vm->memo[slot] == list && vm->memo_code[slot] >= 0) return vm->memo_code[slot];
    Py_ssize_t count = PyList_GET_SIZE(vm->stacks);
    if ((size_t)(count + 1) * 2 > vm->stack_table_cap) {
        size_t cap = vm->stack_table_cap ? vm->stack_table_cap * 2 : 1024;
        StackSlot *table = PyMem_RawCalloc(cap, sizeof(StackSlot));
        if (!table) return -1;
        for (size_t j = 0; j < vm->stack_table_cap; j++) {
            StackSlot e = vm->stack_table[j];
            if (!e.hash) continue;
            size_t i = (size_t)e.hash & (cap - 1);
            while (table[i].hash) i = (i + 1) & (cap - 1);
            table[i] = e;
        }
        PyMem_RawFree(vm->stack_table);
        vm->stack_table = table;
        vm->stack_table_cap = cap;
    }
    uint64_t h = items_hash(list);
    size_t i = (size_t)h & (vm->stack_table_cap - 1);
    int32_t code = -1;
    for (; vm->stack_table[i].hash; i = (i + 1) & (vm->stack_table_cap - 1)) {
        StackSlot e = vm->stack_table[i];
        if (e.hash == h && same_items(PyList_GET_ITEM(vm->stacks, e.code), list)) {
            code = e.code;
            break;
        }
    }
    if (code < 0) {
        if (count >= INT32_MAX - 1) return -1;
        if (PyList_Append(vm->stacks, list)) { PyErr_Clear(); return -1; }
        code = (int32_t)count;
        vm->stack_table[i].hash = h;
        vm->stack_table[i].code = code;
    }
    PyObject *kept = PyList_GET_ITEM(vm->stacks, code);
    /* Never changed from here on: a file that appends to it later is read by Python. */
    if (ptrset_add(&vm->guarded, kept)) return -1;
    if (kept != list) {
        /* held only by the memo and this value: the memo takes the kept list, this one is
         * freed (the memory of a frames list per entry).  Held elsewhere too: keep guarding. */
        if (slot >= 0 && vm->memo[slot] == list && Py_REFCNT(list) == 2) {
            Py_INCREF(kept);
            Py_SETREF(vm->memo[slot], kept);
        } else if (ptrset_add(&vm->guarded, list)) {
            return -1;
        } else if (PyList_Append(vm->stacks, list)) {  /* held, so never reused */
            PyErr_Clear();
            return -1;
        }
    }
    if (slot >= 0 && (vm->memo[slot] == list || vm->memo[slot] == kept))
        vm->memo_code[slot] = code;
    return code;
}

/* Whether ``a`` and ``b`` are equal texts or integers, or equal tuples of them (a
 * ``pool_id`` in every entry): values the reader made itself, compared without running
 * any code of theirs, one level deep. */
static int same_plain(PyObject *a, PyObject *b, int depth) {
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b))
        return PyUnicode_GET_LENGTH(a) == PyUnicode_GET_LENGTH(b)
            && PyUnicode_Compare(a, b) == 0;
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) {
        int equal = PyObject_RichCompareBool(a, b, Py_EQ);
        if (equal < 0) { PyErr_Clear(); return 0; }
        return equal;
    }
    if (depth == 0 && PyTuple_CheckExact(a) && PyTuple_CheckExact(b)) {
        Py_ssize_t n = PyTuple_GET_SIZE(a);
        if (n != PyTuple_GET_SIZE(b) || n > 8) return 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!same_plain(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i), 1)) return 0;
        return 1;
    }
    return 0;
}

/* ``o`` (a new reference to ``v``'s object), or the value before it in the column where
 * the two are equal texts, integers or tuples of them: ``compile_context``'s "N/A" and
 * ``pool_id``'s ``(0, 0)`` in every entry, each its own object in the file, are held
 * once.  The memo's slot takes the kept one too where nothing else holds this one (the
 * stack's value, the memo and ``o``), so this one is freed at once. */
static PyObject *shared_value(VM *vm, PyObject *values, Val *v, PyObject *o) {
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (!n) return o;
    PyObject *last = PyList_GET_ITEM(values, n - 1);
    if (last == o || !same_plain(last, o, 0))
        return o;
    if (v->slot >= 0 && vm->memo[v->slot] == o && Py_REFCNT(o) == 3) {
        Py_INCREF(last);
        Py_SETREF(vm->memo[v->slot], last);
    }
    Py_INCREF(last);
    Py_DECREF(o);
    return last;
}

static int extra_value(VM *vm, ColumnTrace *ct, Py_ssize_t row, int key, Val *v) {
    PyObject *name = PyList_GET_ITEM(vm->extra_keys, key - N_FIELDS);
    PyObject *values = PyDict_GetItemWithError(ct->extras, name);
    PyObject *present = PyDict_GetItemWithError(ct->present, name);
    if (!values || !present) {
        if (PyErr_Occurred()) { PyErr_Clear(); return bail(vm, "extra key"); }
        values = PyList_New(0);
        present = PyByteArray_FromStringAndSize(NULL, 0);
        if (!values || !present || PyDict_SetItem(ct->extras, name, values) ||
            PyDict_SetItem(ct->present, name, present)) {
            Py_XDECREF(values); Py_XDECREF(present); PyErr_Clear();
            return bail(vm, "out of memory");
        }
        Py_DECREF(values);
        Py_DECREF(present);
    }
    Py_ssize_t have = PyList_GET_SIZE(values);
    if (have > row) return bail(vm, "a key twice in an entry");
    Py_ssize_t plen = PyByteArray_GET_SIZE(present);
    if (PyByteArray_Resize(present, row + 1)) { PyErr_Clear(); return bail(vm, "out of memory"); }
    memset(PyByteArray_AS_STRING(present) + plen, 0, (size_t)(row + 1 - plen));
    PyByteArray_AS_STRING(present)[row] = 1;
    for (; have < row; have++)
        if (PyList_Append(values, Py_None)) { PyErr_Clear(); return bail(vm, "out of memory"); }
    PyObject *o = val_object(vm, v);
    if (!o) return -1;
    o = shared_value(vm, values, v, o);
    int failed = PyList_Append(values, o);
    Py_DECREF(o);
    if (failed) { PyErr_Clear(); return bail(vm, "out of memory"); }
    return 0;
}

/* One key and value of the entry being read into ``vm->cur``'s last row. */
static int entry_item(VM *vm, Val *key, Val *v) {
    ColumnTrace *ct = vm->cur;
    Py_ssize_t row = ct->n - 1;
    int id = key_of(vm, key);
    if (id < 0) return bail(vm, "an entry key that is not a short string");
    if (id >= N_FIELDS) return extra_value(vm, ct, row, id, v);
    uint16_t *state = &COL(ct, state, uint16_t)[row];
    if ((*state >> (2 * id)) & 3) return bail(vm, "a key twice in an entry");
    int s = S_VALUE;
    if (id == F_ACTION) {
        if (v->tag != T_OBJ || !PyUnicode_CheckExact(v->o)) return bail(vm, "action not a str");
        int32_t c = name_code(vm, v->o);
        if (c < 0) return bail(vm, "action");
        COL(ct, action, int32_t)[row] = c;
    } else if (id == F_FRAMES) {
        if (v->tag == T_OBJ && v->o == Py_None) {
            s = S_NONE;
        } else {
            if (v->tag != T_OBJ || !PyList_CheckExact(v->o)) return bail(vm, "frames not a list");
            int32_t c = stack_code(vm, v);
            if (c < 0) return bail(vm, "frames");
            COL(ct, frames, int32_t)[row] = c;
        }
    } else {
        int64_t x;
        int is_unsigned;
        int got = entry_int(v, &x, &is_unsigned);
        if (got < 0) return bail(vm, "an entry number of the wrong type");
        if (got == 0) {
            if (id == F_SIZE) return bail(vm, "size None");
            s = S_NONE;
        } else if (id == F_ADDR) {
            if (!is_unsigned && x < 0) return bail(vm, "negative addr");
            COL(ct, addr, uint64_t)[row] = (uint64_t)x;
        } else {
            if (is_unsigned) return bail(vm, "number past int64");
            if (id == F_SIZE) {
                if (x < 0 || x >= SIZE_MAX_OK) return bail(vm, "size out of range");
                COL(ct, size, int64_t)[row] = x;
            } else if (id == F_STREAM) {
                COL(ct, stream, int64_t)[row] = x;
            } else {
                if (x < 0 || x >= TIME_MAX_OK) return bail(vm, "time_us out of range");
                COL(ct, time_us, int64_t)[row] = x;
            }
        }
    }
    *state |= (uint16_t)(s << (2 * id));
    return 0;
}

/* -- opcodes on containers -- */

static int setitems(VM *vm, Py_ssize_t from) {
    /* the pairs are stack[from:sp], the target stack[from - 1] */
    if (from < 1 || ((vm->sp - from) & 1)) return bail(vm, "setitems shape");
    Val *target = &vm->stack[from - 1];
    if (target->tag != T_OBJ) return bail(vm, "setitems on a number");
    if (target->o == vm->entry) {
        if (!vm->cur || vm->cur->pending < 1) return bail(vm, "entry");
        for (Py_ssize_t k = from; k < vm->sp; k += 2)
            if (entry_item(vm, &vm->stack[k], &vm->stack[k + 1])) return -1;
    } else {
        if (!PyDict_CheckExact(target->o)) return bail(vm, "setitems on a non-dict");
        int top_level = from - 1 == 0;
        for (Py_ssize_t k = from; k < vm->sp; k += 2) {
            PyObject *key = val_object(vm, &vm->stack[k]);
            if (!key) return -1;
            Val *value = &vm->stack[k + 1];
            PyObject *obj;
            if (top_level && value->tag == T_OBJ && vm->container && value->o == vm->container)
                obj = Py_NewRef(value->o);  /* device_traces into the snapshot */
            else
                obj = val_object(vm, value);
            if (!obj) { Py_DECREF(key); return -1; }
            int failed = PyDict_SetItem(target->o, key, obj);
            Py_DECREF(key);
            Py_DECREF(obj);
            if (failed) { PyErr_Clear(); return bail(vm, "setitem failed"); }
        }
    }
    pop_to(vm, from);
    return 0;
}

static int appends(VM *vm, Py_ssize_t from) {
    if (from < 1) return bail(vm, "appends shape");
    Val *target = &vm->stack[from - 1];
    if (target->tag != T_OBJ) return bail(vm, "append to a number");
    if (is_ct(target->o)) {
        ColumnTrace *ct = (ColumnTrace *)target->o;
        Py_ssize_t count = vm->sp - from;
        if (ct != vm->cur || count > ct->pending) return bail(vm, "entries of another trace");
        Py_ssize_t first = ct->n - ct->pending;
        for (Py_ssize_t k = 0; k < count; k++) {
            Val *v = &vm->stack[from + k];
            if (v->tag != T_OBJ || v->o != vm->entry) return bail(vm, "a trace item not an entry");
            uint16_t st = COL(ct, state, uint16_t)[first + k];
            if (((st >> (2 * F_ACTION)) & 3) != S_VALUE || ((st >> (2 * F_SIZE)) & 3) != S_VALUE)
                return bail(vm, "an entry without action or size");
        }
        ct->pending -= count;
    } else {
        if (!PyList_CheckExact(target->o)) return bail(vm, "append to a non-list");
        if (ptrset_has(&vm->guarded, target->o)) return bail(vm, "a frames list changed later");
        int into_container = vm->container && target->o == vm->container;
        for (Py_ssize_t k = from; k < vm->sp; k++) {
            Val *v = &vm->stack[k];
            PyObject *obj;
            if (into_container && v->tag == T_OBJ && is_ct(v->o)) {
                if (((ColumnTrace *)v->o)->pending) return bail(vm, "trace with entries open");
                obj = Py_NewRef(v->o);
            } else {
                obj = val_object(vm, v);
            }
            if (!obj) return -1;
            int failed = PyList_Append(target->o, obj);
            Py_DECREF(obj);
            if (failed) { PyErr_Clear(); return bail(vm, "out of memory"); }
        }
    }
    pop_to(vm, from);
    return 0;
}

static int build_tuple(VM *vm, Py_ssize_t from) {
    if (from < 0 || from > vm->sp) return bail(vm, "tuple shape");
    PyObject *t = PyTuple_New(vm->sp - from);
    if (!t) { PyErr_Clear(); return bail(vm, "out of memory"); }
    for (Py_ssize_t k = from; k < vm->sp; k++) {
        PyObject *o = val_object(vm, &vm->stack[k]);
        if (!o) { Py_DECREF(t); return -1; }
        PyTuple_SET_ITEM(t, k - from, o);
    }
    pop_to(vm, from);
    return push_obj(vm, t);
}

static int pop_mark(VM *vm, Py_ssize_t *from) {
    if (!vm->nmarks) return bail(vm, "no mark");
    *from = vm->marks[--vm->nmarks];
    if (*from > vm->sp) return bail(vm, "mark past the stack");
    return 0;
}

/* Is ``stack[i]`` a str equal to ``text``? */
static int is_text(VM *vm, Py_ssize_t i, const char *text) {
    if (i < 0 || i >= vm->sp) return 0;
    Val *v = &vm->stack[i];
    return v->tag == T_OBJ && PyUnicode_CheckExact(v->o) &&
           PyUnicode_CompareWithASCIIString(v->o, text) == 0;
}

static int empty_list(VM *vm) {
    Py_ssize_t m = top_mark(vm);
    /* the device_traces list: a value under that key in the top-level dict */
    if (!vm->container && is_text(vm, vm->sp - 1, "device_traces") && vm->stack[0].tag == T_OBJ &&
        PyDict_CheckExact(vm->stack[0].o) &&
        ((m == 1 && ((vm->sp - m) & 1)) || (m < 0 && vm->sp == 2))) {
        PyObject *list = PyList_New(0);
        if (!list) { PyErr_Clear(); return bail(vm, "out of memory"); }
        vm->container = list;
        return push_obj(vm, list);
    }
    /* a device's trace: an item of that list */
    if (vm->container) {
        Val *top = vm->sp ? &vm->stack[vm->sp - 1] : NULL;
        int single = top && top->tag == T_OBJ && top->o == vm->container;
        int batched = m >= 1 && vm->stack[m - 1].tag == T_OBJ &&
                      vm->stack[m - 1].o == vm->container &&
                      (vm->sp == m || (top->tag == T_OBJ && is_ct(top->o)));
        if (single || batched) {
            if (vm->cur && vm->cur->pending) return bail(vm, "trace with entries open");
            ColumnTrace *ct = ct_new(vm);
            if (!ct) { PyErr_Clear(); return bail(vm, "out of memory"); }
            return push_obj(vm, (PyObject *)ct);
        }
    }
    return push_obj(vm, PyList_New(0));
}

static int empty_dict(VM *vm) {
    if (vm->sp) {
        Val *top = &vm->stack[vm->sp - 1];
        Py_ssize_t m = top_mark(vm);
        ColumnTrace *ct = NULL;
        if (top->tag == T_OBJ && is_ct(top->o)) {
            ct = (ColumnTrace *)top->o;  /* APPEND of a trace's only entry */
        } else if (m >= 1 && vm->stack[m - 1].tag == T_OBJ && is_ct(vm->stack[m - 1].o)) {
            ColumnTrace *below = (ColumnTrace *)vm->stack[m - 1].o;
            if (vm->sp - m == (below == vm->cur ? below->pending : 0)) ct = below;
        }
        if (ct) {
            if (vm->cur && vm->cur != ct && vm->cur->pending) return bail(vm, "interleaved traces");
            if ((int64_t)ct->n >= vm->file_size) return bail(vm, "more entries than bytes");
            if (begin_row(vm, ct)) return -1;
            Py_INCREF(vm->entry);
            return push_obj(vm, vm->entry);
        }
    }
    return push_obj(vm, PyDict_New());
}

/* -- the loop -- */

static PyObject *run(VM *vm) {
    const unsigned char *p;
    if (need(vm, 2)) return NULL;
    p = (const unsigned char *)vm->buf + vm->pos;
    if (p[0] != 0x80 || p[1] < 2 || p[1] > 5) { bail(vm, "not a protocol 2-5 pickle"); return NULL; }
    vm->pos += 2;
    for (;;) {
        if (need(vm, 1)) return NULL;
        unsigned char op = (unsigned char)vm->buf[vm->pos++];
        int rc = 0;
        Py_ssize_t from;
        switch (op) {
        case 0x95: /* FRAME */
            if (need(vm, 8)) return NULL;
            {
                uint64_t len = le_u((const unsigned char *)vm->buf + vm->pos, 8);
                vm->pos += 8;
                if (len > (uint64_t)(vm->end - vm->pos) + (uint64_t)vm->file_left) {
                    bail(vm, "frame past the end");
                    return NULL;
                }
            }
            break;
        case '.': /* STOP */
            if (vm->sp != 1 || vm->stack[0].tag != T_OBJ) { bail(vm, "stack at STOP"); return NULL; }
            if (vm->cur && vm->cur->pending) { bail(vm, "entries open at STOP"); return NULL; }
            {
                PyObject *result = val_object(vm, &vm->stack[0]);
                pop_to(vm, 0);
                return result;
            }
        case '(': /* MARK */
            if (vm->nmarks == vm->marks_cap) {
                Py_ssize_t cap = vm->marks_cap ? vm->marks_cap * 2 : 64;
                if ((int64_t)cap > vm->file_size + 64) { bail(vm, "marks"); return NULL; }
                Py_ssize_t *marks = PyMem_RawRealloc(vm->marks, (size_t)cap * sizeof(Py_ssize_t));
                if (!marks) { bail(vm, "out of memory"); return NULL; }
                vm->marks = marks;
                vm->marks_cap = cap;
            }
            vm->marks[vm->nmarks++] = vm->sp;
            break;
        case '}': rc = empty_dict(vm); break;
        case ']': rc = empty_list(vm); break;
        case ')': rc = push_obj(vm, PyTuple_New(0)); break;
        case 'N': rc = push_obj(vm, Py_NewRef(Py_None)); break;
        case 0x88: rc = push_obj(vm, Py_NewRef(Py_True)); break;
        case 0x89: rc = push_obj(vm, Py_NewRef(Py_False)); break;
        case 'J': /* BININT */
            if (need(vm, 4)) return NULL;
            rc = push_int(vm, (int32_t)(uint32_t)le_u((const unsigned char *)vm->buf + vm->pos, 4));
            vm->pos += 4;
            break;
        case 'K': /* BININT1 */
            if (need(vm, 1)) return NULL;
            rc = push_int(vm, (unsigned char)vm->buf[vm->pos++]);
            break;
        case 'M': /* BININT2 */
            if (need(vm, 2)) return NULL;
            rc = push_int(vm, (int64_t)le_u((const unsigned char *)vm->buf + vm->pos, 2));
            vm->pos += 2;
            break;
        case 0x8a: /* LONG1 */
            if (need(vm, 1)) return NULL;
            {
                int n = (unsigned char)vm->buf[vm->pos];
                if (need(vm, 1 + n)) return NULL;
                const unsigned char *b = (const unsigned char *)vm->buf + vm->pos + 1;
                vm->pos += 1 + n;
                if (n == 0) {
                    rc = push_int(vm, 0);
                } else if (n <= 8) {
                    uint64_t u = le_u(b, n);
                    if (n < 8 && (b[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
                    rc = push_int(vm, (int64_t)u);
                } else if (n == 9 && b[8] == 0) {
                    Val v = {NULL, (int64_t)le_u(b, 8), -1, T_UINT};
                    if (!(b[7] & 0x80)) v.tag = T_INT;  /* a non-minimal encoding */
                    rc = push(vm, v);
                } else {  /* past 64 bits: no snapshot field is; the Python reader decides */
                    bail(vm, "an integer past 64 bits");
                    return NULL;
                }
            }
            break;
        case 'G': /* BINFLOAT */
            if (need(vm, 8)) return NULL;
            {
                double d = PyFloat_Unpack8(vm->buf + vm->pos, 0);
                vm->pos += 8;
                if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); bail(vm, "float"); return NULL; }
                rc = push_obj(vm, PyFloat_FromDouble(d));
            }
            break;
        case 0x8c: /* SHORT_BINUNICODE */
        case 'X':  /* BINUNICODE */
        {
            int width = op == 'X' ? 4 : 1;
            if (need(vm, width)) return NULL;
            Py_ssize_t n = (Py_ssize_t)le_u((const unsigned char *)vm->buf + vm->pos, width);
            if (need(vm, width + n)) return NULL;
            PyObject *s = PyUnicode_DecodeUTF8(vm->buf + vm->pos + width, n, "surrogatepass");
            vm->pos += width + n;
            rc = push_obj(vm, s);
            break;
        }
        case 0x94: rc = memo_put(vm, vm->memo_len); break; /* MEMOIZE */
        case 'q': /* BINPUT */
            if (need(vm, 1)) return NULL;
            rc = memo_put(vm, (unsigned char)vm->buf[vm->pos++]);
            break;
        case 'r': /* LONG_BINPUT */
            if (need(vm, 4)) return NULL;
            rc = memo_put(vm, (Py_ssize_t)le_u((const unsigned char *)vm->buf + vm->pos, 4));
            vm->pos += 4;
            break;
        case 'h': /* BINGET */
            if (need(vm, 1)) return NULL;
            rc = memo_get(vm, (unsigned char)vm->buf[vm->pos++]);
            break;
        case 'j': /* LONG_BINGET */
            if (need(vm, 4)) return NULL;
            rc = memo_get(vm, (Py_ssize_t)le_u((const unsigned char *)vm->buf + vm->pos, 4));
            vm->pos += 4;
            break;
        case 's': /* SETITEM */
            if (vm->sp < 3) { bail(vm, "stack underflow"); return NULL; }
            rc = setitems(vm, vm->sp - 2);
            break;
        case 'u': /* SETITEMS */
            if (pop_mark(vm, &from)) return NULL;
            rc = setitems(vm, from);
            break;
        case 'a': /* APPEND */
            if (vm->sp < 2) { bail(vm, "stack underflow"); return NULL; }
            rc = appends(vm, vm->sp - 1);
            break;
        case 'e': /* APPENDS */
            if (pop_mark(vm, &from)) return NULL;
            rc = appends(vm, from);
            break;
        case 't': /* TUPLE */
            if (pop_mark(vm, &from)) return NULL;
            rc = build_tuple(vm, from);
            break;
        case 0x85: case 0x86: case 0x87: /* TUPLE1-3 */
        {
            Py_ssize_t n = op - 0x84;
            if (vm->sp < n) { bail(vm, "stack underflow"); return NULL; }
            rc = build_tuple(vm, vm->sp - n);
            break;
        }
        case 'l': /* LIST */
            if (pop_mark(vm, &from)) return NULL;
            {
                PyObject *list = PyList_New(0);
                if (!list) { PyErr_Clear(); bail(vm, "out of memory"); return NULL; }
                for (Py_ssize_t k = from; k < vm->sp && !rc; k++) {
                    PyObject *o = val_object(vm, &vm->stack[k]);
                    if (!o) rc = -1;
                    else { rc = PyList_Append(list, o) ? bail(vm, "oom") : 0; Py_DECREF(o); }
                }
                if (rc) { Py_DECREF(list); PyErr_Clear(); return NULL; }
                pop_to(vm, from);
                rc = push_obj(vm, list);
            }
            break;
        case 'd': /* DICT */
            if (pop_mark(vm, &from)) return NULL;
            {
                if ((vm->sp - from) & 1) { bail(vm, "odd dict"); return NULL; }
                PyObject *dict = PyDict_New();
                if (!dict) { PyErr_Clear(); bail(vm, "out of memory"); return NULL; }
                for (Py_ssize_t k = from; k < vm->sp && !rc; k += 2) {
                    PyObject *key = val_object(vm, &vm->stack[k]);
                    PyObject *o = key ? val_object(vm, &vm->stack[k + 1]) : NULL;
                    if (!o) rc = -1;
                    else if (PyDict_SetItem(dict, key, o)) rc = bail(vm, "setitem failed");
                    Py_XDECREF(key);
                    Py_XDECREF(o);
                }
                if (rc) { Py_DECREF(dict); PyErr_Clear(); return NULL; }
                pop_to(vm, from);
                rc = push_obj(vm, dict);
            }
            break;
        default:
            bail(vm, "an opcode a snapshot does not use");
            return NULL;
        }
        if (rc) return NULL;
    }
}

static void vm_free(VM *vm) {
    pop_to(vm, 0);
    PyMem_RawFree(vm->stack);
    PyMem_RawFree(vm->marks);
    for (Py_ssize_t k = 0; k < vm->memo_cap; k++) Py_XDECREF(vm->memo[k]);
    PyMem_RawFree(vm->memo);
    PyMem_RawFree(vm->memo_code);
    for (int k = 0; k < vm->n_key_ptr; k++) Py_DECREF(vm->key_ptr[k]);
    for (int k = 0; k < vm->n_name_ptr; k++) Py_DECREF(vm->name_ptr[k]);
    Py_XDECREF(vm->names);
    Py_XDECREF(vm->name_codes);
    Py_XDECREF(vm->extra_keys);
    Py_XDECREF(vm->stacks);
    Py_XDECREF(vm->entry);
    PyMem_RawFree(vm->stack_table);
    PyMem_RawFree(vm->guarded.keys);
    PyMem_RawFree(vm->buf);
}

/* Trim every trace's buffers to its rows, fill the extra columns to the end. */
static int finish_traces(VM *vm, PyObject *container) {
    if (!container) return 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(container); k++) {
        PyObject *item = PyList_GET_ITEM(container, k);
        if (!is_ct(item)) continue;
        ColumnTrace *ct = (ColumnTrace *)item;
        if (ct_resize(ct, ct->n)) { PyErr_Clear(); return bail(vm, "out of memory"); }
        PyObject *key, *values;
        Py_ssize_t pos = 0;
        while (PyDict_Next(ct->extras, &pos, &key, &values)) {
            PyObject *present = PyDict_GetItem(ct->present, key);
            Py_ssize_t plen = PyByteArray_GET_SIZE(present);
            if (PyByteArray_Resize(present, ct->n)) { PyErr_Clear(); return bail(vm, "oom"); }
            memset(PyByteArray_AS_STRING(present) + plen, 0, (size_t)(ct->n - plen));
            while (PyList_GET_SIZE(values) < ct->n)
                if (PyList_Append(values, Py_None)) { PyErr_Clear(); return bail(vm, "oom"); }
        }
    }
    return 0;
}

PyDoc_STRVAR(read_doc,
"read(fd, size, progress=None) -> (snapshot, None) or (None, reason)\n\n"
"Read the pickle at the open file descriptor ``fd`` (``size`` bytes, read from its current\n"
"position).  ``snapshot`` is what pickle.load would give, but each list of\n"
"``device_traces`` is a RawColumns; ``reason`` says why the file is left to the Python reader.\n"
"``progress(bytes_read, size)`` is called after each chunk read; what it raises is raised.");

static PyObject *reader_read(PyObject *module, PyObject *args) {
    (void)module;
    int fd;
    long long size;
    PyObject *progress = Py_None;
    if (!PyArg_ParseTuple(args, "iL|O:read", &fd, &size, &progress)) return NULL;
    VM vm;
    memset(&vm, 0, sizeof vm);
    vm.progress = progress == Py_None ? NULL : progress;
    vm.fd = fd;
    vm.file_left = vm.file_size = size < 0 ? 0 : size;
    vm.cap = 1 << 20;
    vm.buf = PyMem_RawMalloc((size_t)vm.cap);
    vm.names = PyList_New(0);
    vm.name_codes = PyDict_New();
    vm.extra_keys = PyList_New(0);
    vm.stacks = PyList_New(0);
    vm.entry = PyTuple_Pack(1, Py_None);  /* a private object nothing in a file can be */
    PyObject *result = NULL;
    if (!vm.buf || !vm.names || !vm.name_codes || !vm.extra_keys || !vm.stacks || !vm.entry) {
        PyErr_Clear();
        bail(&vm, "out of memory");
    } else {
        result = run(&vm);
        if (vm.raised) {  /* the listener's exception (a cancel) goes to the caller */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            Py_XDECREF(result);
            vm_free(&vm);
            PyErr_Restore(type, value, tb);
            return NULL;
        }
        if (PyErr_Occurred()) {  /* a failure not already turned into a reason */
            PyErr_Clear();
            bail(&vm, "error");
            Py_CLEAR(result);
        }
        if (result && finish_traces(&vm, vm.container)) Py_CLEAR(result);
        if (!result && !vm.reason) vm.reason = "error";
    }
    const char *reason = vm.reason;
    vm_free(&vm);
    if (PyErr_Occurred()) PyErr_Clear();
    if (!result) return Py_BuildValue("(Os)", Py_None, reason ? reason : "error");
    return Py_BuildValue("(NO)", result, Py_None);
}

static PyMethodDef methods[] = {
    {"read", reader_read, METH_VARARGS, read_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_reader",
    "A PyTorch memory snapshot pickle straight to column buffers (see the C source's comment).",
    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__reader(void) {
    if (PyType_Ready(&ColumnTraceType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&ColumnTraceType);
    if (PyModule_AddObject(m, "RawColumns", (PyObject *)&ColumnTraceType) < 0) {
        Py_DECREF(&ColumnTraceType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
