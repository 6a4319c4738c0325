/* error.c — see error.h. */
#include <stdarg.h>

#include "error.h"

int error_setv(struct error *err, int errnum, const char *fmt, va_list ap)
{
	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		err->code = 0;
		err->errnum = errnum;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	}
	return errnum ? -errnum : -EINVAL;
}

int error_set(struct error *err, int errnum, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = error_setv(err, errnum, fmt, ap);
	va_end(ap);
	return r;
}

void error_prefix(struct error *err, const char *fmt, ...)
{
	char ctx[ERROR_MSG_MAX];
	va_list ap;
	size_t n, old_len;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	n = strlen(ctx);
	if (n + 2 >= sizeof(err->msg))
		n = sizeof(err->msg) - 3;
	old_len = strnlen(err->msg, sizeof(err->msg) - 1);
	if (n + 2 + old_len >= sizeof(err->msg))
		old_len = sizeof(err->msg) - 1 - n - 2;
	memmove(err->msg + n + 2, err->msg, old_len);
	memcpy(err->msg, ctx, n);
	err->msg[n] = ':';
	err->msg[n + 1] = ' ';
	err->msg[n + 2 + old_len] = '\0';
}

void error_clear(struct error *err)
{
	if (err) {
		err->code = 0;
		err->errnum = 0;
		err->msg[0] = '\0';
	}
}
