/*
 * yamljson.h — YAML (libyaml) to cJSON conversion, for manifests and kubeconfig.
 *
 * Mappings become objects, sequences arrays. Plain scalars are resolved with the
 * YAML 1.2 core schema: null (~, null, Null, NULL, empty), booleans (true/True/TRUE,
 * false/False/FALSE), integers (decimal, 0x hex, 0o octal), floats (1.5, 1e3,
 * .inf, .nan) become cJSON numbers; everything else, and every quoted, literal
 * or folded scalar (or one tagged !!str), is a string. Mapping keys are always
 * strings; a non-scalar or duplicate key is an error.
 *
 * Invariants: nesting depth is bounded by GQ_YAML_MAX_DEPTH, input size by
 * GQ_YAML_MAX_BYTES and the number of documents by GQ_YAML_MAX_DOCS. Anchors and
 * aliases are refused (no expansion bombs). Errors name the source as
 * "NAME:LINE:COL: problem" (1-based line and column) in the caller's buffer.
 *
 * Ownership: every cJSON tree returned is owned by the caller (cJSON_Delete).
 * The name argument is only read during the call.
 */
#ifndef GQ_YAMLJSON_H
#define GQ_YAMLJSON_H

#include <stddef.h>
#include <cJSON.h>

#define GQ_YAML_MAX_DEPTH 64
#define GQ_YAML_MAX_BYTES (8u * 1024u * 1024u)
#define GQ_YAML_MAX_DOCS 10000

/* Parse a whole stream. *out becomes a cJSON array with one element per
 * document (an empty document is a cJSON null). On error *out is NULL and
 * the return is GQ_EPARSE (syntax, alias, duplicate key...), GQ_ELIMIT (depth,
 * size, documents) or GQ_ENOMEM. name labels error messages (e.g. a file name;
 * NULL means "<input>"). */
int gq_yaml_parse_stream(const char *data, size_t len, const char *name, cJSON **out,
                         char *err, size_t errlen);

/* Parse a stream that must hold exactly one document (an empty stream gives a
 * cJSON null). More than one document is GQ_EPARSE. */
int gq_yaml_parse_doc(const char *data, size_t len, const char *name, cJSON **out,
                      char *err, size_t errlen);

/* Per-document line numbers: like gq_yaml_parse_stream, and if lines is non-NULL
 * fills lines[i] with the 1-based line where document i starts (at most
 * maxlines entries are written). */
int gq_yaml_parse_stream_lines(const char *data, size_t len, const char *name,
                               cJSON **out, int *lines, size_t maxlines,
                               char *err, size_t errlen);

/* Read a file (at most GQ_YAML_MAX_BYTES) and parse it as a stream; errors are
 * prefixed with the path. */
int gq_yaml_load_file(const char *path, cJSON **out, char *err, size_t errlen);
/* The same, with each document's first line as gq_yaml_parse_stream_lines gives it. */
int gq_yaml_load_file_lines(const char *path, cJSON **out, int *lines, size_t maxlines, char *err,
                            size_t errlen);

/* Read a whole file into a NUL-terminated heap buffer (caller frees) of at most
 * max bytes. GQ_ENOTFOUND, GQ_EIO or GQ_ELIMIT on failure. */
int gq_read_file(const char *path, size_t max, char **data, size_t *len,
                 char *err, size_t errlen);

#endif
