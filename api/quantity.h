/*
 * quantity.h — Kubernetes resource quantities ("500m", "16Gi", "1.5", "1e3", "2k").
 *
 * Grammar as in k8s.io/apimachinery resource.ParseQuantity:
 *   [+-] digits [. digits] suffix, suffix one of "" n u m k M G T P E (decimal SI),
 *   Ki Mi Gi Ti Pi Ei (binary SI) or e/E followed by a signed integer exponent.
 * Values are computed exactly (128-bit intermediate) and rounded UP to the
 * requested scale, the way Quantity.MilliValue()/Value() do, so "0.1m" is
 * 1 milli and "1.5Ki" is 1536 bytes. Results that do not fit int64 are refused.
 *
 * Pure functions; no allocation. Messages (without a field path) go to the
 * caller's buffer.
 */
#ifndef API_QUANTITY_H
#define API_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* Parse s and return its value times 10^scale10 (0 = units/bytes, 3 = milli),
 * rounded up. GQ_EINVAL with a message on syntax error or overflow. */
int api_quantity_scaled(const char *s, int scale10, int64_t *out, char *err, size_t errlen);

/* Convenience: milli-units (CPU "500m" -> 500) and whole units (memory "16Gi" -> bytes). */
int api_quantity_milli(const char *s, int64_t *out, char *err, size_t errlen);
int api_quantity_value(const char *s, int64_t *out, char *err, size_t errlen);

#endif
