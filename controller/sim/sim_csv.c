/* sim_csv.c — in-place CSV cutting with line numbers. */
#include "sim_csv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gq.h"
#include "yamljson.h"

/* Cut the next non-blank, non-comment line into dst[]; returns 1/0/<0. */
static int cut_row(struct sim_csv *c, char **dst, size_t *ndst, char *err, size_t errlen)
{
    for (;;) {
        if (c->pos >= c->len)
            return 0;
        c->line++;
        char *s = c->data + c->pos;
        char *eol = memchr(s, '\n', c->len - c->pos);
        size_t l = eol ? (size_t)(eol - s) : c->len - c->pos;
        c->pos += l + (eol ? 1 : 0);
        s[l] = '\0';
        if (l && s[l - 1] == '\r')
            s[--l] = '\0';
        if (l == 0 || s[0] == '#')
            continue;
        size_t n = 0;
        char *r = s;
        for (;;) {
            char *w = r, *start = r;
            if (n >= SIM_CSV_MAX_FIELDS) {
                gq_errf(err, errlen, "%s:%d: more than %d fields", c->path, c->line,
                        SIM_CSV_MAX_FIELDS);
                return GQ_ELIMIT;
            }
            if (*r == '"') {
                r++;
                for (;;) {
                    if (*r == '\0')
                        break;
                    if (*r == '"') {
                        if (r[1] == '"') {
                            *w++ = '"';
                            r += 2;
                            continue;
                        }
                        r++;
                        break;
                    }
                    *w++ = *r++;
                }
                while (*r && *r != ',')
                    r++;
            } else {
                while (*r && *r != ',')
                    r++;
                w = r;
            }
            int last = *r == '\0';
            *w = '\0';
            /* trim spaces */
            while (*start == ' ' || *start == '\t')
                start++;
            size_t fl = strlen(start);
            while (fl && (start[fl - 1] == ' ' || start[fl - 1] == '\t'))
                start[--fl] = '\0';
            dst[n++] = start;
            if (last)
                break;
            r++;
        }
        *ndst = n;
        return 1;
    }
}

static int open_common(struct sim_csv *c, char *err, size_t errlen)
{
    int rc = cut_row(c, c->header, &c->nheader, err, errlen);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        gq_errf(err, errlen, "%s: empty file (no header row)", c->path);
        return GQ_EPARSE;
    }
    return GQ_OK;
}

int sim_csv_open(struct sim_csv *c, const char *path, char *err, size_t errlen)
{
    int rc;
    memset(c, 0, sizeof(*c));
    c->path = path;
    rc = gq_read_file(path, SIM_CSV_MAX_BYTES, &c->data, &c->len, err, errlen);
    if (rc)
        return rc;
    rc = open_common(c, err, errlen);
    if (rc)
        sim_csv_release(c);
    return rc;
}

int sim_csv_open_mem(struct sim_csv *c, const char *text, size_t len, const char *path,
                     char *err, size_t errlen)
{
    int rc;
    memset(c, 0, sizeof(*c));
    c->path = path;
    c->data = malloc(len + 1);
    if (!c->data)
        return GQ_ENOMEM;
    memcpy(c->data, text, len);
    c->data[len] = '\0';
    c->len = len;
    rc = open_common(c, err, errlen);
    if (rc)
        sim_csv_release(c);
    return rc;
}

int sim_csv_next(struct sim_csv *c, char *err, size_t errlen)
{
    return cut_row(c, c->field, &c->nfield, err, errlen);
}

int sim_csv_col(const struct sim_csv *c, const char *name)
{
    for (size_t i = 0; i < c->nheader; i++)
        if (!strcmp(c->header[i], name))
            return (int)i;
    return -1;
}

const char *sim_csv_get(const struct sim_csv *c, int i)
{
    if (i < 0 || (size_t)i >= c->nfield)
        return "";
    return c->field[i];
}

int sim_csv_i64(const struct sim_csv *c, int i, int64_t def, int64_t *out, char *err, size_t errlen)
{
    const char *s = sim_csv_get(c, i);
    if (!*s) {
        *out = def;
        return GQ_OK;
    }
    if (gq_parse_i64(s, (size_t)-1, out)) {
        gq_errf(err, errlen, "%s:%d: %s: \"%s\" is not an integer", c->path, c->line,
                i >= 0 && (size_t)i < c->nheader ? c->header[i] : "?", s);
        return GQ_EPARSE;
    }
    return GQ_OK;
}

void sim_csv_release(struct sim_csv *c)
{
    if (!c)
        return;
    free(c->data);
    memset(c, 0, sizeof(*c));
}
