/* log.h — logfmt logging for the programs (cni/, agent/): the library never
 * calls it. Lines: ts=... level=info msg="..." key=value ... to stderr or a
 * file. */
#ifndef AIQOS_LOG_H
#define AIQOS_LOG_H

#include "util.h"

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG, _LOG_LVL_MAX, _LOG_LVL_INVALID = -1 };

enum log_level log_level_from_name(const char *s);
void log_setup(const char *program, enum log_level level, FILE *out);
/* log_msg(LOG_LVL_INFO, "tuned", "pod", "ns/name", "class", "inference", NULL):
 * key/value string pairs terminated by NULL; values are quoted as needed. */
void log_msg(enum log_level level, const char *msg, ...) __attribute__((sentinel));

/* The formatting path of log_msg's values: a number is logged as a number
 * (pods=3 speed_bps=10000000000), never replaced by a word. LOG_FMT("%u", n)
 * is the formatted text in a buffer that lives until the end of the
 * enclosing block, so it can be passed straight to log_msg:
 *   log_msg(LOG_LVL_INFO, "ready", "pods", LOG_FMT("%zu", n), NULL);
 * A value longer than LOG_VALUE_MAX - 1 bytes is cut. */
#define LOG_VALUE_MAX 384
const char *log_fmt(char *buf, size_t size, const char *fmt, ...) _printf_(3, 4);
#define LOG_FMT(...) log_fmt((char[LOG_VALUE_MAX]){0}, LOG_VALUE_MAX, __VA_ARGS__)
bool log_enabled(enum log_level level);

/* A failpoint of a program (failpoint.h): logged at warn ("test failpoint
 * reached") before its action is carried out. */
void failpoint(const char *name);
/* At a program's start: one warn line naming the armed failpoints when
 * $AIQOS_TEST_FAILPOINTS is set (the library's points act silently). */
void log_failpoints_armed(void);

#endif
