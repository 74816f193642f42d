/* memtui.sources.memscope._rows: the hot loops over an msMemScope capture's memory rows,
 * each one pass: the Attr keys the model needs out of a DB's JSON Attr column (``decode``),
 * the Ptr column's hexadecimal addresses (``pointers``), and the rows paired into blocks
 * (``runs``); and one over the python-trace calls of threads
 * whose calls do not nest: MindStudio Insight's stack replay for their depths (``depths``,
 * the reference is :func:`memtui.sources.memscope.timeline.replayed_depths`'s Python loop).
 *
 * ``decode`` is the hot loop of :func:`memtui.sources.memscope.attr.decode_json_attr`.  The
 * rules are those of the polars reference, :func:`memtui.sources.memscope.read.parse_attr`
 * (``attr_json=True``), which tests hold this pass to on every input (hypothesis-made texts,
 * hostile ones, every real and generated DB):
 *
 * - a number key (``allocation_id``, ``size``, ``total``): at the first ``"key":`` of the
 *   text, skip spaces and double quotes, then take everything up to the next double quote
 *   (no such quote: null); it is a number where polars' ``cast(Int64, strict=False)`` takes
 *   it: an optional sign, then ASCII digits only, within int64;
 * - a text key (``owner``, ``inefficient_type``, ``type``): after the first ``"key":``,
 *   skip Unicode white space (regex ``\s``), then a JSON string: a double quote, then
 *   characters up to the next double quote not escaped by a backslash (a backslash takes
 *   the character after it, never a newline); the raw text between the quotes, escapes
 *   kept (anything else: null).
 *
 * Why C: the reference costs about one microsecond a row in regular expressions (0.6 s a
 * million rows of a DB, the biggest part of reading one after SQLite itself); this pass
 * reads each text once, finding every key at the double quotes, without the GIL (it runs
 * in the thread that fetched the rows, beside the one that builds).  No numpy headers:
 * the Arrow buffers come in through the buffer protocol and the outputs are bytearrays the
 * Python side wraps as Arrow arrays.
 *
 * Safety: every offset is checked against the data buffer before it is read (a bad one is
 * a ValueError, never a read out of bounds); outputs are sized from the input's length.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N_NUMBERS 3
#define N_TEXTS 3
#define N_KEYS (N_NUMBERS + N_TEXTS)

static const char *const KEYS[N_KEYS] = {
    "\"allocation_id\":", "\"size\":", "\"total\":",
    "\"owner\":", "\"inefficient_type\":", "\"type\":"};

static Py_ssize_t KEY_LEN[N_KEYS];

/* polars' cast of a text to Int64 (strict=False): [+-]?[0-9]+ within int64, else not one */
static int parse_int(const char *s, Py_ssize_t n, int64_t *out) {
    Py_ssize_t i = 0;
    int negative = 0;
    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        negative = s[0] == '-';
        i = 1;
    }
    if (i >= n) return 0;
    uint64_t value = 0;
    const uint64_t limit = negative ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < '0' || c > '9') return 0;
        unsigned digit = c - '0';
        if (value > (limit - digit) / 10u) return 0;
        value = value * 10u + digit;
    }
    *out = negative ? (int64_t)(0u - value) : (int64_t)value;
    return 1;
}

/* Bytes of the Unicode White_Space character at s (regex \s), or 0 */
static int white_space(const unsigned char *s, const unsigned char *end) {
    Py_ssize_t left = end - s;
    if (left <= 0) return 0;
    unsigned char c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d)) return 1;
    if (c == 0xc2 && left >= 2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (left < 3) return 0;
    unsigned char b = s[1], d = s[2];
    if (c == 0xe1 && b == 0x9a && d == 0x80) return 3;                          /* U+1680 */
    if (c == 0xe2 && b == 0x80 && ((d >= 0x80 && d <= 0x8a) || d == 0xa8 || d == 0xa9 ||
                                   d == 0xaf))
        return 3;                                       /* U+2000..U+200A, 2028, 2029, 202F */
    if (c == 0xe2 && b == 0x81 && d == 0x9f) return 3;                          /* U+205F */
    if (c == 0xe3 && b == 0x80 && d == 0x80) return 3;                          /* U+3000 */
    return 0;
}

/* The number after ``at`` (just past its key), see the module comment */
static int number_at(const char *at, const char *end, int64_t *out) {
    while (at < end && (*at == ' ' || *at == '"')) at++;
    const char *quote = memchr(at, '"', (size_t)(end - at));
    if (quote == NULL) return 0;
    return parse_int(at, quote - at, out);
}

/* The JSON string after ``at`` (just past its key): where its raw text starts, and its
 * length */
static int text_at(const char *at, const char *end, const char **start, Py_ssize_t *len) {
    int w;
    while ((w = white_space((const unsigned char *)at, (const unsigned char *)end)) > 0)
        at += w;
    if (at >= end || *at != '"') return 0;
    const char *first = ++at;
    while (at < end) {
        if (*at == '"') {
            *start = first;
            *len = at - first;
            return 1;
        }
        if (*at == '\\') {
            if (at + 1 >= end || at[1] == '\n') return 0;
            at += 2;
        } else {
            at++;
        }
    }
    return 0;
}

static PyObject *zeroed(Py_ssize_t size) {
    PyObject *out = PyByteArray_FromStringAndSize(NULL, size);
    if (out != NULL && size > 0) memset(PyByteArray_AS_STRING(out), 0, (size_t)size);
    return out;
}

#define SET_BIT(bits, i) ((bits)[(i) >> 3] |= (uint8_t)(1u << ((i) & 7)))

/* A string array handed over as its Arrow buffers: data, offsets (32-bit, or 64-bit where
 * ``wide``), validity (None where no value is null), and the array's slice. */
typedef struct {
    Py_buffer data, offsets, validity;
    int have_validity, wide;
    Py_ssize_t offset, length;
} Strings;

/* Take the buffers of ``(data, offsets, validity, offset, length, wide)`` and check that
 * the offsets and the validity cover the slice: 0, or -1 with an exception set (the caller
 * always calls strings_release). */
static int strings_take(PyObject *args, const char *format, Strings *in) {
    PyObject *data_obj, *offsets_obj, *validity_obj;
    memset(in, 0, sizeof(*in));
    if (!PyArg_ParseTuple(args, format, &data_obj, &offsets_obj, &validity_obj, &in->offset,
                          &in->length, &in->wide))
        return -1;
    if (in->offset < 0 || in->length < 0) {
        PyErr_SetString(PyExc_ValueError, "negative offset or length");
        return -1;
    }
    in->have_validity = validity_obj != Py_None;
    if (PyObject_GetBuffer(data_obj, &in->data, PyBUF_SIMPLE) < 0 ||
        PyObject_GetBuffer(offsets_obj, &in->offsets, PyBUF_SIMPLE) < 0 ||
        (in->have_validity && PyObject_GetBuffer(validity_obj, &in->validity, PyBUF_SIMPLE) < 0))
        return -1;
    Py_ssize_t width = in->wide ? 8 : 4;
    if (in->length > PY_SSIZE_T_MAX / 64 - in->offset ||
        in->offsets.len < (in->offset + in->length + 1) * width ||
        (in->have_validity && in->validity.len * 8 < in->offset + in->length)) {
        PyErr_SetString(PyExc_ValueError, "buffers shorter than the array");
        return -1;
    }
    return 0;
}

static void strings_release(Strings *in) {
    if (in->data.obj) PyBuffer_Release(&in->data);
    if (in->offsets.obj) PyBuffer_Release(&in->offsets);
    if (in->validity.obj) PyBuffer_Release(&in->validity);
}

/* Value i of the slice (no Python call: runs without the GIL): 1 with its text's bounds,
 * 0 where it is null, -1 where its offsets lie outside the data buffer. */
static int strings_value(const Strings *in, Py_ssize_t i, const char **start,
                         const char **end) {
    Py_ssize_t row = in->offset + i;
    const uint8_t *valid = in->have_validity ? in->validity.buf : NULL;
    if (valid != NULL && !(valid[row >> 3] & (1u << (row & 7)))) return 0;
    int64_t lo, hi;
    if (in->wide) {
        lo = ((const int64_t *)in->offsets.buf)[row];
        hi = ((const int64_t *)in->offsets.buf)[row + 1];
    } else {
        lo = ((const int32_t *)in->offsets.buf)[row];
        hi = ((const int32_t *)in->offsets.buf)[row + 1];
    }
    if (lo < 0 || hi < lo || hi > (int64_t)in->data.len) return -1;
    *start = (const char *)in->data.buf + lo;
    *end = (const char *)in->data.buf + hi;
    return 1;
}

PyDoc_STRVAR(decode_doc,
"decode(data, offsets, validity, offset, length, wide) ->\n"
"    ([values, bitmap] * 3, [offsets, data, bitmap] * 3)\n\n"
"The Arrow buffers of a string array (``wide``: 64-bit offsets, a large_string; validity\n"
"None where no value is null; ``offset``/``length``: the array's slice) to the Attr keys:\n"
"allocation_id, size and total as int64 values with validity bitmaps, owner,\n"
"inefficient_type and type as large_string buffers (see the C source for the rules).");

static PyObject *decode(PyObject *module, PyObject *args) {
    (void)module;
    Strings in;
    PyObject *numbers[N_NUMBERS] = {NULL}, *number_bits[N_NUMBERS] = {NULL};
    PyObject *text_offsets[N_TEXTS] = {NULL}, *text_data[N_TEXTS] = {NULL},
             *text_bits[N_TEXTS] = {NULL};
    Py_ssize_t *spans = NULL; /* per row and text key: start, length (-1: null) */
    PyObject *result = NULL;
    if (strings_take(args, "OOOnnp:decode", &in) < 0) goto done;
    Py_ssize_t length = in.length;
    Py_ssize_t bitmap_size = (length + 7) / 8;
    for (int k = 0; k < N_NUMBERS; k++) {
        numbers[k] = zeroed(length * (Py_ssize_t)sizeof(int64_t));
        number_bits[k] = zeroed(bitmap_size);
        if (numbers[k] == NULL || number_bits[k] == NULL) goto done;
    }
    for (int k = 0; k < N_TEXTS; k++) {
        text_offsets[k] = zeroed((length + 1) * (Py_ssize_t)sizeof(int64_t));
        text_bits[k] = zeroed(bitmap_size);
        if (text_offsets[k] == NULL || text_bits[k] == NULL) goto done;
    }
    spans = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * N_TEXTS * (size_t)(length ? length : 1));
    if (spans == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const char *base = in.data.buf;
    int64_t *number_out[N_NUMBERS];
    uint8_t *number_valid[N_NUMBERS];
    for (int k = 0; k < N_NUMBERS; k++) {
        number_out[k] = (int64_t *)PyByteArray_AS_STRING(numbers[k]);
        number_valid[k] = (uint8_t *)PyByteArray_AS_STRING(number_bits[k]);
    }
    int bad = 0;
    Py_ssize_t text_total[N_TEXTS] = {0};
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < length && !bad; i++) {
        Py_ssize_t *span = spans + 2 * N_TEXTS * i;
        for (int k = 0; k < N_TEXTS; k++) span[2 * k] = span[2 * k + 1] = -1;
        const char *s, *end;
        int got = strings_value(&in, i, &s, &end);
        if (got == 0) continue;
        if (got < 0) {
            bad = 1;
            break;
        }
        const char *found[N_KEYS] = {NULL};
        int missing = N_KEYS;
        /* every key is first found at a double quote: one walk over the quotes finds all
         * (only the keys whose first letter follows the quote are compared) */
        for (const char *q = s; q + 1 < end && missing; q++) {
            if (*q != '"') continue;
            int k = -1, other = -1;
            switch (q[1]) {
            case 'a': k = 0; break;
            case 's': k = 1; break;
            case 't': k = 2; other = 5; break;
            case 'o': k = 3; break;
            case 'i': k = 4; break;
            default: continue;
            }
            for (int pick = 0; pick < 2; pick++, k = other) {
                if (k < 0) break;
                if (found[k] == NULL && end - q >= KEY_LEN[k] &&
                    memcmp(q, KEYS[k], (size_t)KEY_LEN[k]) == 0) {
                    found[k] = q + KEY_LEN[k];
                    missing--;
                }
            }
        }
        for (int k = 0; k < N_NUMBERS; k++) {
            int64_t value;
            if (found[k] != NULL && number_at(found[k], end, &value)) {
                number_out[k][i] = value;
                SET_BIT(number_valid[k], i);
            }
        }
        for (int k = 0; k < N_TEXTS; k++) {
            const char *start;
            Py_ssize_t len;
            if (found[N_NUMBERS + k] != NULL &&
                text_at(found[N_NUMBERS + k], end, &start, &len)) {
                span[2 * k] = start - base;
                span[2 * k + 1] = len;
                text_total[k] += len;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "an offset outside the data buffer");
        goto done;
    }
    for (int k = 0; k < N_TEXTS; k++) {
        text_data[k] = PyByteArray_FromStringAndSize(NULL, text_total[k]);
        if (text_data[k] == NULL) goto done;
    }
    int64_t *out_offsets[N_TEXTS];
    char *out_data[N_TEXTS];
    uint8_t *out_bits[N_TEXTS];
    for (int k = 0; k < N_TEXTS; k++) {
        out_offsets[k] = (int64_t *)PyByteArray_AS_STRING(text_offsets[k]);
        out_data[k] = PyByteArray_AS_STRING(text_data[k]);
        out_bits[k] = (uint8_t *)PyByteArray_AS_STRING(text_bits[k]);
    }
    Py_BEGIN_ALLOW_THREADS
    for (int k = 0; k < N_TEXTS; k++) {
        int64_t *offsets_k = out_offsets[k];
        char *out = out_data[k];
        uint8_t *bits = out_bits[k];
        int64_t at = 0;
        offsets_k[0] = 0;
        for (Py_ssize_t i = 0; i < length; i++) {
            const Py_ssize_t *span = spans + 2 * N_TEXTS * i + 2 * k;
            if (span[0] >= 0) {
                memcpy(out + at, base + span[0], (size_t)span[1]);
                at += span[1];
                SET_BIT(bits, i);
            }
            offsets_k[i + 1] = at;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("([OOOOOO], [OOOOOOOOO])",
                           numbers[0], number_bits[0], numbers[1], number_bits[1],
                           numbers[2], number_bits[2],
                           text_offsets[0], text_data[0], text_bits[0],
                           text_offsets[1], text_data[1], text_bits[1],
                           text_offsets[2], text_data[2], text_bits[2]);
done:
    PyMem_Free(spans);
    for (int k = 0; k < N_NUMBERS; k++) {
        Py_XDECREF(numbers[k]);
        Py_XDECREF(number_bits[k]);
    }
    for (int k = 0; k < N_TEXTS; k++) {
        Py_XDECREF(text_offsets[k]);
        Py_XDECREF(text_data[k]);
        Py_XDECREF(text_bits[k]);
    }
    strings_release(&in);
    return result;
}

/* -- runs: the rows of one key, in time order, cut into blocks ---------------------------- */

#define KEY_WIDTH 5 /* int64s of a key: family, then four values */

/* The keys of the blocks open now (a FREE takes its key out: the table holds the blocks
 * alive at a time, not every block of the capture, and stays small enough for the cache). */
typedef struct {
    int64_t *keys;   /* KEY_WIDTH per slot */
    uint8_t *nulls;  /* which of a slot's values are null */
    int64_t *run;    /* the slot's open run, -1: empty slot */
    size_t cap, len;
} Keys;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint64_t key_hash(const int64_t *key, uint8_t nulls) {
    uint64_t h = nulls;
    for (int i = 0; i < KEY_WIDTH; i++) h = mix(h, (uint64_t)key[i]);
    return h;
}

static int keys_init(Keys *k, size_t cap) {
    k->cap = cap;
    k->len = 0;
    k->keys = malloc(cap * KEY_WIDTH * sizeof(int64_t));
    k->nulls = malloc(cap);
    k->run = malloc(cap * sizeof(int64_t));
    if (!k->keys || !k->nulls || !k->run) return -1;
    for (size_t i = 0; i < cap; i++) k->run[i] = -1;
    return 0;
}

static void keys_free(Keys *k) {
    free(k->keys);
    free(k->nulls);
    free(k->run);
}

/* The slot of the key: where it is, or the empty slot where it goes (cap: a power of 2) */
static size_t keys_slot(const Keys *k, const int64_t *key, uint8_t nulls) {
    size_t mask = k->cap - 1, slot = (size_t)key_hash(key, nulls) & mask;
    while (k->run[slot] >= 0) {
        if (k->nulls[slot] == nulls &&
            memcmp(k->keys + slot * KEY_WIDTH, key, KEY_WIDTH * sizeof(int64_t)) == 0)
            return slot;
        slot = (slot + 1) & mask;
    }
    return slot;
}

/* Empty ``slot`` (linear probing's backward shift: each later key of the probe run whose
 * home is not between the hole and itself moves into the hole, no tombstones). */
static void keys_remove(Keys *k, size_t slot) {
    size_t mask = k->cap - 1, hole = slot, next = (slot + 1) & mask;
    while (k->run[next] >= 0) {
        size_t home = (size_t)key_hash(k->keys + next * KEY_WIDTH, k->nulls[next]) & mask;
        /* may move: its home is not cyclically in (hole, next] */
        int stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next);
        if (!stays) {
            memcpy(k->keys + hole * KEY_WIDTH, k->keys + next * KEY_WIDTH,
                   KEY_WIDTH * sizeof(int64_t));
            k->nulls[hole] = k->nulls[next];
            k->run[hole] = k->run[next];
            hole = next;
        }
        next = (next + 1) & mask;
    }
    k->run[hole] = -1;
    k->len--;
}

static int keys_grow(Keys *k) {
    Keys bigger = {NULL, NULL, NULL, 0, 0};
    if (k->cap > SIZE_MAX / 2 / (KEY_WIDTH * sizeof(int64_t)) || keys_init(&bigger, k->cap * 2)) {
        keys_free(&bigger);
        return -1;
    }
    for (size_t i = 0; i < k->cap; i++) {
        if (k->run[i] < 0) continue;
        size_t slot = keys_slot(&bigger, k->keys + i * KEY_WIDTH, k->nulls[i]);
        memcpy(bigger.keys + slot * KEY_WIDTH, k->keys + i * KEY_WIDTH,
               KEY_WIDTH * sizeof(int64_t));
        bigger.nulls[slot] = k->nulls[i];
        bigger.run[slot] = k->run[i];
    }
    bigger.len = k->len;
    keys_free(k);
    *k = bigger;
    return 0;
}

/* The value of a hexadecimal digit, or -1 */
static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

PyDoc_STRVAR(pointers_doc,
"pointers(data, offsets, validity, offset, length, wide) -> (values, bitmap)\n\n"
"The Arrow buffers of a string array (as for decode) read as msMemScope writes a Ptr:\n"
"``0x`` then hexadecimal digits, of a value below 2**63 (what polars' base-16\n"
"parse into Int64 reads after the ``0x``), as uint64 values with a validity bitmap;\n"
"any other text (or a null) is null: the caller reads those rows the general way.");

static PyObject *pointers(PyObject *module, PyObject *args) {
    (void)module;
    Strings in;
    PyObject *values = NULL, *bits = NULL, *result = NULL;
    if (strings_take(args, "OOOnnp:pointers", &in) < 0) goto done;
    Py_ssize_t length = in.length;
    values = zeroed(length * (Py_ssize_t)sizeof(uint64_t));
    bits = zeroed((length + 7) / 8);
    if (values == NULL || bits == NULL) goto done;
    uint64_t *out = (uint64_t *)PyByteArray_AS_STRING(values);
    uint8_t *out_valid = (uint8_t *)PyByteArray_AS_STRING(bits);
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < length; i++) {
        const char *s, *end;
        int got = strings_value(&in, i, &s, &end);
        if (got == 0) continue;
        if (got < 0) {
            bad = 1;
            break;
        }
        if (end - s < 3 || s[0] != '0' || s[1] != 'x') continue;
        uint64_t value = 0;
        const char *at = s + 2;
        for (; at < end; at++) {
            int digit = hex_digit((unsigned char)*at);
            if (digit < 0 || value > ((uint64_t)INT64_MAX - (uint64_t)digit) / 16u) break;
            value = value * 16u + (uint64_t)digit;
        }
        if (at < end) continue; /* not a digit, or past int64 */
        out[i] = value;
        SET_BIT(out_valid, i);
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "an offset outside the data buffer");
        goto done;
    }
    result = PyTuple_Pack(2, values, bits);
done:
    Py_XDECREF(values);
    Py_XDECREF(bits);
    strings_release(&in);
    return result;
}

enum { E_MALLOC = 0, E_FREE = 1, E_ACCESS = 2 };

PyDoc_STRVAR(runs_doc,
"runs(family, pid, aid, device, addr, pool, nulls, event, t) -> (run, first_row, last_row,\n"
"    first_access, last_access, max_gap, accesses)\n\n"
"Memory rows in time order cut into blocks.  family: uint8 per row, 1 where the row has\n"
"an allocation_id; pid, aid, device, addr, pool: int64 per row.  The key of a row is\n"
"(1, pid, aid, 0, 0) in the family, else (0, pid, device, addr, pool); nulls: uint8 per\n"
"row, the bits of the key's values that are null; event: uint8 per row, 0 MALLOC, 1 FREE,\n"
"2 ACCESS; t: int64 per row.  Within one key a block starts at the key's first row, at\n"
"each MALLOC and after each FREE.  Returns bytearrays of int64: each row's block\n"
"(numbered in the order of their first row) and per block its first and last row, its\n"
"first and last ACCESS time, the longest time between two of its ACCESS rows in a row,\n"
"and its count of ACCESS rows (the times are 0 where it has none).");

/* The key fields' buffers: family and nulls one byte a row, the five values 8 bytes */
enum { F_FAMILY, F_PID, F_AID, F_DEVICE, F_ADDR, F_POOL, F_NULLS, F_EVENT, F_T, N_FIELDS };

static PyObject *runs(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *objects[N_FIELDS];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:runs", &objects[0], &objects[1], &objects[2],
                          &objects[3], &objects[4], &objects[5], &objects[6], &objects[7],
                          &objects[8]))
        return NULL;
    Py_buffer bufs[N_FIELDS];
    memset(bufs, 0, sizeof(bufs));
    PyObject *out[7] = {NULL};
    PyObject *result = NULL;
    Keys table = {NULL, NULL, NULL, 0, 0};
    for (int i = 0; i < N_FIELDS; i++)
        if (PyObject_GetBuffer(objects[i], &bufs[i], PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t n = bufs[F_NULLS].len;
    for (int i = 0; i < N_FIELDS; i++) {
        Py_ssize_t width = (i == F_FAMILY || i == F_NULLS || i == F_EVENT)
                               ? 1 : (Py_ssize_t)sizeof(int64_t);
        if (bufs[i].len != n * width) {
            PyErr_SetString(PyExc_ValueError, "the key fields, nulls, event and t differ "
                                              "in length");
            goto done;
        }
    }
    for (int i = 0; i < 7; i++) {
        out[i] = PyByteArray_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
        if (out[i] == NULL) goto done;
    }
    if (keys_init(&table, 1024)) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *family = bufs[F_FAMILY].buf, *nulls = bufs[F_NULLS].buf,
                  *event = bufs[F_EVENT].buf;
    const int64_t *pid = bufs[F_PID].buf, *aid = bufs[F_AID].buf,
                  *device = bufs[F_DEVICE].buf, *addr = bufs[F_ADDR].buf,
                  *pool = bufs[F_POOL].buf, *t = bufs[F_T].buf;
    int64_t *run_of = (int64_t *)PyByteArray_AS_STRING(out[0]);
    int64_t *first_row = (int64_t *)PyByteArray_AS_STRING(out[1]);
    int64_t *last_row = (int64_t *)PyByteArray_AS_STRING(out[2]);
    int64_t *first_access = (int64_t *)PyByteArray_AS_STRING(out[3]);
    int64_t *last_access = (int64_t *)PyByteArray_AS_STRING(out[4]);
    int64_t *max_gap = (int64_t *)PyByteArray_AS_STRING(out[5]);
    int64_t *accesses = (int64_t *)PyByteArray_AS_STRING(out[6]);
    int64_t blocks = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t row = 0; row < n; row++) {
        if (2 * (table.len + 1) > table.cap && keys_grow(&table)) {
            blocks = -1;
            break;
        }
        int64_t key[KEY_WIDTH] = {0, pid[row], 0, 0, 0};
        if (family[row]) {
            key[0] = 1;
            key[2] = aid[row];
        } else {
            key[2] = device[row];
            key[3] = addr[row];
            key[4] = pool[row];
        }
        size_t slot = keys_slot(&table, key, nulls[row]);
        int64_t block = table.run[slot];
        if (block < 0 || event[row] == E_MALLOC) {
            block = blocks++;
            first_row[block] = row;
            first_access[block] = last_access[block] = max_gap[block] = accesses[block] = 0;
            if (table.run[slot] < 0) {
                memcpy(table.keys + slot * KEY_WIDTH, key, KEY_WIDTH * sizeof(int64_t));
                table.nulls[slot] = nulls[row];
                table.len++;
            }
            table.run[slot] = block;
        }
        if (event[row] == E_FREE) keys_remove(&table, slot); /* the next row starts anew */
        run_of[row] = block;
        last_row[block] = row;
        if (event[row] == E_ACCESS) {
            if (accesses[block] == 0) {
                first_access[block] = t[row];
            } else if (t[row] - last_access[block] > max_gap[block]) {
                max_gap[block] = t[row] - last_access[block];
            }
            last_access[block] = t[row];
            accesses[block]++;
        }
    }
    Py_END_ALLOW_THREADS
    if (blocks < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t kept = (Py_ssize_t)blocks * (Py_ssize_t)sizeof(int64_t);
    for (int i = 1; i < 7; i++)
        if (PyByteArray_Resize(out[i], kept)) goto done;
    result = Py_BuildValue("(OOOOOOO)", out[0], out[1], out[2], out[3], out[4], out[5], out[6]);
done:
    keys_free(&table);
    for (int i = 0; i < 7; i++) Py_XDECREF(out[i]);
    for (int i = 0; i < N_FIELDS; i++)
        if (bufs[i].obj) PyBuffer_Release(&bufs[i]);
    return result;
}

PyDoc_STRVAR(depths_doc,
"depths(group, start, end) -> bytearray of int64\n\n"
"MindStudio Insight's stack replay of python-trace calls, one stack per group: rows in\n"
"(group, start) order; before each call the calls that ended before it starts\n"
"(end < start) are popped, its depth is the stack's size, then its end is pushed.  The\n"
"three arguments are int64 buffers of one length.");

static PyObject *depths(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *group_obj, *start_obj, *end_obj;
    if (!PyArg_ParseTuple(args, "OOO:depths", &group_obj, &start_obj, &end_obj)) return NULL;
    Py_buffer group_buf = {0}, start_buf = {0}, end_buf = {0};
    PyObject *out = NULL;
    int64_t *stack = NULL;
    if (PyObject_GetBuffer(group_obj, &group_buf, PyBUF_SIMPLE) < 0 ||
        PyObject_GetBuffer(start_obj, &start_buf, PyBUF_SIMPLE) < 0 ||
        PyObject_GetBuffer(end_obj, &end_buf, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t bytes = group_buf.len;
    if (bytes % (Py_ssize_t)sizeof(int64_t) || start_buf.len != bytes || end_buf.len != bytes) {
        PyErr_SetString(PyExc_ValueError, "group, start and end differ in length");
        goto done;
    }
    Py_ssize_t n = bytes / (Py_ssize_t)sizeof(int64_t);
    out = PyByteArray_FromStringAndSize(NULL, bytes);
    stack = PyMem_Malloc(n > 0 ? (size_t)bytes : 1);
    if (out == NULL || stack == NULL) {
        Py_CLEAR(out);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    const int64_t *group = group_buf.buf, *start = start_buf.buf, *end = end_buf.buf;
    int64_t *depth = (int64_t *)PyByteArray_AS_STRING(out);
    Py_ssize_t top = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i > 0 && group[i] != group[i - 1]) top = 0;
        while (top > 0 && stack[top - 1] < start[i]) top--;
        depth[i] = (int64_t)top;
        stack[top++] = end[i];
    }
done:
    PyMem_Free(stack);
    if (group_buf.obj) PyBuffer_Release(&group_buf);
    if (start_buf.obj) PyBuffer_Release(&start_buf);
    if (end_buf.obj) PyBuffer_Release(&end_buf);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {"pointers", pointers, METH_VARARGS, pointers_doc},
    {"runs", runs, METH_VARARGS, runs_doc},
    {"depths", depths, METH_VARARGS, depths_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_rows",
    "msMemScope rows: their Attr keys, their blocks, python calls' depths, each in one pass.",
    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rows(void) {
    for (int k = 0; k < N_KEYS; k++) KEY_LEN[k] = (Py_ssize_t)strlen(KEYS[k]);
    PyObject *module = PyModule_Create(&module_def);
    /* ``runs`` makes each row's key from its fields: a build from before took the keys
     * made (the Python side takes a stale build for none, not for a pass that fails) */
    if (module != NULL && PyModule_AddIntConstant(module, "RUNS_KEYS_BY_FIELD", 1) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
