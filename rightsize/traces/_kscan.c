/* Kineto event batches -> Arrow columns, in one pass over the bytes (optional accelerator).
 *
 * Role: cut() finds where the whole elements of the event array end in a read of the file
 * (rightsize.traces.jsonscan); parse() turns a batch of them -- a run of the array as the file
 * has it, or NDJSON -- into the columns rightsize.traces.kineto_scan hands to
 * kineto_frames.split_events: the top-level fields and the named "args" fields. They reach
 * polars through the Arrow C data interface (one PyCapsule pair "arrow_schema"/"arrow_array"
 * per column: no pyarrow, no Python object per event), which adopts the buffers without a copy.
 *
 * Contract: a text column holds what polars' NDJSON reader gives for the field; a time is
 * int64 ns from its digits, as kineto_frames.us_to_ns converts its text; a numeric arg is
 * what polars' cast of its text gives. Anything else -- invalid JSON or UTF-8, a lone
 * surrogate, an escaped key, a float or exponent where polars would print its own rounding, a
 * string time, a nested object where text is kept, a nesting deeper than MAX_DEPTH -- makes
 * parse() return None, and the caller parses that batch with polars: the same frames and the
 * same errors as without this module (tests/traces/test_kscan.py).
 *
 * Every read is bounds-checked against the end of its line or batch; buffers are mapped pages
 * that grow in place, and a failed allocation raises MemoryError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif

#define MAX_COLS 32
#define MAX_DEPTH 64

/* Arrow C data interface (https://arrow.apache.org/docs/format/CDataInterface.html). */
#define ARROW_FLAG_NULLABLE 2
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

/* ---- growable buffers ---------------------------------------------------------------- */

/* Column buffers are mapped pages on Linux: they go back to the system the moment polars
 * releases a batch's columns (from malloc, glibc kept ~70 MiB of them as free heap after a
 * 175 MB trace), and a mapping grows in place (mremap) without copying. */
typedef struct {
    char *p;
    size_t len, cap;
} Buf;

#if defined(__linux__)
#include <pthread.h>
#include <sys/mman.h>
#define PAGE ((size_t)4096)
#define MIN_CAP (16 * PAGE)

/* Freed mappings kept for the next batch's columns, by size (MIN_CAP << class): a fresh
 * mapping faults in every page it is written to, and each munmap interrupts the other threads
 * to flush their TLBs. Batches are alike in size, so a column mostly finds a mapping of the
 * size it grows to. At most POOL_BYTES are kept (resident, unused between batches), and only
 * while a trace is read: the reader opens the pool (pool(True)) and, once its last batch is
 * parsed, closes it (pool(False)), which gives them back, so the frames' later frees unmap at
 * once. Columns are freed on polars' threads: a mutex. */
#define POOL_CLASSES 16
#define POOL_DEPTH 32
#define POOL_BYTES ((size_t)16 << 20)
static struct { char *p[POOL_DEPTH]; int n; } pool[POOL_CLASSES];
static size_t pool_bytes;
static int pool_open;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static int pool_class(size_t cap) {
    int k = 0;
    while (k < POOL_CLASSES && (MIN_CAP << k) < cap) k++;
    return k < POOL_CLASSES && (MIN_CAP << k) == cap ? k : -1;
}

static char *pool_get(size_t cap) {
    int k = pool_class(cap);
    char *p = NULL;
    if (k < 0) return NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool[k].n) {
        p = pool[k].p[--pool[k].n];
        pool_bytes -= cap;
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static void unmap_or_keep(char *p, size_t cap) {
    int k = pool_class(cap), kept = 0;
    if (k >= 0) {
        pthread_mutex_lock(&pool_lock);
        if (pool_open && pool[k].n < POOL_DEPTH && pool_bytes + cap <= POOL_BYTES) {
            pool[k].p[pool[k].n++] = p;
            pool_bytes += cap;
            kept = 1;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    if (!kept) munmap(p, cap);
}

static void pool_trim(void) {
    pthread_mutex_lock(&pool_lock);
    for (int k = 0; k < POOL_CLASSES; k++)
        while (pool[k].n) munmap(pool[k].p[--pool[k].n], MIN_CAP << k);
    pool_bytes = 0;
    pool_open = 0;
    pthread_mutex_unlock(&pool_lock);
}

static void pool_start(void) {
    pthread_mutex_lock(&pool_lock);
    pool_open = 1;
    pthread_mutex_unlock(&pool_lock);
}

static void buf_free(Buf *b) {
    if (b->p) unmap_or_keep(b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* Grows to the next power-of-two multiple of MIN_CAP: from the pool when it has one of that
 * size (the bytes so far copied over), else by mremap, in place where it can. */
static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : MIN_CAP;
    while (cap < b->len + extra) cap *= 2;
    char *p = pool_get(cap);
    if (p) {
        if (b->p) {
            memcpy(p, b->p, b->len);
            unmap_or_keep(b->p, b->cap);
        }
    } else {
        void *q = b->p ? mremap(b->p, b->cap, cap, MREMAP_MAYMOVE)
                       : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED) return -1;
        p = q;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}
#else
static void pool_trim(void) {}
static void pool_start(void) {}

static void buf_free(Buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}
#endif

static inline int buf_put(Buf *b, const char *s, size_t n) {
    if (n == 0) return 0;
    if (b->len + n > b->cap && buf_reserve(b, n)) return -1; /* growth: rare, out of line */
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* What a column holds. TEXT: the value as polars' reader would give it as text (a number
 * only when it is an integer: polars prints other numbers its own way). TIME: a Kineto time
 * in microseconds as int64 nanoseconds, converted from the digits exactly as
 * kineto_frames.us_to_ns converts the text. INT, FLOAT: a number as polars casts its text
 * (an integer out of int64's range is null). Strings and booleans in a numeric column fall
 * back: polars' cast of their text decides. */
enum { TEXT = 0, TIME = 1, INT = 2, FLOAT = 3 };

/* One column: text bytes and int64 offsets, or one 8-byte value per row (data only); one
 * validity byte per row (packed into a bitmap at export). */
typedef struct {
    Buf data;
    Buf offs;  /* TEXT: int64_t[rows + 1] */
    Buf valid; /* uint8_t[rows] */
    int64_t nulls;
    int kind;
    union { int64_t i; double f; } value; /* numeric columns: this row's value */
} Col;

/* The "C" locale, for strtod_l: a JSON number's decimal point is '.' whatever the process's
 * LC_NUMERIC says (made once, at import). */
static locale_t c_numeric;

/* Parse status: OK, or FALLBACK (polars decides), or NOMEM (exception set by the caller). */
enum { OK = 0, FALLBACK = 1, NOMEM = 2 };

typedef struct {
    const char *key[MAX_COLS];
    size_t keylen[MAX_COLS];
    int n;
} Keys;

typedef struct {
    Keys top, args;
    int args_index; /* position of "args" among the top keys, or -1 */
    Col *cols;      /* top columns (without "args"), then the args fields */
    int ntop;       /* text columns at the top level */
    int ncols;
    int64_t rows;
    uint32_t seen;  /* columns set in the current row */
    int args_seen;  /* "args" met in this event: later ones are skipped (first wins) */
    Buf scratch;    /* nested values serialized here first */
} State;

/* Bytes that end a run of plain string text: the quote, the backslash, control characters. */
static unsigned char STR_STOP[256];
/* Bytes cut() stops at inside an element: quotes and brackets. */
static unsigned char STRUCTURAL[256];

static void init_tables(void) {
    for (int c = 0; c < 0x20; c++) STR_STOP[c] = 1;
    STR_STOP['"'] = STR_STOP['\\'] = 1;
    STRUCTURAL['"'] = STRUCTURAL['{'] = STRUCTURAL['['] = STRUCTURAL['}'] = STRUCTURAL[']'] = 1;
}

static inline const char *ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int hex4(const char *p, const char *e, unsigned *out) {
    if (e - p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return -1;
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return 0;
}

static int put_utf8(Buf *b, unsigned cp) {
    char s[4];
    size_t n;
    if (cp < 0x80) { s[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { s[0] = (char)(0xC0 | (cp >> 6)); s[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        s[0] = (char)(0xE0 | (cp >> 12)); s[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        s[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        s[0] = (char)(0xF0 | (cp >> 18)); s[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        s[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); s[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return buf_put(b, s, n);
}

/* A JSON string from just after its opening quote: decoded into `out` (NULL: only checked).
 * `*end` is set past the closing quote. `*plain` (if given) is cleared when the decoded text
 * holds a quote, a backslash or a control character (text polars would re-escape). */
static int string(const char *p, const char *e, Buf *out, const char **end, int *plain) {
    while (p < e) {
        const char *run = p;
        while (p < e && !STR_STOP[(unsigned char)*p]) p++;
        if (out && p > run && buf_put(out, run, (size_t)(p - run))) return NOMEM;
        if (p >= e) return FALLBACK;
        char c = *p;
        if (c == '"') { *end = p + 1; return OK; }
        if (c != '\\') return FALLBACK; /* a raw control character: invalid JSON */
        if (++p >= e) return FALLBACK;
        char d = *p++;
        unsigned cp;
        switch (d) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (hex4(p, e, &cp)) return FALLBACK;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return FALLBACK; /* lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, e, &lo)) return FALLBACK;
                if (lo < 0xDC00 || lo > 0xDFFF) return FALLBACK;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            break;
        default:
            return FALLBACK;
        }
        if (plain && (cp == '"' || cp == '\\' || cp < 0x20)) *plain = 0;
        if (out && put_utf8(out, cp)) return NOMEM;
    }
    return FALLBACK;
}

/* A JSON number: `*end` past it, `*integer` when it has no fraction or exponent, `*expo` when
 * it has an exponent, `*negzero` for "-0". */
static int number(const char *p, const char *e, const char **end, int *integer, int *expo,
                  int *negzero) {
    const char *s = p;
    if (p < e && *p == '-') p++;
    if (p >= e) return FALLBACK;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (p < e && *p >= '0' && *p <= '9') p++;
    else return FALLBACK;
    *negzero = (p - s == 2 && s[0] == '-' && s[1] == '0');
    *integer = 1;
    *expo = 0;
    if (p < e && *p == '.') {
        *integer = 0;
        p++;
        if (p >= e || *p < '0' || *p > '9') return FALLBACK;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *integer = 0;
        *expo = 1;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return FALLBACK;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    *end = p;
    return OK;
}

static int literal(const char *p, const char *e, const char *word, const char **end) {
    size_t n = strlen(word);
    if ((size_t)(e - p) < n || memcmp(p, word, n) != 0) return FALLBACK;
    *end = p + n;
    return OK;
}

/* Any JSON value, checked and skipped. */
static int skip(const char *p, const char *e, const char **end, int depth) {
    int st, a, b, c;
    if (p >= e) return FALLBACK;
    switch (*p) {
    case '"': return string(p + 1, e, NULL, end, NULL);
    case 't': return literal(p, e, "true", end);
    case 'f': return literal(p, e, "false", end);
    case 'n': return literal(p, e, "null", end);
    case '[':
    case '{': {
        if (depth >= MAX_DEPTH) return FALLBACK;
        char close = *p == '[' ? ']' : '}';
        int object = *p == '{';
        p = ws(p + 1, e);
        if (p < e && *p == close) { *end = p + 1; return OK; }
        for (;;) {
            if (object) {
                if (p >= e || *p != '"') return FALLBACK;
                if ((st = string(p + 1, e, NULL, &p, NULL))) return st;
                p = ws(p, e);
                if (p >= e || *p != ':') return FALLBACK;
                p = ws(p + 1, e);
            }
            if ((st = skip(p, e, &p, depth + 1))) return st;
            p = ws(p, e);
            if (p >= e) return FALLBACK;
            if (*p == ',') { p = ws(p + 1, e); continue; }
            if (*p == close) { *end = p + 1; return OK; }
            return FALLBACK;
        }
    }
    default:
        return number(p, e, end, &a, &b, &c);
    }
}

/* A list as polars' reader writes it into a text column ("[[2, 3], []]", ", " between items,
 * strings quoted, integers as written). Floats, objects and strings polars would re-escape
 * fall back: their text there is polars' own. */
static int list_text(const char *p, const char *e, Buf *out, const char **end, int depth) {
    int st;
    if (depth >= MAX_DEPTH) return FALLBACK;
    if (buf_put(out, "[", 1)) return NOMEM;
    p = ws(p + 1, e);
    if (p < e && *p == ']') { *end = p + 1; return buf_put(out, "]", 1) ? NOMEM : OK; }
    for (;;) {
        if (p >= e) return FALLBACK;
        if (*p == '"') {
            int plain = 1;
            if (buf_put(out, "\"", 1)) return NOMEM;
            if ((st = string(p + 1, e, out, &p, &plain))) return st;
            if (!plain) return FALLBACK;
            if (buf_put(out, "\"", 1)) return NOMEM;
        } else if (*p == '[') {
            if ((st = list_text(p, e, out, &p, depth + 1))) return st;
        } else if (*p == 't' || *p == 'f' || *p == 'n') {
            const char *s = p;
            if ((st = skip(p, e, &p, depth + 1))) return st;
            if (buf_put(out, s, (size_t)(p - s))) return NOMEM;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            const char *s = p;
            int integer, expo, negzero;
            if ((st = number(p, e, &p, &integer, &expo, &negzero))) return st;
            if (!integer || negzero) return FALLBACK;
            if (buf_put(out, s, (size_t)(p - s))) return NOMEM;
        } else {
            return FALLBACK;
        }
        p = ws(p, e);
        if (p >= e) return FALLBACK;
        if (*p == ',') {
            if (buf_put(out, ", ", 2)) return NOMEM;
            p = ws(p + 1, e);
            continue;
        }
        if (*p == ']') { *end = p + 1; return buf_put(out, "]", 1) ? NOMEM : OK; }
        return FALLBACK;
    }
}

/* A Kineto time (microseconds, plain decimal) as nanoseconds: whole * 1000 plus the first four
 * fractional digits rounded half up at the nanosecond, as kineto_frames.us_to_ns does. */
static int time_ns(const char *p, const char *end, int64_t *out) {
    int neg = *p == '-';
    p += neg;
    int64_t whole = 0;
    while (p < end && *p != '.') {
        if (whole > 9000000000000000LL / 10) return FALLBACK; /* past int64 ns: polars decides */
        whole = whole * 10 + (*p++ - '0');
    }
    if (whole > 9000000000000000LL) return FALLBACK;
    int64_t frac4 = 0;
    int digits = 0;
    if (p < end) p++; /* the point */
    for (; digits < 4; digits++) frac4 = frac4 * 10 + (p < end ? *p++ - '0' : 0);
    int64_t ns = whole * 1000 + (frac4 + 5) / 10;
    *out = neg ? -ns : ns;
    return OK;
}

/* An integer token as int64; out of range: `*ok` cleared (polars' cast gives null). */
static int64_t int_value(const char *p, const char *end, int *ok) {
    int neg = *p == '-';
    p += neg;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    *ok = 1;
    for (; p < end; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (limit - d) / 10) { *ok = 0; return 0; }
        v = v * 10 + d;
    }
    return neg ? (int64_t)(0 - v) : (int64_t)v;
}

/* A number into a numeric column. */
static int numeric(Col *col, const char *s0, const char *end, int integer, int expo, int *set) {
    *set = 1;
    switch (col->kind) {
    case TIME:
        if (expo) return FALLBACK;
        return time_ns(s0, end, &col->value.i);
    case INT: {
        if (!integer) return FALLBACK; /* polars' text of 1.0 is "1": its printing decides */
        int ok;
        col->value.i = int_value(s0, end, &ok);
        *set = ok;
        return OK;
    }
    default: { /* FLOAT: strtod rounds correctly, as polars' parse of the text does. In the
                * "C" locale: plain strtod reads the process's LC_NUMERIC, and where a program
                * set a comma-decimal one (de_DE) it stopped at the '.' of 4.47 and gave 4. */
        char tmp[64];
        size_t n = (size_t)(end - s0);
        if (n >= sizeof tmp) return FALLBACK;
        memcpy(tmp, s0, n);
        tmp[n] = 0;
        col->value.f = strtod_l(tmp, NULL, c_numeric);
        return OK;
    }
    }
}

/* A string in an int64 column, as polars casts text (Rust's i64 parse): [+-]?[0-9]+ in
 * range, else null. */
static int int_string(State *s, Col *col, const char *p, const char *e, const char **end,
                      int *set) {
    int st;
    s->scratch.len = 0;
    if ((st = string(p + 1, e, &s->scratch, end, NULL))) return st;
    const char *q = s->scratch.p, *qe = q + s->scratch.len;
    *set = 0;
    if (q == qe) return OK;
    int neg = *q == '-';
    if (*q == '+' || *q == '-') q++;
    if (q == qe) return OK;
    for (const char *d = q; d < qe; d++)
        if (*d < '0' || *d > '9') return OK;
    int ok;
    int64_t v = int_value(q, qe, &ok);
    if (!ok && neg) { /* -9223372036854775808: int_value only saw the digits */
        if (qe - q == 19 && memcmp(q, "9223372036854775808", 19) == 0) { col->value.i = INT64_MIN; *set = 1; }
        return OK;
    }
    col->value.i = neg ? -v : v;
    *set = ok;
    return OK;
}

/* One captured value into column `c` (as polars' reader gives it; null for null). */
static int value(State *s, int c, const char *p, const char *e, const char **end) {
    Col *col = &s->cols[c];
    int st, set = 1;
    if (p >= e) return FALLBACK;
    if (col->kind != TEXT) {
        if (*p == '"') {
            if (col->kind != INT) return FALLBACK; /* a time or float as text: polars decides */
            if ((st = int_string(s, col, p, e, end, &set))) return st;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            int integer, expo, negzero;
            if ((st = number(p, e, end, &integer, &expo, &negzero))) return st;
            if ((st = numeric(col, p, *end, integer, expo, &set))) return st;
        } else { /* null, a boolean, a list, an object: null once cast, as their text is */
            if ((st = skip(p, e, end, 1))) return st;
            set = 0;
        }
        if (set) s->seen |= 1u << c;
        return OK;
    }
    switch (*p) {
    case '"':
        if ((st = string(p + 1, e, &col->data, end, NULL))) return st;
        break;
    case 'n':
        return literal(p, e, "null", end); /* left unset: null */
    case 't':
    case 'f': {
        const char *s0 = p;
        if ((st = skip(p, e, end, 0))) return st;
        if (buf_put(&col->data, s0, (size_t)(*end - s0))) return NOMEM;
        break;
    }
    case '[':
        if (c < s->ntop) return FALLBACK; /* a list where the top level expects text: rare */
        s->scratch.len = 0;
        if ((st = list_text(p, e, &s->scratch, end, 0))) return st;
        if (buf_put(&col->data, s->scratch.p, s->scratch.len)) return NOMEM;
        break;
    case '{':
        return FALLBACK;
    default: {
        int integer, expo, negzero;
        const char *s0 = p;
        if ((st = number(p, e, end, &integer, &expo, &negzero))) return st;
        if (!integer || negzero) return FALLBACK;
        if (buf_put(&col->data, s0, (size_t)(*end - s0))) return NOMEM;
    }
    }
    s->seen |= 1u << c;
    return OK;
}

static int find(const Keys *k, const char *key, size_t n) {
    for (int i = 0; i < k->n; i++) /* length and end bytes first: most keys differ there */
        if (k->keylen[i] == n && (n == 0 || (k->key[i][0] == key[0] && k->key[i][n - 1] == key[n - 1]))
            && memcmp(k->key[i], key, n) == 0)
            return i;
    return -1;
}

/* The members of an object from just after its "{": captured keys go to their columns
 * (the first of duplicates wins, as in polars), others are checked and skipped. */
static int members(State *s, const char *p, const char *e, const char **end, int top) {
    const Keys *keys = top ? &s->top : &s->args;
    int st;
    p = ws(p, e);
    if (p < e && *p == '}') { *end = p + 1; return OK; }
    for (;;) {
        if (p >= e || *p != '"') return FALLBACK;
        const char *k = ++p;
        while (p < e && !STR_STOP[(unsigned char)*p]) p++;
        if (p >= e || *p != '"') return FALLBACK; /* escaped or broken key */
        size_t klen = (size_t)(p - k);
        p = ws(p + 1, e);
        if (p >= e || *p != ':') return FALLBACK;
        p = ws(p + 1, e);
        int i = find(keys, k, klen);
        if (top && i >= 0 && i == s->args_index) { /* not -1: an unknown key without "args" */
            if (s->args_seen) {
                if ((st = skip(p, e, &p, 1))) return st;
            } else if (p < e && *p == '{') {
                s->args_seen = 1;
                if ((st = members(s, p + 1, e, &p, 0))) return st;
            } else if (p < e && *p == 'n') {
                if ((st = literal(p, e, "null", &p))) return st;
                s->args_seen = 1; /* args: null (its fields stay null) */
            } else {
                return FALLBACK;
            }
        } else if (i >= 0) {
            int c = top ? (i < s->args_index || s->args_index < 0 ? i : i - 1) : s->ntop + i;
            if (s->seen & (1u << c)) {
                if ((st = skip(p, e, &p, 1))) return st;
            } else if ((st = value(s, c, p, e, &p))) {
                return st;
            }
        } else if ((st = skip(p, e, &p, 1))) {
            return st;
        }
        p = ws(p, e);
        if (p >= e) return FALLBACK;
        if (*p == ',') { p = ws(p + 1, e); continue; }
        if (*p == '}') { *end = p + 1; return OK; }
        return FALLBACK;
    }
}

static int end_row(State *s) {
    for (int c = 0; c < s->ncols; c++) {
        Col *col = &s->cols[c];
        uint8_t v = (s->seen >> c) & 1u;
        if (col->kind == TEXT) {
            int64_t off = (int64_t)col->data.len;
            if (buf_put(&col->offs, (const char *)&off, sizeof off)) return NOMEM;
        } else {
            if (!v) col->value.i = 0;
            if (buf_put(&col->data, (const char *)&col->value, 8)) return NOMEM;
        }
        if (buf_put(&col->valid, (const char *)&v, 1)) return NOMEM;
        col->nulls += !v;
    }
    s->rows++;
    s->seen = 0;
    s->args_seen = 0;
    return OK;
}

/* UTF-8 as polars requires it (no overlongs, no surrogates, nothing above U+10FFFF). */
static int valid_utf8(const unsigned char *p, const unsigned char *e) {
    while (p < e) {
        if (e - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (!(w & 0x8080808080808080ULL)) { p += 8; continue; }
        }
        unsigned c = *p;
        if (c < 0x80) { p++; continue; }
        int n;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07; }
        else return 0;
        if (e - p <= n) return 0;
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        p += n + 1;
    }
    return 1;
}

/* ---- Arrow export -------------------------------------------------------------------- */

/* An exported column owns its three buffers (validity, offsets, data) and its name. */
typedef struct {
    Buf bufs[3];
    const void *ptrs[3];
} Owned;

/* Exported columns not yet released (leak checks in the tests). polars may release a column on
 * any of its threads, without the GIL: the counter is updated atomically. */
static int64_t live_arrays;
#if defined(__GNUC__) || defined(__clang__)
#define LIVE_ADD(n) __atomic_add_fetch(&live_arrays, (n), __ATOMIC_RELAXED)
#define LIVE_GET() __atomic_load_n(&live_arrays, __ATOMIC_RELAXED)
#else
#define LIVE_ADD(n) (live_arrays += (n))
#define LIVE_GET() (live_arrays)
#endif

static void release_array(struct ArrowArray *a) {
    if (!a || !a->release) return;
    Owned *own = a->private_data;
    if (own) {
        for (int i = 0; i < 3; i++) buf_free(&own->bufs[i]);
        free(own);
        LIVE_ADD(-1);
    }
    a->release = NULL;
}

static void release_schema(struct ArrowSchema *sc) {
    if (!sc || !sc->release) return;
    free((void *)sc->name);
    sc->release = NULL;
}

/* Packs one validity byte per row into an Arrow bitmap (none when no row is null). */
static int bitmap(const uint8_t *v, int64_t rows, int64_t nulls, Buf *out) {
    if (!nulls) return 0;
    size_t n = (size_t)(rows + 7) / 8 + 1;
    if (buf_reserve(out, n)) return -1;
    uint8_t *bits = (uint8_t *)out->p;
    memset(bits, 0, n);
    for (int64_t i = 0; i < rows; i++) bits[i >> 3] |= (uint8_t)(v[i] << (i & 7));
    out->len = n;
    return 0;
}

/* A column becomes an Arrow array -- large utf8 ("U": int64 offsets), int64 ("l") or float64
 * ("g") -- and its buffers move into it. */
static int export_col(Col *col, int64_t rows, struct ArrowSchema *sc, struct ArrowArray *a,
                      const char *name, size_t nlen) {
    int text = col->kind == TEXT;
    sc->format = text ? "U" : col->kind == FLOAT ? "g" : "l";
    sc->flags = ARROW_FLAG_NULLABLE;
    sc->release = release_schema;
    sc->name = malloc(nlen + 1);
    if (!sc->name) return -1;
    memcpy((char *)sc->name, name, nlen);
    ((char *)sc->name)[nlen] = 0;
    Owned *own = calloc(1, sizeof *own);
    if (!own) return -1;
    a->release = release_array;
    a->private_data = own;
    LIVE_ADD(1);
    a->length = rows;
    a->null_count = col->nulls;
    a->n_buffers = text ? 3 : 2;
    a->buffers = own->ptrs;
    if (bitmap((const uint8_t *)col->valid.p, rows, col->nulls, &own->bufs[0])) return -1;
    if (buf_reserve(&col->data, 8)) return -1; /* never a NULL data buffer */
    own->bufs[text ? 2 : 1] = col->data;
    if (text) own->bufs[1] = col->offs;
    memset(&col->offs, 0, sizeof col->offs);
    memset(&col->data, 0, sizeof col->data);
    for (int i = 0; i < 3; i++) own->ptrs[i] = own->bufs[i].p;
    return 0;
}

static void capsule_schema(PyObject *cap) {
    struct ArrowSchema *sc = PyCapsule_GetPointer(cap, "arrow_schema");
    if (sc) { if (sc->release) sc->release(sc); free(sc); }
}

static void capsule_array(PyObject *cap) {
    struct ArrowArray *a = PyCapsule_GetPointer(cap, "arrow_array");
    if (a) { if (a->release) a->release(a); free(a); }
}

/* One (schema, array) capsule pair per text column: the top-level fields, then the "args"
 * fields. Separate arrays, not one struct: polars keeps an imported array's buffers until the
 * last column it made from them is gone, and only the names (and shapes) of a batch outlive
 * its parse; its times, ids and args text are freed as soon as they are converted. */
static PyObject *column(Col *col, int64_t rows, const char *name, size_t nlen) {
    struct ArrowSchema *sc = calloc(1, sizeof *sc);
    struct ArrowArray *a = calloc(1, sizeof *a);
    PyObject *cs = NULL, *ca = NULL;
    if (!sc || !a || export_col(col, rows, sc, a, name, nlen)) {
        PyErr_NoMemory();
        goto fail;
    }
    cs = PyCapsule_New(sc, "arrow_schema", capsule_schema);
    if (!cs) goto fail;
    sc = NULL;
    ca = PyCapsule_New(a, "arrow_array", capsule_array);
    if (!ca) goto fail;
    return Py_BuildValue("(NN)", cs, ca);
fail:
    Py_XDECREF(cs);
    if (sc) { release_schema(sc); free(sc); }
    if (a) { release_array(a); free(a); }
    return NULL;
}

static PyObject *export(State *s) {
    PyObject *out = PyTuple_New(s->ncols);
    if (!out) return NULL;
    for (int i = 0, c = 0; i < s->top.n + s->args.n && c < s->ncols; i++) {
        int in_top = i < s->top.n;
        if (in_top && i == s->args_index) continue;
        const Keys *k = in_top ? &s->top : &s->args;
        int j = in_top ? i : i - s->top.n;
        PyObject *pair = column(&s->cols[c], s->rows, k->key[j], k->keylen[j]);
        if (!pair) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, c, pair);
        c++;
    }
    return out;
}

/* ---- entry point --------------------------------------------------------------------- */

/* The field names of `top` or `args`: str, each once (a second one would name a column that
 * is never filled), at most MAX_COLS. An exception set on failure. */
static int keys_from(PyObject *seq, const char *what, Keys *k) {
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (n > MAX_COLS) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d fields, not %zd", what, MAX_COLS, n);
        return -1;
    }
    k->n = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        Py_ssize_t len;
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s: field names are str, not %.100s", what,
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        const char *str = PyUnicode_AsUTF8AndSize(item, &len);
        if (!str) return -1;
        if (find(k, str, (size_t)len) >= 0) {
            PyErr_Format(PyExc_ValueError, "%s: %R named twice", what, item);
            return -1;
        }
        k->key[i] = str;
        k->keylen[i] = (size_t)len;
        k->n = (int)i + 1;
    }
    return 0;
}

static void free_state(State *s) {
    if (s->cols)
        for (int c = 0; c < s->ncols; c++) {
            buf_free(&s->cols[c].data);
            buf_free(&s->cols[c].offs);
            buf_free(&s->cols[c].valid);
        }
    free(s->cols);
    buf_free(&s->scratch);
}

/* NDJSON: one event per line; a blank line holds none. */
static int lines(State *s, const char *p, const char *e) {
    int st = OK;
    while (st == OK && p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        const char *q = ws(p, le);
        if (q < le) {
            if (*q != '{') return FALLBACK;
            if ((st = members(s, q + 1, le, &q, 1))) return st;
            if (ws(q, le) != le) return FALLBACK;
            st = end_row(s);
        }
        p = nl ? nl + 1 : e;
    }
    return st;
}

/* A run of the event array as the file has it: objects separated by commas and whitespace
 * (newlines included), from the first object to the last. */
static int elements(State *s, const char *p, const char *e) {
    int st;
    p = ws(p, e);
    while (p < e) {
        if (*p != '{') return FALLBACK;
        if ((st = members(s, p + 1, e, &p, 1)) || (st = end_row(s))) return st;
        p = ws(p, e);
        if (p < e) {
            if (*p != ',') return FALLBACK;
            p = ws(p + 1, e);
            if (p >= e) return FALLBACK;
        }
    }
    return OK;
}

PyDoc_STRVAR(parse_doc,
"parse(data, top, args, kinds, array) -> tuple[(schema_capsule, array_capsule), ...] | None\n\n"
"The events of one batch -- NDJSON, or with `array` a run of the event array as the file has\n"
"it -- as Arrow columns: the fields named in `top` but \"args\", then, inside \"args\", those\n"
"named in `args`; `kinds` gives each column's kind (0 text, 1 time in ns, 2 int64, 3 float64).\n"
"None: let polars parse the batch. TypeError: a field name that is not str; ValueError: a\n"
"name given twice, `args` fields without \"args\" in `top`, more than 32 columns, or `kinds`\n"
"not one 0-3 per column.");

static PyObject *parse(PyObject *self, PyObject *argv) {
    Py_buffer view;
    PyObject *top, *args, *kinds;
    int array;
    (void)self;
    if (!PyArg_ParseTuple(argv, "y*O!O!O!p", &view, &PyTuple_Type, &top, &PyTuple_Type, &args,
                          &PyTuple_Type, &kinds, &array))
        return NULL;
    State s;
    memset(&s, 0, sizeof s);
    PyObject *result = NULL;
    int st = OK;
    if (keys_from(top, "top", &s.top) || keys_from(args, "args", &s.args)) goto done;
    s.args_index = find(&s.top, "args", 4);
    if (s.args_index < 0 && s.args.n) { /* their columns would not exist: refused */
        PyErr_SetString(PyExc_ValueError,
                        "args: fields inside \"args\" need \"args\" among the top keys");
        goto done;
    }
    s.ntop = s.top.n - (s.args_index >= 0);
    s.ncols = s.ntop + (s.args_index >= 0 ? s.args.n : 0);
    if (s.ncols > MAX_COLS) {
        PyErr_Format(PyExc_ValueError, "top and args: at most %d columns, not %d", MAX_COLS, s.ncols);
        goto done;
    }
    s.cols = calloc((size_t)(s.ncols ? s.ncols : 1), sizeof *s.cols);
    if (!s.cols) { PyErr_NoMemory(); goto done; }
    if (PyTuple_Size(kinds) != s.ncols) {
        PyErr_Format(PyExc_ValueError, "kinds: one per column (%d), not %zd", s.ncols,
                     PyTuple_GET_SIZE(kinds));
        goto done;
    }
    for (int c = 0; c < s.ncols; c++) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, c));
        if (kind < TEXT || kind > FLOAT) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "kinds: 0 to 3");
            goto done;
        }
        s.cols[c].kind = (int)kind;
    }
    for (int c = 0; c < s.ncols; c++) {
        int64_t zero = 0;
        if (s.cols[c].kind == TEXT && buf_put(&s.cols[c].offs, (const char *)&zero, sizeof zero)) {
            PyErr_NoMemory();
            goto done;
        }
    }
    const char *p = view.buf, *e = p + view.len;
    Py_BEGIN_ALLOW_THREADS
    if (!valid_utf8((const unsigned char *)p, (const unsigned char *)e)) st = FALLBACK;
    else if (array) st = elements(&s, p, e);
    else st = lines(&s, p, e);
    Py_END_ALLOW_THREADS
    if (st == NOMEM) { PyErr_NoMemory(); goto done; }
    if (st == FALLBACK) { result = Py_NewRef(Py_None); goto done; }
    result = export(&s);
done:
    free_state(&s);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(cut_doc,
"cut(data, after) -> (closed, first, last, end, count) | None\n\n"
"Where the whole elements of the event array in `data` are: `data` starts between elements\n"
"(just after one when `after`: a comma comes first). `first` is the first element's '{', `last`\n"
"is just past the last whole element's '}', `end` is the array's ']' (-1: not in `data`),\n"
"`count` the whole elements before it, `closed` whether the array ends here. Braces inside\n"
"strings are skipped; elements are not checked (the parser does that). None: something other\n"
"than objects, commas and whitespace between elements (the structural scan in Python decides).");

static PyObject *cut(PyObject *self, PyObject *argv) {
    Py_buffer view;
    int after;
    (void)self;
    if (!PyArg_ParseTuple(argv, "y*p", &view, &after)) return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t n = view.len, first = -1, last = -1, end = -1, count = 0;
    int depth = 0, ok = 1, want_comma = after, nested_err = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = b[i];
        if (depth > 0) {
            while (i < n && !STRUCTURAL[b[i]]) i++;
            if (i >= n) break; /* the element is unfinished */
            c = b[i];
            if (c == '"') { /* to the closing quote: one not preceded by an odd run of \\ */
                const unsigned char *q = b + i + 1;
                for (;;) {
                    q = memchr(q, '"', (size_t)(b + n - q));
                    if (!q) break;
                    const unsigned char *r = q;
                    while (r > b + i + 1 && r[-1] == '\\') r--;
                    if ((q - r) % 2 == 0) break;
                    q++;
                }
                if (!q) break; /* an unfinished string: the element is unfinished */
                i = q - b;
                continue;
            }
            if (c == '{' || c == '[') {
                if (++depth > 1 << 20) { nested_err = 1; break; }
            } else if (c == '}' || c == ']') {
                if (--depth == 0) { last = i + 1; count++; want_comma = 1; }
            }
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
        if (c == ']') {
            if (!want_comma && (count || after)) ok = 0; /* "[..., ]": the scan decides */
            end = i;
            break;
        }
        if (want_comma) {
            if (c != ',') { ok = 0; break; }
            want_comma = 0;
            continue;
        }
        if (c != '{') { ok = 0; break; }
        if (first < 0) first = i;
        depth = 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!ok || nested_err) Py_RETURN_NONE;
    return Py_BuildValue("(Onnnn)", end >= 0 ? Py_True : Py_False, first, last, end, count);
}

static PyObject *pool_set(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    if (on) pool_start();
    else pool_trim();
    Py_RETURN_NONE;
}

static PyObject *pooled(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
#if defined(__linux__)
    pthread_mutex_lock(&pool_lock);
    size_t n = pool_bytes;
    pthread_mutex_unlock(&pool_lock);
    return PyLong_FromSize_t(n);
#else
    return PyLong_FromLong(0);
#endif
}

static PyObject *live(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLongLong(LIVE_GET());
}

static PyMethodDef methods[] = {
    {"parse", parse, METH_VARARGS, parse_doc},
    {"cut", cut, METH_VARARGS, cut_doc},
    {"live", live, METH_NOARGS, "Text columns handed to polars and not yet released."},
    {"pool", pool_set, METH_O,
     "pool(on): keep freed column buffers for the next batch (True, while a trace is read), or\n"
     "unmap those kept and keep none (False)."},
    {"pooled", pooled, METH_NOARGS, "Bytes of freed column buffers kept for the next batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kscan",
    "Kineto event batches -> Arrow text columns (see rightsize.traces.kineto_scan).", -1, methods,
};

PyMODINIT_FUNC PyInit__kscan(void) {
    init_tables();
    if (!c_numeric) c_numeric = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!c_numeric) { /* an ImportError: rightsize.traces.kscan then parses with polars */
        PyErr_SetString(PyExc_ImportError, "_kscan: no \"C\" locale to read numbers in");
        return NULL;
    }
    return PyModule_Create(&module);
}
