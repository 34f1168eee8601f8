/*
 * gq.h — project-wide conventions shared by every module.
 *
 * Errors are ints: 0 is success, negatives come from enum gq_err. Functions that
 * can fail take a caller-supplied message buffer (char *err, size_t errlen) and
 * write one sentence there, naming the field, file or line at fault. The buffer
 * may be NULL (errlen 0) when the caller does not want the text.
 *
 * Ownership: pointers returned by *_new are owned by the caller and released with
 * the matching *_free (which accepts NULL). Embedded objects use *_init and *_release.
 */
#ifndef GQ_H
#define GQ_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

enum gq_err {
    GQ_OK = 0,
    GQ_ENOMEM = -1,    /* allocation failed */
    GQ_EINVAL = -2,    /* bad input: see message */
    GQ_EIO = -3,       /* read/write/system call failed */
    GQ_ENOTFOUND = -4, /* no such object / file */
    GQ_ECONFLICT = -5, /* 409 or stale version */
    GQ_ELIMIT = -6,    /* a bounded buffer or table is full */
    GQ_ECORRUPT = -7,  /* stored data is damaged */
    GQ_EVERSION = -8,  /* newer/unknown format version */
    GQ_EBUSY = -9,     /* locked or temporarily unavailable; retry */
    GQ_ETIMEOUT = -10, /* deadline passed */
    GQ_EHTTP = -11,    /* unexpected HTTP status */
    GQ_EGONE = -12,    /* 410 Gone: resourceVersion too old */
    GQ_EPARSE = -13,   /* malformed JSON/YAML/CSV */
    GQ_EFULL = -14,    /* disk full */
};

/* Static text for an error code; never NULL. */
const char *gq_strerror(int rc);

/* Bounded formatted write into err (if non-NULL); always NUL-terminates. */
void gq_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parse a base-10 signed integer from [s, s+len) exactly (no trailing junk,
 * no overflow). Returns 0 or GQ_EINVAL. len may be (size_t)-1 for NUL-terminated. */
int gq_parse_i64(const char *s, size_t len, int64_t *out);

/* Parse a duration: one or more <number><unit> parts with unit ms, s, m, h or d
 * ("1h30m", "250ms", "1.5h"), or a bare number of seconds ("90"). Numbers are
 * decimal digits with an optional fraction (no sign, exponent, inf or nan).
 * Returns 0 with *seconds, or GQ_EINVAL (also past 1e12 seconds). */
int gq_parse_duration(const char *s, double *seconds);

/* Parse an RFC 3339 timestamp ("2006-01-02T15:04:05Z", optional fraction, "Z" or
 * "+hh:mm" offset) to seconds since the epoch. lenient also accepts a plain date
 * ("2006-01-02", midnight UTC) and a space or 't' between date and time (for
 * command-line input); strict is what the Kubernetes API writes. 0 or GQ_EINVAL. */
int gq_parse_rfc3339(const char *s, int lenient, double *wall);

/* A token bucket (the events budget: kubelet's --event-qps/--event-burst rule):
 * up to burst tokens, refilled at rate per second of the caller's clock.
 * rate <= 0: unlimited. Embedded, no allocation; the clock is the caller's. */
struct gq_rate {
    double rate, burst, tokens;
    int64_t last_ms; /* clock of the last refill; 0: full, not started */
};
void gq_rate_init(struct gq_rate *b, double rate, double burst);
/* Refill to now_ms; 1 when a token is there (or no limit). A clock going
 * backwards refills nothing. */
int gq_rate_ready(struct gq_rate *b, int64_t now_ms);
/* Take one token at now_ms: 1 when one was there (or no limit), 0 when the
 * bucket is empty. */
int gq_rate_take(struct gq_rate *b, int64_t now_ms);
/* Milliseconds from now_ms until a token is there (refilling to now_ms):
 * 0 when one is (or no limit). */
int64_t gq_rate_wait_ms(struct gq_rate *b, int64_t now_ms);

/* A write budget paid by decisions (API writes are a resource, counted per
 * admission): each decision credits what it may spend (gq_ledger_credit),
 * every write made spends one (gq_ledger_spend, whatever the write), the
 * credit kept within [-debt_max, cap]. A write that only narrates (a Normal
 * Event, a status rewrite of a position or a message's text) goes out while
 * the credit holds one, else on a token of a floor bucket the caller keeps
 * per kind of narration (NULL: none), so a cluster where nothing is decided
 * still narrates, slowly; such a write is spent like any other. Embedded, no
 * allocation; the clock is the caller's. */
struct gq_ledger {
    double credit, cap, debt_max;
};
void gq_ledger_init(struct gq_ledger *l, double cap, double debt_max);
void gq_ledger_credit(struct gq_ledger *l, double n);
void gq_ledger_spend(struct gq_ledger *l, double n);
/* 1 when a narrating write may go out at now_ms (credit >= 1, or a floor token). */
int gq_ledger_ready(const struct gq_ledger *l, struct gq_rate *floor, int64_t now_ms);
/* A narrating write goes out at now_ms: the floor's token is taken when the
 * credit does not hold one (its spend is gq_ledger_spend's, as for every
 * write). 1 when it was allowed (gq_ledger_ready), 0 otherwise (nothing taken). */
int gq_ledger_take(const struct gq_ledger *l, struct gq_rate *floor, int64_t now_ms);
/* Milliseconds from now_ms until a narrating write may go out on the floor
 * (0 when one may now; INT64_MAX with no floor: only a decision's credit
 * will let it out, and decisions make reconciles). */
int64_t gq_ledger_wait_ms(const struct gq_ledger *l, struct gq_rate *floor, int64_t now_ms);

/* Bounded copy: copies at most dstlen-1 bytes and NUL-terminates. Returns the
 * length of src (so truncation is detectable as ret >= dstlen). */
size_t gq_strlcpy(char *dst, const char *src, size_t dstlen);

/* A string shared by count (a status text held by a memo and by the request
 * that sends it, one copy). gq_sstr_new copies n bytes of s (NUL added)
 * into a new block with one reference and returns its text, NULL when out
 * of memory; gq_sstr_ref adds a reference and returns s; gq_sstr_put drops
 * one, freeing the block with the last (NULL is ignored). Only texts made
 * by gq_sstr_new may be given to the other two, and a shared text is never
 * written (its holders read it). Single-threaded: the count is not atomic. */
char *gq_sstr_new(const char *s, size_t n);
const char *gq_sstr_ref(const char *s);
void gq_sstr_put(const char *s);

#define GQ_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* FNV-1a, the one string/byte hash of the project (hash tables, signatures):
 * gq_hash_bytes continues h over n bytes; gq_hash_str hashes a C string from
 * the seed. Not for anything an attacker may choose to collide on purpose
 * beyond slower lookups. */
#define GQ_HASH_SEED 1469598103934665603ull
static inline uint64_t gq_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}
static inline uint64_t gq_hash_str(const char *s)
{
    uint64_t h = GQ_HASH_SEED;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}
/* A 64-bit word into hash h (a multiply and a shift: for keys made of
 * integers, where gq_hash_bytes' byte loop is the dearer part of a lookup).
 * Same caveat as gq_hash_bytes. */
static inline uint64_t gq_hash_u64(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}
/* Fetch the cache lines of [p, p + n) ahead of reading them: a loop over
 * objects scattered in the heap fetches the one GQ_PREFETCH_AHEAD iterations
 * on (what it points to, half as far, from the fetched object). A NULL p is
 * ignored; nothing is read. */
#define GQ_PREFETCH_AHEAD 8
static inline void gq_prefetch(const void *p, size_t n)
{
    if (!p)
        return;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, e = (uintptr_t)p + n; a < e; a += 64)
        __builtin_prefetch((const void *)a);
}
#define GQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GQ_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A buffer kept from one reconcile (or cycle) to the next serves a need of
 * `need` bytes (or entries): large enough, and not more than four times too
 * large once above `floor` (what a burst left behind is given back rather
 * than kept resident). The one rule for kept scratch. */
static inline int gq_kept_fits(size_t cap, size_t need, size_t floor)
{
    return need <= cap && (cap <= floor || cap / 4 <= need);
}

#endif
