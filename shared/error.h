/* error.h — the error contract of the library (after crun's libcrun_error_t).
 * Fallible functions return a negative errno and, when given a non-NULL
 * struct error, fill it with the errno and a message naming the field and
 * the value, that callers may prefix with context ("apply plan on 'veth12':
 * qdisc replace root handle 1: fq_codel ... on ifindex 7: Operation not
 * supported"). The library does not
 * classify failures any further: what a failure means to a program (the
 * plugin's CNI error code, cni/errors.h) is the program's to decide from
 * what it called and the errno. Only the programs (cni/, agent/) print
 * errors. */
#ifndef AIQOS_ERROR_H
#define AIQOS_ERROR_H

#include <stdarg.h>

#include "util.h"

#define ERROR_MSG_MAX 1024

struct error {
	int errnum; /* positive errno, 0 if none */
	int code;   /* the program's class of the failure (cni/: its CNI code); never set by the library */
	char msg[ERROR_MSG_MAX];
};

/* Set err (if non-NULL) and return -errnum (or -EINVAL when errnum is 0),
 * so callers can write `return error_set(err, EINVAL, "...")`. Clears code. */
int error_set(struct error *err, int errnum, const char *fmt, ...) _printf_(3, 4);
int error_setv(struct error *err, int errnum, const char *fmt, va_list ap) _printf_(3, 0);
/* Prefix the message with context: "<ctx>: <old message>". Keeps code/errnum. */
void error_prefix(struct error *err, const char *fmt, ...) _printf_(2, 3);
void error_clear(struct error *err);
/* Hand an error filled in a local struct to the caller's err (if non-NULL):
 * `error_propagate(err, &e);` for `if (err) *err = e;`. The one way an
 * error goes up a level. */
static inline void error_propagate(struct error *err, const struct error *e)
{
	if (err && err != e)
		*err = *e;
}

#endif
