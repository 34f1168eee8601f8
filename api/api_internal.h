/*
 * api_internal.h — decode helpers shared by the api/ sources (not for other
 * modules). Every helper records problems in errs under the given field path
 * and leaves the destination unchanged (or at a safe value) on error.
 */
#ifndef GQ_API_INTERNAL_H
#define GQ_API_INTERNAL_H

#include "api.h"

/* "base.field" (or "field" when base is empty) into out. */
void api_path(char *out, size_t len, const char *base, const char *field);
/* "base[i]" into out. */
void api_path_idx(char *out, size_t len, const char *base, int i);
const char *api_jtype(const cJSON *v);
void api_fmt_num(double d, char *buf, size_t len);

/* Each returns 1 when v was usable and stored, 0 otherwise (error recorded). */
int api_get_str(struct api_errors *errs, const char *path, const cJSON *v, char *dst, size_t dstlen);
int api_get_int(struct api_errors *errs, const char *path, const cJSON *v, int64_t lo, int64_t hi,
                int32_t *out);
int api_get_bool(struct api_errors *errs, const char *path, const cJSON *v, int *out);
int api_expect_obj(struct api_errors *errs, const char *path, const cJSON *v);
int api_expect_arr(struct api_errors *errs, const char *path, const cJSON *v);
/* Report every member of obj whose key is not in allowed (NULL-terminated). */
void api_check_fields(struct api_errors *errs, const char *path, const cJSON *obj,
                      const char *const *allowed);
/* metadata: name required; namespaced: namespace read if present. */
void api_decode_meta(struct api_errors *errs, const cJSON *obj, struct api_meta *m);
/* apiVersion/kind check; returns 1 when obj is an object. */
int api_check_head(struct api_errors *errs, const cJSON *obj, const char *apiversion,
                   const char *kind);
/* What every kind shares: apiVersion/kind, the top-level field names, metadata (a
 * cluster-scoped kind must have no namespace) and a spec object whose field names are
 * checked against spec_fields. Returns spec, or NULL when there is no usable spec (the
 * problem is recorded). */
const cJSON *api_decode_envelope(struct api_errors *errs, const cJSON *obj, const char *kind,
                                 int cluster_scoped, const char *const *spec_fields,
                                 struct api_meta *meta);
/* string map of label selector values into kv[] (bounded). */
void api_decode_selector(struct api_errors *errs, const char *path, const cJSON *v,
                         struct api_kv *kv, int *n);
int api_is_dns_subdomain(const char *s);
int api_is_dns_label(const char *s);
int api_is_label_value(const char *s);
int api_is_label_key(const char *s);
void api_check_name(struct api_errors *errs, const char *path, const char *s, int label);

#endif
