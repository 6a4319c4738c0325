/* util.c — the out-of-line helpers of util.h. */
#include <stdarg.h>

#include "util.h"

void str_append_sep(char *buf, size_t size, char sep, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;
	int w;

	if (n + 1 >= size)
		return;
	if (n > 0) {
		buf[n++] = sep;
		buf[n] = '\0';
	}
	va_start(ap, fmt);
	w = vsnprintf(buf + n, size - n, fmt, ap);
	va_end(ap);
	if ((w < 0 || (size_t)w >= size - n) && size >= 4)
		memcpy(buf + size - 4, "...", 4);
}
