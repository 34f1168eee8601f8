/*
 * sim_csv.h — a small CSV reader for trace files (openb pod/node lists, job
 * traces). The whole file is read into one bounded heap block (at most
 * SIM_CSV_MAX_BYTES) and cut in place: each row's fields point into that block
 * and stay valid until the next sim_csv_next or sim_csv_release. The first row
 * is the header; columns are looked up by name. Blank lines and lines starting
 * with '#' are skipped. Fields may be double-quoted ("" inside is a quote).
 *
 * Ownership: struct sim_csv is embedded by the caller (sim_csv_open /
 * sim_csv_release) and owns the file block; header and field pointers borrow it.
 */
#ifndef GQ_SIM_CSV_H
#define GQ_SIM_CSV_H

#include <stddef.h>
#include <stdint.h>

#define SIM_CSV_MAX_FIELDS 48
#define SIM_CSV_MAX_BYTES ((size_t)1 << 30)

struct sim_csv {
    char *data;
    size_t len, pos;
    int line;                                  /* line number of the current row */
    const char *path;                          /* borrowed, for messages */
    char *header[SIM_CSV_MAX_FIELDS];
    size_t nheader;
    char *field[SIM_CSV_MAX_FIELDS];
    size_t nfield;
};

/* Open path and read its header row. */
int sim_csv_open(struct sim_csv *c, const char *path, char *err, size_t errlen);
/* Same, from an in-memory text (copied). path names it in messages. */
int sim_csv_open_mem(struct sim_csv *c, const char *text, size_t len, const char *path,
                     char *err, size_t errlen);
/* Next data row: 1 a row, 0 end of file, <0 error (too many fields). */
int sim_csv_next(struct sim_csv *c, char *err, size_t errlen);
/* Header index of column name, or -1. */
int sim_csv_col(const struct sim_csv *c, const char *name);
/* Field i of the current row ("" if the row is shorter). */
const char *sim_csv_get(const struct sim_csv *c, int i);
/* Parse field i of the current row as an integer; empty gives def.
 * On error writes "path:line: column: not an integer". */
int sim_csv_i64(const struct sim_csv *c, int i, int64_t def, int64_t *out, char *err, size_t errlen);
void sim_csv_release(struct sim_csv *c);

#endif
