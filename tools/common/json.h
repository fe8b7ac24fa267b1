/* tools/common/json.h: the little JSON writing the tools need.
 *
 * Contract: json_str() prints a quoted, escaped JSON string (control
 * characters as \u00XX, NULL as null); json_num() prints a finite number or
 * null for NaN/inf, since JSON has no spelling for them. */
#ifndef RAILNET_TOOLS_JSON_H
#define RAILNET_TOOLS_JSON_H

#include <stdio.h>

void json_str(FILE *out, const char *s);
void json_num(FILE *out, double v);

#endif
