/* tools/common/strfmt.h: bounded formatting for messages and paths.
 *
 * Contract: str_fmt() is snprintf that returns the number of characters
 * actually stored (never more than len - 1), so callers can append with
 * `off += str_fmt(buf + off, len - off, ...)` without overrunning. Truncated
 * text is acceptable for the tools' messages; paths that matter are checked
 * for length before use. (It also keeps GCC's -Wformat-truncation, which
 * cannot know our bounds, out of -Werror builds.) */
#ifndef RAILNET_TOOLS_STRFMT_H
#define RAILNET_TOOLS_STRFMT_H

#include <stddef.h>

size_t str_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
