/*
 * buf.h — growable byte buffer with a hard maximum (after curl's dynbuf).
 *
 * A gq_buf is embedded by its owner: gq_buf_init sets the maximum, appends grow
 * the heap block up to that maximum and fail with GQ_ELIMIT past it (the buffer
 * is left unchanged). p is always NUL-terminated when non-NULL. The buffer owns
 * p; gq_buf_release frees it. gq_buf_detach hands p to the caller.
 */
#ifndef GQ_BUF_H
#define GQ_BUF_H

#include <stddef.h>
#include "gq.h"

struct gq_buf {
    char *p;
    size_t len;
    size_t cap;
    size_t max;
};

void gq_buf_init(struct gq_buf *b, size_t max);
void gq_buf_release(struct gq_buf *b);
void gq_buf_reset(struct gq_buf *b);            /* len = 0, keeps memory */
int gq_buf_append(struct gq_buf *b, const void *data, size_t n);
int gq_buf_puts(struct gq_buf *b, const char *s);
int gq_buf_printf(struct gq_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes (n <= len). */
void gq_buf_consume(struct gq_buf *b, size_t n);
/* Caller owns the returned string (free()); buffer is reset to empty. */
char *gq_buf_detach(struct gq_buf *b);
/* Append s as a JSON string literal (quotes and escapes included). */
int gq_buf_json_str(struct gq_buf *b, const char *s);

#endif
