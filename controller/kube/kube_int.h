/*
 * kube_int.h — private helpers shared by the kube_*.c files (not a public API;
 * tests may use them). Returned strings/trees are owned by the caller.
 */
#ifndef GQ_KUBE_INT_H
#define GQ_KUBE_INT_H

#include <stddef.h>
#include <cJSON.h>

#define KUBE_LOG_MOD "kube"

/* Decode standard or URL-safe base64 (whitespace and padding ignored); *out is
 * NUL-terminated and owned by the caller. */
int kube_base64_decode(const char *in, char **out, size_t *outlen);
/* Monotonic seconds (CLOCK_MONOTONIC), for code without a loop at hand. */
double kube_mono_now(void);
/* Parse a Retry-After header value (delta seconds); -1 when absent/invalid. */
double kube_parse_retry_after(const char *v);
/* URL-encode s (query parameter value) onto b. */
struct gq_buf;
int kube_url_escape(struct gq_buf *b, const char *s);

#endif
