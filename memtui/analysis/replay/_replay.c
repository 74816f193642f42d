/* memtui.analysis.replay._replay: the what-if replay's per-event loop, compiled.
 *
 * What it owns: the hot loop of memtui.analysis.replay.run (``ReplayLoop.go``) and the caching
 * allocator it drives (memtui.analysis.replay.allocator.CachingAllocator), step for step:
 * the same pools of free blocks ordered by (stream, size, address), the same links between
 * the blocks of a segment, the same malloc / free_block / emptyCache / expandable-segment
 * rules, the same address hints from the recording.  The Python modules are the reference
 * and the fallback; tests/analysis/test_replay_core.py requires identical results from both
 * on every real capture and on hypothesis-made traces, under every setting.
 *
 * How it is fed: the Python side lays the pool the capture started from into a Python
 * CachingAllocator (whatever the seeding rules are, they stay in Python) and hands its whole
 * state over as flat int64 arrays (memtui/analysis/replay/core.py): blocks, segments, pools,
 * the pending set, the hints, the trace's block ids.  This file copies that state, runs the
 * events and returns what the Python loop records: the address given to each alloc, the
 * reserved bytes after each event, the segment events made (owned by the event that made
 * them), the OOMs met, the frees of unknown blocks, and the free bytes at the reserved peak
 * (fragmented, cached, the largest gap: allocator.py's free_split).
 *
 * Where the Python loop would meet something odd (a free of a block already free or merged
 * away, a key already in a pool, a key missing from one, a division by a zero page, a
 * figure beyond 64 bits), this loop stops and says so: the caller runs the Python reference
 * instead, which does whatever it does there (raises its ReplayError, or goes on).  So the
 * two never differ, at the price of the reference's speed on such traces.
 *
 * Safety: every index in the handed state is checked against its table before the loop;
 * every array's length against the others; tables grow by doubling and are bounded by the
 * events (a step makes at most three blocks and one segment); the treaps' depth is that of
 * random priorities (a hash of the block's index); sums are checked for overflow.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The constants at the top of CUDACachingAllocator.cpp (allocator.py). */
#define K_MIN_BLOCK_SIZE 512LL
#define K_SMALL_SIZE (1LL << 20)
#define K_SMALL_BUFFER (2LL << 20)
#define K_LARGE_BUFFER (20LL << 20)
#define K_MIN_LARGE_ALLOC (10LL << 20)
#define K_ROUND_LARGE (2LL << 20)
/* Addresses and sizes the loop takes (the Python side checks, this file checks again). */
#define ADDR_LIMIT (1LL << 62)
#define SIZE_LIMIT (1LL << 50)

/* Actions: memtui.model.ACTIONS' order (the physical codes of the events' Enum). */
enum { A_ALLOC = 0, A_FREE_REQUESTED = 1, A_FREE = 2, A_SEGMENT_ALLOC = 3,
       A_SEGMENT_FREE = 4, A_SEGMENT_MAP = 5, A_SEGMENT_UNMAP = 6, A_OOM = 7 };
/* Segment events the replay makes (run.py's SegmentLog.action, by these codes). */
enum { L_SEGMENT_ALLOC = 0, L_SEGMENT_FREE = 1, L_SEGMENT_MAP = 2, L_SEGMENT_UNMAP = 3 };
/* The kinds of an OOM (run.py's "caused", "avoided", "kept"). */
enum { OOM_CAUSED = 0, OOM_AVOIDED = 1, OOM_KEPT = 2 };
/* Where a block is: in its pool's free tree, its unmapped tree, or in neither. */
enum { IN_NONE = -1, IN_FREE = 0, IN_UNMAPPED = 1 };

typedef struct {
    int64_t addr, size, stream, gc_base;
    int32_t pool, segment, prev, next;
    int32_t left, right;   /* treap links */
    int8_t allocated, pending, mapped, tree;
    int8_t dead;           /* merged into a neighbour (a stale object in Python) */
    int32_t pending_pos;   /* place in the pending list, -1 where not pending-listed */
} Block;

typedef struct {
    int64_t addr, size, stream, page;
    int8_t is_small, expandable, in_dict;
} Segment;

typedef struct {
    int8_t is_small, private_;
    int64_t get_free_blocks_call_count;
    int32_t root[2];  /* IN_FREE, IN_UNMAPPED */
} Pool;

typedef struct {
    uint64_t *keys;
    int32_t *values;  /* segment index, -1 for an empty slot */
    size_t cap, len;
} AddrMap;

typedef struct {
    /* settings */
    int64_t capacity;  /* -1: None */
    int8_t has_capacity, memory_fraction, expandable_segments, plain_rounding;
    double gc_threshold;
    int64_t max_split;  /* NO_MAX_SPLIT stands as INT64_MAX */
    int8_t no_max_split;
    int64_t divisions[16];
    /* state */
    Block *blocks;
    Py_ssize_t n_blocks, cap_blocks;
    Segment *segments;
    Py_ssize_t n_segments, cap_segments;
    Pool *pools;
    Py_ssize_t n_pools;
    AddrMap seg_by_addr;
    int32_t *pending;      /* in the order listed; -1: a hole left by a discard */
    Py_ssize_t n_pending, cap_pending, pending_holes;
    int64_t reserved, invented;
    int64_t *hint_size, *hint_addr;
    Py_ssize_t n_hints, cap_hints;
    int64_t *map_hints;
    Py_ssize_t map_head, n_map_hints, cap_map_hints;
    /* the segment events made since the last look (run.py logs them per event) */
    int8_t *log_action;
    int64_t *log_addr, *log_size, *log_owner;
    Py_ssize_t n_log, cap_log;
    /* why the loop stopped for the reference (NULL: it did not) */
    const char *fallback;
} Allocator;

static void *grow(void *data, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return data;
    Py_ssize_t bigger = *cap ? *cap : 16;
    while (bigger < need) bigger *= 2;
    void *out = PyMem_RawRealloc(data, (size_t)bigger * item);
    if (out) *cap = bigger;
    return out;
}

#define FALLBACK(a, why) do { (a)->fallback = (why); return -1; } while (0)
#define NOMEM(a) FALLBACK(a, "out of memory")

static int add_checked(Allocator *a, int64_t x, int64_t y, int64_t *out) {
    if (__builtin_add_overflow(x, y, out)) FALLBACK(a, "a figure beyond 64 bits");
    return 0;
}

/* Python's floor division and ceiling division for a positive divisor. */
static int64_t floordiv(int64_t x, int64_t d) {
    int64_t q = x / d;
    return (x % d != 0 && x < 0) ? q - 1 : q;
}
static int64_t ceildiv(int64_t x, int64_t d) { return -floordiv(-x, d); }

/* -- the segments by address (a dict in Python) --------------------------------------- */

static size_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int map_init(AddrMap *m, size_t cap) {
    m->cap = cap;
    m->len = 0;
    m->keys = PyMem_RawMalloc(cap * sizeof(uint64_t));
    m->values = PyMem_RawMalloc(cap * sizeof(int32_t));
    if (!m->keys || !m->values) return -1;
    memset(m->values, 0xff, cap * sizeof(int32_t));
    return 0;
}

static void map_free(AddrMap *m) {
    PyMem_RawFree(m->keys);
    PyMem_RawFree(m->values);
    m->keys = NULL;
    m->values = NULL;
}

static size_t map_slot(const AddrMap *m, uint64_t key) {
    size_t mask = m->cap - 1, i = mix(key) & mask;
    while (m->values[i] >= 0 && m->keys[i] != key) i = (i + 1) & mask;
    return i;
}

static int32_t map_get(const AddrMap *m, int64_t key) {
    return m->values[map_slot(m, (uint64_t)key)];
}

static int map_put(AddrMap *m, int64_t key, int32_t value) {
    if (2 * (m->len + 1) > m->cap) {
        AddrMap bigger;
        if (map_init(&bigger, m->cap * 2)) {
            map_free(&bigger);
            return -1;
        }
        for (size_t j = 0; j < m->cap; j++) {
            if (m->values[j] < 0) continue;
            size_t i = map_slot(&bigger, m->keys[j]);
            bigger.keys[i] = m->keys[j];
            bigger.values[i] = m->values[j];
        }
        bigger.len = m->len;
        map_free(m);
        *m = bigger;
    }
    size_t i = map_slot(m, (uint64_t)key);
    if (m->values[i] < 0) m->len++;
    m->keys[i] = (uint64_t)key;
    m->values[i] = value;
    return 0;
}

/* Removal with backward shifting (linear probing keeps no tombstones). */
static void map_del(AddrMap *m, int64_t key) {
    size_t mask = m->cap - 1, i = map_slot(m, (uint64_t)key);
    if (m->values[i] < 0) return;
    m->values[i] = -1;
    m->len--;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (m->values[j] < 0) return;
        size_t home = mix(m->keys[j]) & mask;
        /* move j back to i where i lies cyclically in [home, j) */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->keys[i] = m->keys[j];
            m->values[i] = m->values[j];
            m->values[j] = -1;
            i = j;
        }
    }
}

/* -- the free blocks of a pool, by (stream, size, address): treaps of block indices ------- */

static int cmp_key(int64_t s1, int64_t z1, int64_t a1, int64_t s2, int64_t z2, int64_t a2) {
    if (s1 != s2) return s1 < s2 ? -1 : 1;
    if (z1 != z2) return z1 < z2 ? -1 : 1;
    if (a1 != a2) return a1 < a2 ? -1 : 1;
    return 0;
}

static int cmp_blocks(const Allocator *a, int32_t x, int32_t y) {
    const Block *p = &a->blocks[x], *q = &a->blocks[y];
    return cmp_key(p->stream, p->size, p->addr, q->stream, q->size, q->addr);
}

static uint64_t priority(int32_t index) { return (uint64_t)mix((uint64_t)index * 0x9e3779b97f4a7c15ULL + 1); }

/* Split ``t`` into keys < (s, z, d) and keys >= it. */
static void split(Allocator *a, int32_t t, int64_t s, int64_t z, int64_t d,
                  int32_t *lo, int32_t *hi) {
    if (t < 0) {
        *lo = *hi = -1;
        return;
    }
    Block *b = &a->blocks[t];
    if (cmp_key(b->stream, b->size, b->addr, s, z, d) < 0) {
        split(a, b->right, s, z, d, &b->right, hi);
        *lo = t;
    } else {
        split(a, b->left, s, z, d, lo, &b->left);
        *hi = t;
    }
}

static int32_t join(Allocator *a, int32_t lo, int32_t hi) {
    if (lo < 0) return hi;
    if (hi < 0) return lo;
    if (priority(lo) > priority(hi)) {
        a->blocks[lo].right = join(a, a->blocks[lo].right, hi);
        return lo;
    }
    a->blocks[hi].left = join(a, lo, a->blocks[hi].left);
    return hi;
}

static int32_t treap_find(const Allocator *a, int32_t t, int32_t x) {
    while (t >= 0) {
        int c = cmp_blocks(a, x, t);
        if (c == 0) return t;
        t = c < 0 ? a->blocks[t].left : a->blocks[t].right;
    }
    return -1;
}

static int32_t treap_insert(Allocator *a, int32_t t, int32_t x) {
    if (t < 0) return x;
    if (priority(x) > priority(t)) {
        Block *b = &a->blocks[x];
        split(a, t, b->stream, b->size, b->addr, &b->left, &b->right);
        return x;
    }
    if (cmp_blocks(a, x, t) < 0) a->blocks[t].left = treap_insert(a, a->blocks[t].left, x);
    else a->blocks[t].right = treap_insert(a, a->blocks[t].right, x);
    return t;
}

static int32_t treap_erase(Allocator *a, int32_t t, int32_t x) {
    if (t < 0) return t;
    if (t == x) {
        int32_t out = join(a, a->blocks[t].left, a->blocks[t].right);
        a->blocks[t].left = a->blocks[t].right = -1;
        return out;
    }
    if (cmp_blocks(a, x, t) < 0) a->blocks[t].left = treap_erase(a, a->blocks[t].left, x);
    else a->blocks[t].right = treap_erase(a, a->blocks[t].right, x);
    return t;
}

/* The first block at or after (s, z, d) (std::set::lower_bound); -1 where none. */
static int32_t lower_bound(const Allocator *a, int32_t t, int64_t s, int64_t z, int64_t d) {
    int32_t found = -1;
    while (t >= 0) {
        const Block *b = &a->blocks[t];
        if (cmp_key(b->stream, b->size, b->addr, s, z, d) >= 0) {
            found = t;
            t = b->left;
        } else {
            t = b->right;
        }
    }
    return found;
}

/* The last block before (s, z, d); -1 where none. */
static int32_t before_key(const Allocator *a, int32_t t, int64_t s, int64_t z, int64_t d) {
    int32_t found = -1;
    while (t >= 0) {
        const Block *b = &a->blocks[t];
        if (cmp_key(b->stream, b->size, b->addr, s, z, d) < 0) {
            found = t;
            t = b->right;
        } else {
            t = b->left;
        }
    }
    return found;
}

/* The block after ``x`` in its tree (keys are unique in a tree). */
static int32_t after_block(const Allocator *a, int32_t root, int32_t x) {
    const Block *b = &a->blocks[x];
    if (b->addr == INT64_MAX) return -1;
    return lower_bound(a, root, b->stream, b->size, b->addr + 1);
}

/* The tree's blocks in key order into ``out`` (sized by the caller: blocks in all). */
static Py_ssize_t in_order(const Allocator *a, int32_t t, int32_t *out, int32_t *stack) {
    Py_ssize_t n = 0, depth = 0;
    while (t >= 0 || depth) {
        while (t >= 0) {
            stack[depth++] = t;
            t = a->blocks[t].left;
        }
        t = stack[--depth];
        out[n++] = t;
        t = a->blocks[t].right;
    }
    return n;
}

/* BlockPool.insert / erase: the tree by ``mapped``; a key already there (in either tree: the
 * Python pool looks both up in one dict), or one missing, is a trace the Python pool would
 * hold twice or fail on: the reference takes it. */
static int pool_insert(Allocator *a, int32_t x) {
    Block *b = &a->blocks[x];
    if (b->tree != IN_NONE || b->dead) FALLBACK(a, "a block inserted twice");
    Pool *p = &a->pools[b->pool];
    int which = b->mapped ? IN_FREE : IN_UNMAPPED;
    if (treap_find(a, p->root[IN_FREE], x) >= 0 || treap_find(a, p->root[IN_UNMAPPED], x) >= 0)
        FALLBACK(a, "two free blocks with one key");
    b->left = b->right = -1;
    p->root[which] = treap_insert(a, p->root[which], x);
    b->tree = (int8_t)which;
    return 0;
}

static int pool_erase(Allocator *a, int32_t pool, int32_t x) {
    Block *b = &a->blocks[x];
    int which = b->mapped ? IN_FREE : IN_UNMAPPED;
    if (b->tree != which || b->pool != pool) FALLBACK(a, "a block not in its pool");
    Pool *p = &a->pools[pool];
    p->root[which] = treap_erase(a, p->root[which], x);
    b->tree = IN_NONE;
    return 0;
}

/* -- blocks, segments, pending ------------------------------------------------------------ */

static int32_t new_block(Allocator *a, int64_t addr, int64_t size, int64_t stream, int32_t pool,
                         int32_t segment) {
    if (a->n_blocks >= INT32_MAX - 1) FALLBACK(a, "too many blocks");
    Block *grown = grow(a->blocks, &a->cap_blocks, a->n_blocks + 1, sizeof(Block));
    if (!grown) NOMEM(a);
    a->blocks = grown;
    int32_t x = (int32_t)a->n_blocks++;
    Block *b = &a->blocks[x];
    memset(b, 0, sizeof(*b));
    b->addr = addr;
    b->size = size;
    b->stream = stream;
    b->pool = pool;
    b->segment = segment;
    b->prev = b->next = b->left = b->right = -1;
    b->mapped = 1;
    b->tree = IN_NONE;
    b->pending_pos = -1;
    return x;
}

static int32_t new_segment(Allocator *a, int64_t addr, int64_t size, int64_t stream,
                           int8_t is_small, int8_t expandable, int64_t page) {
    if (a->n_segments >= INT32_MAX - 1) FALLBACK(a, "too many segments");
    if (map_get(&a->seg_by_addr, addr) >= 0) FALLBACK(a, "two segments at one address");
    Segment *grown = grow(a->segments, &a->cap_segments, a->n_segments + 1, sizeof(Segment));
    if (!grown) NOMEM(a);
    a->segments = grown;
    int32_t s = (int32_t)a->n_segments++;
    a->segments[s] = (Segment){addr, size, stream, page, is_small, expandable, 1};
    if (map_put(&a->seg_by_addr, addr, s)) NOMEM(a);
    return s;
}

static int del_segment(Allocator *a, int32_t s) {
    Segment *seg = &a->segments[s];
    if (!seg->in_dict || map_get(&a->seg_by_addr, seg->addr) != s)
        FALLBACK(a, "a segment freed twice");
    map_del(&a->seg_by_addr, seg->addr);
    seg->in_dict = 0;
    return 0;
}

static int pending_add(Allocator *a, int32_t x) {
    Block *b = &a->blocks[x];
    if (b->pending_pos >= 0) return 0;
    int32_t *grown = grow(a->pending, &a->cap_pending, a->n_pending + 1, sizeof(int32_t));
    if (!grown) NOMEM(a);
    a->pending = grown;
    b->pending_pos = (int32_t)a->n_pending;
    a->pending[a->n_pending++] = x;
    return 0;
}

/* The pending list without its holes, the others in their order. */
static void compact_pending(Allocator *a) {
    Py_ssize_t kept = 0;
    for (Py_ssize_t k = 0; k < a->n_pending; k++) {
        int32_t y = a->pending[k];
        if (y < 0) continue;
        a->blocks[y].pending_pos = (int32_t)kept;
        a->pending[kept++] = y;
    }
    a->n_pending = kept;
    a->pending_holes = 0;
}

/* A block out of the pending list, the others keeping their order (the reference's
 * ordered set): a hole now, the list compacted once holes are half of it. */
static void pending_discard(Allocator *a, int32_t x) {
    Block *b = &a->blocks[x];
    if (b->pending_pos < 0) return;
    a->pending[b->pending_pos] = -1;
    b->pending_pos = -1;
    a->pending_holes++;
    if (a->pending_holes >= 64 && 2 * a->pending_holes >= a->n_pending) compact_pending(a);
}

static int log_event(Allocator *a, int8_t action, int64_t addr, int64_t size) {
    Py_ssize_t need = a->n_log + 1, cap = a->cap_log;
    int8_t *actions = grow(a->log_action, &cap, need, sizeof(int8_t));
    if (!actions) NOMEM(a);
    a->log_action = actions;
    cap = a->cap_log;
    int64_t *addrs = grow(a->log_addr, &cap, need, sizeof(int64_t));
    if (!addrs) NOMEM(a);
    a->log_addr = addrs;
    cap = a->cap_log;
    int64_t *sizes = grow(a->log_size, &cap, need, sizeof(int64_t));
    if (!sizes) NOMEM(a);
    a->log_size = sizes;
    cap = a->cap_log;
    int64_t *owners = grow(a->log_owner, &cap, need, sizeof(int64_t));
    if (!owners) NOMEM(a);
    a->log_owner = owners;
    a->cap_log = cap;
    a->log_action[a->n_log] = action;
    a->log_addr[a->n_log] = addr;
    a->log_size[a->n_log] = size;
    a->log_owner[a->n_log] = -1;  /* the loop names the event */
    a->n_log++;
    return 0;
}

/* -- sizes (allocator.py's round_size, get_allocation_size) -------------------------------- */

static int bit_length(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }

static int64_t next_division(int64_t size, int64_t divisions) {
    if (size <= 4 || divisions <= 1 || (size & (size - 1)) == 0) return size;
    int64_t floor2 = (int64_t)1 << (bit_length((uint64_t)size) - 1);
    int shift = bit_length((uint64_t)divisions) - 1;
    int64_t step = shift >= 63 ? 0 : floor2 >> shift;
    if (step == 0) return floor2 << 1;
    int64_t floor = size & ~(step - 1);
    return floor == size ? size : floor + step;
}

static int64_t round_size(const Allocator *a, int64_t size) {
    if (size < K_MIN_BLOCK_SIZE) return K_MIN_BLOCK_SIZE;
    if (!a->plain_rounding) {
        int index = bit_length((uint64_t)size) - 1 - 20;
        index = index < 0 ? 0 : index > 15 ? 15 : index;
        int64_t divisions = a->divisions[index];
        if (divisions > 1 && size > K_MIN_BLOCK_SIZE * divisions)
            return next_division(size, divisions);
    }
    return K_MIN_BLOCK_SIZE * ((size + K_MIN_BLOCK_SIZE - 1) / K_MIN_BLOCK_SIZE);
}

static int64_t allocation_size(int64_t size) {
    if (size <= K_SMALL_SIZE) return K_SMALL_BUFFER;
    if (size < K_MIN_LARGE_ALLOC) return K_LARGE_BUFFER;
    return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) / K_ROUND_LARGE);
}

/* -- free (free_block, try_merge_blocks) -------------------------------------------------- */

static int try_merge(Allocator *a, int32_t dst, int32_t src, int32_t pool) {
    if (src < 0) return 0;
    Block *s = &a->blocks[src];
    if (s->allocated || s->pending || a->blocks[dst].mapped != s->mapped) return 0;
    if (pool_erase(a, pool, src)) return -1;
    Block *d = &a->blocks[dst];
    if (d->prev == src) {
        d->addr = s->addr;
        d->prev = s->prev;
        if (d->prev >= 0) a->blocks[d->prev].next = dst;
    } else {
        d->next = s->next;
        if (d->next >= 0) a->blocks[d->next].prev = dst;
    }
    d->size += s->size;
    s->dead = 1;
    s->prev = s->next = -1;
    return 0;
}

static int free_block(Allocator *a, int32_t x) {
    Block *b = &a->blocks[x];
    if (b->dead || b->tree != IN_NONE) FALLBACK(a, "a block freed twice");
    b->allocated = 0;
    b->pending = 0;
    pending_discard(a, x);
    int32_t pool = b->pool, prev = b->prev, next = b->next;
    if (try_merge(a, x, prev, pool) || try_merge(a, x, next, pool)) return -1;
    a->blocks[x].gc_base = a->pools[pool].get_free_blocks_call_count;
    return pool_insert(a, x);
}

static int free_pending(Allocator *a) {
    /* list(self.pending): each block freed once, in the order listed now */
    Py_ssize_t n = a->n_pending;
    if (!n) return 0;
    int32_t *listed = PyMem_RawMalloc((size_t)n * sizeof(int32_t));
    if (!listed) NOMEM(a);
    memcpy(listed, a->pending, (size_t)n * sizeof(int32_t));
    int status = 0;
    for (Py_ssize_t k = 0; k < n && !status; k++)
        if (listed[k] >= 0) status = free_block(a, listed[k]);
    PyMem_RawFree(listed);
    return status;
}

/* -- giving memory back --------------------------------------------------------------- */

static int release_block(Allocator *a, int32_t x) {
    Block *b = &a->blocks[x];
    if (log_event(a, L_SEGMENT_FREE, b->addr, b->size)) return -1;
    a->reserved -= b->size;
    if (pool_erase(a, b->pool, x)) return -1;
    return del_segment(a, b->segment);
}

/* The tree's blocks in key order, in a fresh buffer (*n of them); NULL on failure. */
static int32_t *listed_tree(Allocator *a, int32_t root, Py_ssize_t *n) {
    size_t cap = (size_t)a->n_blocks + 1;
    int32_t *out = PyMem_RawMalloc(cap * sizeof(int32_t));
    int32_t *stack = PyMem_RawMalloc(cap * sizeof(int32_t));
    if (!out || !stack) {
        PyMem_RawFree(out);
        PyMem_RawFree(stack);
        a->fallback = "out of memory";
        return NULL;
    }
    *n = in_order(a, root, out, stack);
    PyMem_RawFree(stack);
    return out;
}

static int unmap_block(Allocator *a, int32_t x) {
    Block *b = &a->blocks[x];
    Segment seg = a->segments[b->segment];
    int64_t page = seg.page;
    if (page <= 0) FALLBACK(a, "a segment without pages");
    int64_t first = ceildiv(b->addr - seg.addr, page);
    int64_t last = floordiv(b->addr + b->size - seg.addr, page);
    if (first >= last) return 0;
    int64_t start = seg.addr + first * page, end = seg.addr + last * page;
    int32_t pool = b->pool;
    if (pool_erase(a, pool, x)) return -1;
    b = &a->blocks[x];
    if (start > b->addr) {
        int32_t before = new_block(a, b->addr, start - b->addr, b->stream, pool, b->segment);
        if (before < 0) return -1;
        b = &a->blocks[x];
        a->blocks[before].prev = b->prev;
        a->blocks[before].next = x;
        if (b->prev >= 0) a->blocks[b->prev].next = before;
        b->prev = before;
        if (pool_insert(a, before)) return -1;
        b = &a->blocks[x];
    }
    if (end < b->addr + b->size) {
        int32_t after = new_block(a, end, b->addr + b->size - end, b->stream, pool, b->segment);
        if (after < 0) return -1;
        b = &a->blocks[x];
        a->blocks[after].prev = x;
        a->blocks[after].next = b->next;
        if (b->next >= 0) a->blocks[b->next].prev = after;
        b->next = after;
        if (pool_insert(a, after)) return -1;
        b = &a->blocks[x];
    }
    b->addr = start;
    b->size = end - start;
    b->mapped = 0;
    if (try_merge(a, x, a->blocks[x].prev, pool)) return -1;
    if (try_merge(a, x, a->blocks[x].next, pool)) return -1;
    if (pool_insert(a, x)) return -1;
    a->reserved -= end - start;
    return log_event(a, L_SEGMENT_UNMAP, start, end - start);
}

static int release_blocks(Allocator *a, int32_t pool) {
    Py_ssize_t n;
    int32_t *listed = listed_tree(a, a->pools[pool].root[IN_FREE], &n);
    if (!listed) return -1;
    Py_ssize_t n_unmap = 0;
    int status = 0;
    for (Py_ssize_t k = 0; k < n && !status; k++) {
        int32_t x = listed[k];
        Block *b = &a->blocks[x];
        if (a->segments[b->segment].expandable) listed[n_unmap++] = x;  /* k >= n_unmap */
        else if (b->prev < 0 && b->next < 0) status = release_block(a, x);
    }
    for (Py_ssize_t k = 0; k < n_unmap && !status; k++) {
        int32_t x = listed[k];
        if (a->blocks[x].dead) {
            status = -1;
            a->fallback = "a block merged away before its unmap";
            break;
        }
        status = unmap_block(a, x);
        Block *b = &a->blocks[x];
        if (!status && b->prev < 0 && b->next < 0) {
            if (b->mapped) {
                a->fallback = "a whole segment left mapped";
                status = -1;
            } else {
                status = pool_erase(a, pool, x);
                if (!status) status = del_segment(a, b->segment);
            }
        }
    }
    PyMem_RawFree(listed);
    return status;
}

/* release_cached_blocks (emptyCache). */
static int empty_cache(Allocator *a) {
    if (free_pending(a)) return -1;
    if (release_blocks(a, 1)) return -1;
    return release_blocks(a, 0);
}

static int release_available_cached_blocks(Allocator *a, int32_t pool, int64_t size,
                                           int64_t stream, int *done) {
    *done = 0;
    if (a->no_max_split) return 0;
    int64_t want = size > a->max_split ? size : a->max_split;
    int32_t root = a->pools[pool].root[IN_FREE];
    int32_t found = lower_bound(a, root, stream, want, -1);
    if (found >= 0 && a->blocks[found].stream == stream &&
        !a->segments[a->blocks[found].segment].expandable) {
        if (release_block(a, found)) return -1;
        *done = 1;
        return 0;
    }
    int32_t x = before_key(a, root, stream, want, -1);
    int64_t released = 0;
    while (released < want && x >= 0) {
        Block *b = &a->blocks[x];
        if (b->size < a->max_split || b->stream != stream) break;
        int32_t next = before_key(a, a->pools[pool].root[IN_FREE], b->stream, b->size, b->addr);
        if (!a->segments[b->segment].expandable && b->prev < 0 && b->next < 0) {
            if (add_checked(a, released, b->size, &released)) return -1;
            if (release_block(a, x)) return -1;
        }
        x = next;
    }
    *done = released >= want;
    return 0;
}

static int garbage_collect(Allocator *a) {
    int64_t capacity = a->has_capacity ? a->capacity : 0;
    int64_t threshold = (int64_t)(a->gc_threshold * (double)capacity);
    if (a->reserved <= threshold) return 0;
    int64_t target = a->reserved - threshold;
    int32_t pool = 1;
    int64_t count_now = a->pools[pool].get_free_blocks_call_count;
    Py_ssize_t n;
    int32_t *listed = listed_tree(a, a->pools[pool].root[IN_FREE], &n);
    if (!listed) return -1;
    int64_t total_age = 0, count = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Block *b = &a->blocks[listed[k]];
        if (b->prev < 0 && b->next < 0 && !a->segments[b->segment].expandable) {
            total_age += count_now - b->gc_base;
            count++;
        }
    }
    PyMem_RawFree(listed);
    if (!count) return 0;
    if (free_pending(a)) return -1;
    int64_t reclaimed = 0;
    int freed = 1;
    while (reclaimed < target && freed && count > 0) {
        double age_threshold = (double)total_age / (double)count;
        freed = 0;
        listed = listed_tree(a, a->pools[pool].root[IN_FREE], &n);
        if (!listed) return -1;
        for (Py_ssize_t k = 0; k < n; k++) {
            Block *b = &a->blocks[listed[k]];
            if (b->prev >= 0 || b->next >= 0 || a->segments[b->segment].expandable) continue;
            int64_t age = count_now - b->gc_base;
            if ((double)age >= age_threshold) {
                freed = 1;
                reclaimed += b->size;
                total_age -= age;
                count--;
                if (release_block(a, listed[k])) {
                    PyMem_RawFree(listed);
                    return -1;
                }
            }
        }
        PyMem_RawFree(listed);
    }
    return 0;
}

/* -- expandable segments ------------------------------------------------------------------ */

static int64_t address_space(const Allocator *a, int64_t page) {
    int64_t capacity = a->has_capacity && a->capacity ? a->capacity : ((int64_t)1 << 40);
    return ceildiv(capacity + capacity / 8, page) * page;
}

/* _segment_address: the first hint of this size whose address holds no segment, else an
 * invented address.  -1 (and the fallback said) where invented addresses run out. */
static int64_t segment_address(Allocator *a, int64_t size) {
    for (Py_ssize_t k = 0; k < a->n_hints; k++) {
        if (a->hint_size[k] == size && map_get(&a->seg_by_addr, a->hint_addr[k]) < 0) {
            int64_t addr = a->hint_addr[k];
            memmove(a->hint_size + k, a->hint_size + k + 1,
                    (size_t)(a->n_hints - k - 1) * sizeof(int64_t));
            memmove(a->hint_addr + k, a->hint_addr + k + 1,
                    (size_t)(a->n_hints - k - 1) * sizeof(int64_t));
            a->n_hints--;
            return addr;
        }
    }
    int64_t addr = a->invented;
    int64_t step = ceildiv(size, K_SMALL_BUFFER) * K_SMALL_BUFFER + K_SMALL_BUFFER;
    if (add_checked(a, a->invented, step, &a->invented)) return -1;
    if (a->invented >= ADDR_LIMIT) {
        a->fallback = "invented addresses beyond the limit";
        return -1;
    }
    return addr;
}

static int32_t new_expandable_segment(Allocator *a, int32_t pool, int64_t stream) {
    int64_t page = a->pools[pool].is_small ? K_SMALL_BUFFER : K_LARGE_BUFFER;
    int64_t size = address_space(a, page);
    int64_t addr;
    if (a->map_head < a->n_map_hints && map_get(&a->seg_by_addr, a->map_hints[a->map_head]) < 0)
        addr = a->map_hints[a->map_head++];
    else if ((addr = segment_address(a, size)) < 0)
        return -1;
    int32_t s = new_segment(a, addr, size, stream, a->pools[pool].is_small, 1, page);
    if (s < 0) return -1;
    int32_t x = new_block(a, addr, size, stream, pool, s);
    if (x < 0) return -1;
    a->blocks[x].mapped = 0;
    if (pool_insert(a, x)) return -1;
    return x;
}

static int allocatable(const Allocator *a, int32_t x) {
    return x >= 0 && !a->blocks[x].allocated && !a->blocks[x].pending;
}

static int has_room(const Allocator *a, int32_t x, int64_t size) {
    int64_t room = 0;
    while (room < size && allocatable(a, x)) {
        room += a->blocks[x].size;
        x = a->blocks[x].next;
    }
    return room >= size;
}

/* The stream's unmapped ranges by address (PyTorch's pool->unmapped is ordered by
 * (stream, ptr)); ties, in overlapping invented ranges, in the tree's order. */
typedef struct {
    int64_t addr;
    Py_ssize_t order;
    int32_t block;
} ByAddress;

static int by_address(const void *x, const void *y) {
    const ByAddress *p = x, *q = y;
    if (p->addr != q->addr) return p->addr < q->addr ? -1 : 1;
    return p->order < q->order ? -1 : (p->order > q->order);
}

/* find_expandable_block: the lowest unmapped range of the stream with room from it (or
 * from the free block just before it); else a new expandable segment. */
static int32_t find_expandable_block(Allocator *a, int32_t pool, int64_t size, int64_t stream) {
    int32_t root = a->pools[pool].root[IN_UNMAPPED];
    ByAddress *ranges = NULL;
    Py_ssize_t n = 0, cap = 0;
    for (int32_t x = lower_bound(a, root, stream, 0, -1);
         x >= 0 && a->blocks[x].stream == stream; x = after_block(a, root, x)) {
        ByAddress *bigger = grow(ranges, &cap, n + 1, sizeof(ByAddress));
        if (!bigger) {
            PyMem_RawFree(ranges);
            NOMEM(a);
        }
        ranges = bigger;
        ranges[n] = (ByAddress){a->blocks[x].addr, n, x};
        n++;
    }
    if (n > 1) qsort(ranges, (size_t)n, sizeof(ByAddress), by_address);
    for (Py_ssize_t k = 0; k < n; k++) {
        int32_t candidate = ranges[k].block;
        if (allocatable(a, a->blocks[candidate].prev)) candidate = a->blocks[candidate].prev;
        if (has_room(a, candidate, size)) {
            PyMem_RawFree(ranges);
            return candidate;
        }
    }
    PyMem_RawFree(ranges);
    return new_expandable_segment(a, pool, stream);
}

/* map_block; 1 mapped, 0 not (over the capacity), -1 the fallback. */
static int map_block(Allocator *a, int32_t x, int64_t size) {
    Block *b = &a->blocks[x];
    Segment seg = a->segments[b->segment];
    int64_t page = seg.page;
    if (page <= 0) FALLBACK(a, "a segment without pages");
    int64_t first = floordiv(b->addr - seg.addr, page);
    int64_t last = ceildiv(b->addr + size - seg.addr, page);
    int64_t mapped_size = (last - first) * page;
    int64_t after;
    if (add_checked(a, a->reserved, mapped_size, &after)) return -1;
    if (a->has_capacity && after > a->capacity) return 0;
    int64_t start = b->addr;
    int32_t pool = b->pool;
    if (pool_erase(a, pool, x)) return -1;
    b = &a->blocks[x];
    b->mapped = 1;
    if (mapped_size < b->size) {
        int32_t rest = new_block(a, b->addr + mapped_size, b->size - mapped_size, b->stream,
                                 pool, b->segment);
        if (rest < 0) return -1;
        b = &a->blocks[x];
        a->blocks[rest].mapped = 0;
        a->blocks[rest].prev = x;
        a->blocks[rest].next = b->next;
        if (b->next >= 0) a->blocks[b->next].prev = rest;
        b->next = rest;
        if (pool_insert(a, rest)) return -1;
        a->blocks[x].size = mapped_size;
    }
    if (try_merge(a, x, a->blocks[x].prev, pool)) return -1;
    if (try_merge(a, x, a->blocks[x].next, pool)) return -1;
    if (pool_insert(a, x)) return -1;
    a->reserved = after;
    if (log_event(a, L_SEGMENT_MAP, start, mapped_size)) return -1;
    return 1;
}

/* try_allocate_expandable_block: the block, -2 where none (not mapped), -1 the fallback. */
static int32_t allocate_expandable(Allocator *a, int32_t pool, int64_t size, int64_t stream) {
    int32_t candidate = find_expandable_block(a, pool, size, stream);
    if (candidate < 0) return -1;
    if (!a->blocks[candidate].mapped) {
        int64_t want = a->blocks[candidate].size < size ? a->blocks[candidate].size : size;
        int got = map_block(a, candidate, want);
        if (got < 0) return -1;
        if (!got) return -2;
    }
    while (a->blocks[candidate].size < size) {
        int32_t following = a->blocks[candidate].next;
        if (following < 0) return -2;
        int64_t rest = size - a->blocks[candidate].size;
        int64_t want = rest < a->blocks[following].size ? rest : a->blocks[following].size;
        int got = map_block(a, following, want);
        if (got < 0) return -1;
        if (!got) return -2;
        candidate = following;
    }
    if (pool_erase(a, pool, candidate)) return -1;
    return candidate;
}

/* -- malloc --------------------------------------------------------------------------------- */

/* alloc_block: the new block, -2 where the device cannot give it, -1 the fallback. */
static int32_t alloc_block(Allocator *a, int32_t pool, int64_t size, int64_t alloc_size,
                           int64_t stream) {
    int64_t after;
    if (add_checked(a, a->reserved, alloc_size, &after)) return -1;
    if (a->memory_fraction && a->has_capacity && after > a->capacity) return -2;
    if (a->expandable_segments && !a->pools[pool].private_)
        return allocate_expandable(a, pool, size, stream);
    if (a->has_capacity && after > a->capacity) return -2;
    int64_t addr = segment_address(a, alloc_size);
    if (addr < 0) return -1;
    int32_t s = new_segment(a, addr, alloc_size, stream, a->pools[pool].is_small, 0, 0);
    if (s < 0) return -1;
    a->reserved = after;
    if (log_event(a, L_SEGMENT_ALLOC, addr, alloc_size)) return -1;
    return new_block(a, addr, alloc_size, stream, pool, s);
}

static int64_t expandable_size(const Allocator *a, int32_t x) {
    const Block *b = &a->blocks[x];
    if (b->next >= 0 && !a->blocks[b->next].mapped) return b->size + a->blocks[b->next].size;
    return b->size;
}

/* get_free_block: the block (taken out of the pool), -2 where none fits, -1 the fallback. */
static int32_t get_free_block(Allocator *a, int32_t pool, int64_t size, int64_t stream) {
    if (a->gc_threshold > 0 && a->memory_fraction)
        a->pools[pool].get_free_blocks_call_count++;
    int32_t root = a->pools[pool].root[IN_FREE];
    int32_t x = lower_bound(a, root, stream, size, -1);
    if (x < 0 || a->blocks[x].stream != stream) return -2;
    if (a->segments[a->blocks[x].segment].expandable) {
        if (a->expandable_segments) {
            int32_t j = after_block(a, root, x);
            while (a->segments[a->blocks[x].segment].expandable && j >= 0 &&
                   a->blocks[j].stream == stream &&
                   expandable_size(a, j) < expandable_size(a, x)) {
                x = j;
                j = after_block(a, root, j);
            }
        } else {
            int32_t j = after_block(a, root, x);
            while (j >= 0 && a->blocks[j].stream == stream &&
                   a->segments[a->blocks[j].segment].expandable)
                j = after_block(a, root, j);
            if (j < 0 || a->blocks[j].stream != stream) return -2;
            x = j;
        }
    }
    int64_t found = a->blocks[x].size;
    if (!a->no_max_split) {
        if (size < a->max_split && found >= a->max_split) return -2;
        if (size >= a->max_split && found >= size + K_LARGE_BUFFER) return -2;
    }
    if (pool_erase(a, pool, x)) return -1;
    return x;
}

static int should_split(const Allocator *a, int32_t x, int64_t size) {
    int64_t remaining = a->blocks[x].size - size;
    if (a->pools[a->blocks[x].pool].is_small || a->expandable_segments)
        return remaining >= K_MIN_BLOCK_SIZE;
    return (a->no_max_split || size < a->max_split) && remaining > K_SMALL_SIZE;
}

static int32_t alloc_found_block(Allocator *a, int32_t x, int64_t size, int64_t stream) {
    if (should_split(a, x, size)) {
        int32_t remaining = x;
        x = new_block(a, a->blocks[remaining].addr, size, stream, a->blocks[remaining].pool,
                      a->blocks[remaining].segment);
        if (x < 0) return -1;
        Block *r = &a->blocks[remaining], *b = &a->blocks[x];
        b->prev = r->prev;
        if (b->prev >= 0) a->blocks[b->prev].next = x;
        b->next = remaining;
        r->prev = x;
        r->addr += size;
        r->size -= size;
        if (pool_insert(a, remaining)) return -1;
    }
    a->blocks[x].allocated = 1;
    return x;
}

/* DeviceCachingAllocator::malloc: the block, -2 out of memory, -1 the fallback.  ``route``:
 * the private pool pair (-1 the device's own pools). */
static int32_t malloc_block(Allocator *a, int64_t orig_size, int64_t stream, int32_t route) {
    int64_t size = round_size(a, orig_size);
    int32_t small = route < 0 ? 0 : 2 + 2 * route, large = small + 1;
    int32_t pool = size <= K_SMALL_SIZE ? small : large;
    int64_t alloc_size = allocation_size(size);
    int32_t x = get_free_block(a, pool, size, stream);
    if (x == -1) return -1;
    if (x == -2) {
        if (a->gc_threshold > 0 && a->memory_fraction && garbage_collect(a)) return -1;
        x = alloc_block(a, pool, size, alloc_size, stream);
        if (x == -2) {
            int done;
            if (release_available_cached_blocks(a, pool, size, stream, &done)) return -1;
            if (done) x = alloc_block(a, pool, size, alloc_size, stream);
        }
        if (x == -2 && !a->pools[pool].private_) {
            if (empty_cache(a)) return -1;
            x = alloc_block(a, pool, size, alloc_size, stream);
        }
        if (x < 0) return x;
    }
    return alloc_found_block(a, x, size, stream);
}

/* free_split: the pools' free (mapped) bytes as memtui measures them: fragmented (a free
 * block beside a mapped neighbour in its segment), cached (a free block with no mapped
 * neighbour: a whole segment, or a whole mapped range) and the largest fragmented block. */
static int free_split(Allocator *a, int64_t *fragmented, int64_t *cached, int64_t *largest) {
    *fragmented = *cached = *largest = 0;
    for (Py_ssize_t p = 0; p < a->n_pools; p++) {
        Py_ssize_t n;
        int32_t *listed = listed_tree(a, a->pools[p].root[IN_FREE], &n);
        if (!listed) return -1;
        for (Py_ssize_t k = 0; k < n; k++) {
            const Block *b = &a->blocks[listed[k]];
            int alone = (b->prev < 0 || !a->blocks[b->prev].mapped) &&
                        (b->next < 0 || !a->blocks[b->next].mapped);
            int64_t *into = alone ? cached : fragmented;
            if (add_checked(a, *into, b->size, into)) {
                PyMem_RawFree(listed);
                return -1;
            }
            if (!alone && b->size > *largest) *largest = b->size;
        }
        PyMem_RawFree(listed);
    }
    return 0;
}

static void allocator_free(Allocator *a) {
    PyMem_RawFree(a->blocks);
    PyMem_RawFree(a->segments);
    PyMem_RawFree(a->pools);
    map_free(&a->seg_by_addr);
    PyMem_RawFree(a->pending);
    PyMem_RawFree(a->hint_size);
    PyMem_RawFree(a->hint_addr);
    PyMem_RawFree(a->map_hints);
    PyMem_RawFree(a->log_action);
    PyMem_RawFree(a->log_addr);
    PyMem_RawFree(a->log_size);
    PyMem_RawFree(a->log_owner);
}

/* -- the loop (run.py's ReplayLoop.go) ---------------------------------------------------------- */

typedef struct {
    Py_ssize_t n;
    const uint8_t *action, *release;
    const int64_t *addr, *size, *stream, *block_id;
    const int32_t *route;
    int64_t id_low;          /* block ids are looked up at id - id_low */
    Py_ssize_t id_span;
    int32_t *by_id;          /* the trace's block id -> block, -1 none (self.blocks) */
    uint8_t *failed;         /* ids whose malloc failed (self.failed) */
    int64_t *replay_addr, *reserved;
    int64_t *oom_event, *oom_size;
    int8_t *oom_kind;
    Py_ssize_t n_ooms;
    int64_t unknown_frees, peak, fragmented_at_peak, cached_at_peak, largest_at_peak;
} Loop;

static Py_ssize_t id_slot(const Loop *l, int64_t id) {
    int64_t k = id - l->id_low;
    return (k >= 0 && k < l->id_span) ? (Py_ssize_t)k : -1;
}

static int add_oom(Loop *l, Py_ssize_t i, int64_t size, int8_t kind) {
    /* at most one OOM per event: sized by the events */
    l->oom_event[l->n_ooms] = i;
    l->oom_size[l->n_ooms] = size;
    l->oom_kind[l->n_ooms] = kind;
    l->n_ooms++;
    return 0;
}

static int step(Allocator *a, Loop *l, Py_ssize_t i) {
    int64_t id = l->block_id[i];
    Py_ssize_t slot = id_slot(l, id);
    switch (l->action[i]) {
    case A_ALLOC: {
        int32_t x = malloc_block(a, l->size[i], l->stream[i], l->route[i]);
        if (x == -1) return -1;
        if (x == -2) {
            add_oom(l, i, l->size[i], OOM_CAUSED);
            if (slot < 0) FALLBACK(a, "a block id out of range");
            l->failed[slot] = 1;
            return 0;
        }
        if (slot < 0) FALLBACK(a, "a block id out of range");
        l->by_id[slot] = x;
        l->replay_addr[i] = a->blocks[x].addr;
        a->n_hints = 0;
        a->n_map_hints = a->map_head = 0;
        return 0;
    }
    case A_FREE_REQUESTED: {
        int32_t x = slot >= 0 ? l->by_id[slot] : -1;
        if (x < 0) {
            l->unknown_frees += !(slot >= 0 && l->failed[slot]);
            return 0;
        }
        Block *b = &a->blocks[x];
        if (b->dead || b->tree != IN_NONE || !(b->allocated || b->pending))
            FALLBACK(a, "a free requested of a block not in use");
        b->allocated = 0;
        b->pending = 1;
        return pending_add(a, x);
    }
    case A_FREE: {
        int32_t x = slot >= 0 ? l->by_id[slot] : -1;
        if (x < 0) {
            l->unknown_frees += !(slot >= 0 && l->failed[slot]);
            return 0;
        }
        l->by_id[slot] = -1;
        Block *b = &a->blocks[x];
        if (b->dead || b->tree != IN_NONE || !(b->allocated || b->pending))
            FALLBACK(a, "a free of a block not in use");
        return free_block(a, x);
    }
    case A_SEGMENT_ALLOC: {
        Py_ssize_t cap = a->cap_hints;
        int64_t *sizes = grow(a->hint_size, &cap, a->n_hints + 1, sizeof(int64_t));
        if (!sizes) NOMEM(a);
        a->hint_size = sizes;
        cap = a->cap_hints;
        int64_t *addrs = grow(a->hint_addr, &cap, a->n_hints + 1, sizeof(int64_t));
        if (!addrs) NOMEM(a);
        a->hint_addr = addrs;
        a->cap_hints = cap;
        a->hint_size[a->n_hints] = l->size[i];
        a->hint_addr[a->n_hints] = l->addr[i];
        a->n_hints++;
        return 0;
    }
    case A_SEGMENT_MAP: {
        int64_t *grown = grow(a->map_hints, &a->cap_map_hints, a->n_map_hints + 1,
                              sizeof(int64_t));
        if (!grown) NOMEM(a);
        a->map_hints = grown;
        a->map_hints[a->n_map_hints++] = l->addr[i];
        return 0;
    }
    case A_OOM: {
        if (!a->has_capacity) return add_oom(l, i, l->size[i], OOM_KEPT);
        int32_t x = malloc_block(a, l->size[i], l->stream[i], -1);
        if (x == -1) return -1;
        if (x == -2) return add_oom(l, i, l->size[i], OOM_KEPT);
        add_oom(l, i, l->size[i], OOM_AVOIDED);
        return free_block(a, x);
    }
    default:
        return l->release[i] ? empty_cache(a) : 0;
    }
}

static int run_loop(Allocator *a, Loop *l) {
    Py_ssize_t logged = a->n_log;
    for (Py_ssize_t i = 0; i < l->n; i++) {
        if (step(a, l, i)) return -1;
        if (a->n_log != logged) {
            for (Py_ssize_t k = logged; k < a->n_log; k++) a->log_owner[k] = i;
            logged = a->n_log;
            if (a->reserved > l->peak) {
                l->peak = a->reserved;
                if (free_split(a, &l->fragmented_at_peak, &l->cached_at_peak,
                           &l->largest_at_peak)) return -1;
            }
        } else if (l->peak < 0) {
            l->peak = a->reserved;
            if (free_split(a, &l->fragmented_at_peak, &l->cached_at_peak,
                           &l->largest_at_peak)) return -1;
        }
        l->reserved[i] = a->reserved;
    }
    return 0;
}

/* -- the state handed over (core.py's export) ----------------------------------------------- */

typedef struct {
    Py_buffer buf;
    int held;
} View;

static int take(PyObject *obj, View *v, Py_ssize_t itemsize, Py_ssize_t width,
                const char *name, Py_ssize_t *rows) {
    if (PyObject_GetBuffer(obj, &v->buf, PyBUF_C_CONTIGUOUS) < 0) return -1;
    v->held = 1;
    if ((v->buf.itemsize != 1 && v->buf.itemsize != itemsize) ||
        v->buf.len % (itemsize * width)) {
        PyErr_Format(PyExc_ValueError, "%s: not rows of %zd items of %zd bytes", name, width,
                     itemsize);
        return -1;
    }
    *rows = v->buf.len / (itemsize * width);
    return 0;
}

static void release(View *views, int n) {
    for (int k = 0; k < n; k++)
        if (views[k].held) PyBuffer_Release(&views[k].buf);
}

/* Block rows: addr, size, stream, pool, segment, prev, next, allocated, pending, mapped,
 * tree (-1 none, 0 free, 1 unmapped), gc_base. */
#define BLOCK_WIDTH 12
/* Segment rows: addr, size, stream, page, is_small, expandable, in_dict. */
#define SEGMENT_WIDTH 7
/* Pool rows: is_small, private, get_free_blocks_call_count. */
#define POOL_WIDTH 3

static int in_range(int64_t x, int64_t low, int64_t high) { return x >= low && x < high; }

static int load_state(Allocator *a, const int64_t *blocks, Py_ssize_t nb, const int64_t *segs,
                      Py_ssize_t ns, const int64_t *pools, Py_ssize_t np_) {
    a->blocks = PyMem_RawMalloc((size_t)(nb + 16) * sizeof(Block));
    a->segments = PyMem_RawMalloc((size_t)(ns + 16) * sizeof(Segment));
    a->pools = PyMem_RawMalloc((size_t)(np_ ? np_ : 1) * sizeof(Pool));
    if (!a->blocks || !a->segments || !a->pools || map_init(&a->seg_by_addr, 64)) {
        PyErr_NoMemory();
        return -1;
    }
    a->cap_blocks = nb + 16;
    a->cap_segments = ns + 16;
    a->n_pools = np_;
    for (Py_ssize_t p = 0; p < np_; p++) {
        const int64_t *row = pools + p * POOL_WIDTH;
        a->pools[p] = (Pool){(int8_t)(row[0] != 0), (int8_t)(row[1] != 0), row[2], {-1, -1}};
    }
    for (Py_ssize_t s = 0; s < ns; s++) {
        const int64_t *row = segs + s * SEGMENT_WIDTH;
        if (!in_range(row[0], 0, ADDR_LIMIT) || !in_range(row[1], 0, ADDR_LIMIT) ||
            !in_range(row[3], 0, SIZE_LIMIT)) {
            PyErr_SetString(PyExc_ValueError, "a segment beyond the limits");
            return -1;
        }
        a->segments[s] = (Segment){row[0], row[1], row[2], row[3], (int8_t)(row[4] != 0),
                                   (int8_t)(row[5] != 0), (int8_t)(row[6] != 0)};
        if (row[6]) {
            if (map_get(&a->seg_by_addr, row[0]) >= 0) {
                PyErr_SetString(PyExc_ValueError, "two segments at one address");
                return -1;
            }
            if (map_put(&a->seg_by_addr, row[0], (int32_t)s)) {
                PyErr_NoMemory();
                return -1;
            }
        }
    }
    a->n_segments = ns;
    for (Py_ssize_t x = 0; x < nb; x++) {
        const int64_t *row = blocks + x * BLOCK_WIDTH;
        if (!in_range(row[0], 0, ADDR_LIMIT) || !in_range(row[1], 0, ADDR_LIMIT) ||
            !in_range(row[3], 0, np_) || !in_range(row[4], 0, ns) ||
            !in_range(row[5], -1, nb) || !in_range(row[6], -1, nb) ||
            !in_range(row[10], -1, 2)) {
            PyErr_SetString(PyExc_ValueError, "a block beyond the limits");
            return -1;
        }
        Block *b = &a->blocks[x];
        memset(b, 0, sizeof(*b));
        b->addr = row[0];
        b->size = row[1];
        b->stream = row[2];
        b->pool = (int32_t)row[3];
        b->segment = (int32_t)row[4];
        b->prev = (int32_t)row[5];
        b->next = (int32_t)row[6];
        b->allocated = (int8_t)(row[7] != 0);
        b->pending = (int8_t)(row[8] != 0);
        b->mapped = (int8_t)(row[9] != 0);
        b->tree = IN_NONE;
        b->gc_base = row[11];
        b->pending_pos = -1;
        b->left = b->right = -1;
    }
    a->n_blocks = nb;
    for (Py_ssize_t x = 0; x < nb; x++) {
        const int64_t *row = blocks + x * BLOCK_WIDTH;
        if (row[10] == IN_NONE) continue;
        if ((row[10] == IN_FREE) != (a->blocks[x].mapped != 0)) {
            PyErr_SetString(PyExc_ValueError, "a block in the tree of the other mapping");
            return -1;
        }
        if (pool_insert(a, (int32_t)x)) {
            PyErr_SetString(PyExc_ValueError, a->fallback);
            return -1;
        }
    }
    return 0;
}

static PyObject *int64_bytes(const int64_t *data, Py_ssize_t n) {
    return PyBytes_FromStringAndSize((const char *)data, n * (Py_ssize_t)sizeof(int64_t));
}

PyDoc_STRVAR(run_doc,
"run(blocks, segments, pools, pending, hints, map_hints, scalars, divisions, gc_threshold,\n"
"    action, addr, size, stream, block_id, route, release, id_low, id_map, failed)\n"
"-> (None, replay_addr, reserved, log, ooms, figures) or (reason, None, ...)\n\n"
"The replay's loop over one device's events from the state handed over (core.py says\n"
"each array's layout).  A reason (str) instead of None: the loop left the trace to the\n"
"Python reference, which must run it.");

static PyObject *run(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *objs[18];
    double gc_threshold;
    long long id_low;
    if (!PyArg_ParseTuple(args, "OOOOOOOOdOOOOOOOLOO:run", &objs[0], &objs[1], &objs[2],
                          &objs[3], &objs[4], &objs[5], &objs[6], &objs[7], &gc_threshold,
                          &objs[8], &objs[9], &objs[10], &objs[11], &objs[12], &objs[13],
                          &objs[14], &id_low, &objs[15], &objs[16]))
        return NULL;
    View v[17];
    memset(v, 0, sizeof(v));
    Allocator a;
    memset(&a, 0, sizeof(a));
    Loop l;
    memset(&l, 0, sizeof(l));
    PyObject *result = NULL;
    Py_ssize_t nb, ns, np_, npend, nh, nmh, nsc, ndiv, n, k;
    int32_t *by_id = NULL;
    uint8_t *failed = NULL;
    const int64_t *sc;
    if (take(objs[0], &v[0], 8, BLOCK_WIDTH, "blocks", &nb) ||
        take(objs[1], &v[1], 8, SEGMENT_WIDTH, "segments", &ns) ||
        take(objs[2], &v[2], 8, POOL_WIDTH, "pools", &np_) ||
        take(objs[3], &v[3], 8, 1, "pending", &npend) ||
        take(objs[4], &v[4], 8, 2, "hints", &nh) ||
        take(objs[5], &v[5], 8, 1, "map_hints", &nmh) ||
        take(objs[6], &v[6], 8, 1, "scalars", &nsc) ||
        take(objs[7], &v[7], 8, 1, "divisions", &ndiv) ||
        take(objs[8], &v[8], 1, 1, "action", &n) ||
        take(objs[9], &v[9], 8, 1, "addr", &k) || k != n ||
        take(objs[10], &v[10], 8, 1, "size", &k) || k != n ||
        take(objs[11], &v[11], 8, 1, "stream", &k) || k != n ||
        take(objs[12], &v[12], 8, 1, "block_id", &k) || k != n ||
        take(objs[13], &v[13], 4, 1, "route", &k) || k != n ||
        take(objs[14], &v[14], 1, 1, "release", &k) || k != n ||
        take(objs[15], &v[15], 4, 1, "id_map", &l.id_span) ||
        take(objs[16], &v[16], 1, 1, "failed", &k) || k != l.id_span) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "the event arrays differ in length");
        goto done;
    }
    if (nsc != 7 || ndiv != 16 || np_ < 2 || np_ % 2) {
        PyErr_SetString(PyExc_ValueError, "scalars, divisions or pools of the wrong shape");
        goto done;
    }
    sc = v[6].buf.buf;
    /* scalars: reserved, invented, capacity (-1 None), memory_fraction,
     * expandable_segments, max_split (-1 none), plain_rounding */
    if (!in_range(sc[0], -SIZE_LIMIT * 1024, SIZE_LIMIT * 1024) ||
        !in_range(sc[1], 0, ADDR_LIMIT) || !in_range(sc[2], -1, SIZE_LIMIT) ||
        !in_range(sc[5], -1, ADDR_LIMIT)) {
        PyErr_SetString(PyExc_ValueError, "scalars beyond the limits");
        goto done;
    }
    a.reserved = sc[0];
    a.invented = sc[1];
    a.has_capacity = sc[2] >= 0;
    a.capacity = sc[2];
    a.memory_fraction = (int8_t)(sc[3] != 0);
    a.expandable_segments = (int8_t)(sc[4] != 0);
    a.no_max_split = sc[5] < 0;
    a.max_split = sc[5] < 0 ? INT64_MAX : sc[5];
    a.plain_rounding = (int8_t)(sc[6] != 0);
    a.gc_threshold = gc_threshold;
    for (int d = 0; d < 16; d++) {
        a.divisions[d] = ((const int64_t *)v[7].buf.buf)[d];
        if (!in_range(a.divisions[d], 0, 1 << 20)) {
            PyErr_SetString(PyExc_ValueError, "divisions beyond the limits");
            goto done;
        }
    }
    if (load_state(&a, v[0].buf.buf, nb, v[1].buf.buf, ns, v[2].buf.buf, np_)) goto done;
    for (Py_ssize_t p = 0; p < npend; p++) {
        int64_t x = ((const int64_t *)v[3].buf.buf)[p];
        if (!in_range(x, 0, nb)) {
            PyErr_SetString(PyExc_ValueError, "a pending block beyond the limits");
            goto done;
        }
        if (pending_add(&a, (int32_t)x)) {
            PyErr_NoMemory();
            goto done;
        }
    }
    a.hint_size = PyMem_RawMalloc((size_t)(nh + 1) * sizeof(int64_t));
    a.hint_addr = PyMem_RawMalloc((size_t)(nh + 1) * sizeof(int64_t));
    a.map_hints = PyMem_RawMalloc((size_t)(nmh + 1) * sizeof(int64_t));
    by_id = PyMem_RawMalloc((size_t)(l.id_span + 1) * sizeof(int32_t));
    failed = PyMem_RawMalloc((size_t)(l.id_span + 1));
    l.oom_event = PyMem_RawMalloc((size_t)(n + 1) * sizeof(int64_t));
    l.oom_size = PyMem_RawMalloc((size_t)(n + 1) * sizeof(int64_t));
    l.oom_kind = PyMem_RawMalloc((size_t)(n + 1));
    l.replay_addr = PyMem_RawCalloc((size_t)(n + 1), sizeof(int64_t));
    l.reserved = PyMem_RawCalloc((size_t)(n + 1), sizeof(int64_t));
    if (!a.hint_size || !a.hint_addr || !a.map_hints || !by_id || !failed || !l.oom_event ||
        !l.oom_size || !l.oom_kind || !l.replay_addr || !l.reserved) {
        PyErr_NoMemory();
        goto done;
    }
    a.cap_hints = nh + 1;
    a.cap_map_hints = nmh + 1;
    for (Py_ssize_t h = 0; h < nh; h++) {
        a.hint_size[h] = ((const int64_t *)v[4].buf.buf)[2 * h];
        a.hint_addr[h] = ((const int64_t *)v[4].buf.buf)[2 * h + 1];
    }
    a.n_hints = nh;
    memcpy(a.map_hints, v[5].buf.buf, (size_t)nmh * sizeof(int64_t));
    a.n_map_hints = nmh;
    for (Py_ssize_t s = 0; s < l.id_span; s++) {
        int32_t x = ((const int32_t *)v[15].buf.buf)[s];
        if (!in_range(x, -1, nb)) {
            PyErr_SetString(PyExc_ValueError, "a block id mapped beyond the blocks");
            goto done;
        }
        by_id[s] = x;
    }
    memcpy(failed, v[16].buf.buf, (size_t)l.id_span);
    l.n = n;
    l.action = v[8].buf.buf;
    l.addr = v[9].buf.buf;
    l.size = v[10].buf.buf;
    l.stream = v[11].buf.buf;
    l.block_id = v[12].buf.buf;
    l.route = v[13].buf.buf;
    l.release = v[14].buf.buf;
    l.id_low = id_low;
    l.by_id = by_id;
    l.failed = failed;
    l.peak = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!in_range(l.addr[i], 0, ADDR_LIMIT) || !in_range(l.size[i], -SIZE_LIMIT, SIZE_LIMIT)
            || !in_range(l.route[i], -1, (np_ - 2) / 2)) {
            PyErr_SetString(PyExc_ValueError, "an event beyond the limits");
            goto done;
        }
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = run_loop(&a, &l);
    Py_END_ALLOW_THREADS
    if (status) {
        result = Py_BuildValue("(sOOOOO)", a.fallback ? a.fallback : "the loop stopped",
                               Py_None, Py_None, Py_None, Py_None, Py_None);
        goto done;
    }
    {
        PyObject *log = Py_BuildValue(
            "(NNNN)", int64_bytes(a.log_owner, a.n_log),
            PyBytes_FromStringAndSize((const char *)a.log_action, a.n_log),
            int64_bytes(a.log_addr, a.n_log), int64_bytes(a.log_size, a.n_log));
        PyObject *ooms = Py_BuildValue(
            "(NNN)", int64_bytes(l.oom_event, l.n_ooms), int64_bytes(l.oom_size, l.n_ooms),
            PyBytes_FromStringAndSize((const char *)l.oom_kind, l.n_ooms));
        if (!log || !ooms) {
            Py_XDECREF(log);
            Py_XDECREF(ooms);
            goto done;
        }
        result = Py_BuildValue("(ONNNN(LLLL))", Py_None, int64_bytes(l.replay_addr, n),
                               int64_bytes(l.reserved, n), log, ooms,
                               (long long)l.unknown_frees, (long long)l.fragmented_at_peak,
                               (long long)l.cached_at_peak, (long long)l.largest_at_peak);
    }
done:
    release(v, 17);
    allocator_free(&a);
    PyMem_RawFree(by_id);
    PyMem_RawFree(failed);
    PyMem_RawFree(l.oom_event);
    PyMem_RawFree(l.oom_size);
    PyMem_RawFree(l.oom_kind);
    PyMem_RawFree(l.replay_addr);
    PyMem_RawFree(l.reserved);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, run_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_replay",
    "The what-if replay's per-event loop, compiled (see memtui/analysis/replay/core.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__replay(void) { return PyModule_Create(&module_def); }
