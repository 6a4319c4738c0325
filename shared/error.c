/* error.c — see error.h. */
#include <stdarg.h>

#include "error.h"

int error_set(struct error *err, int code, int errnum, const char *fmt, ...)
{
	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		va_list ap;
		err->code = code;
		err->errnum = errnum;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return errnum ? -errnum : -EINVAL;
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
