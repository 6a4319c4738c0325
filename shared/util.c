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

size_t str_utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

const char *quote_value(const char *s, char *buf, size_t size)
{
	size_t o = 0;

	if (size < 8)
		return "";
	buf[o++] = '"';
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char tmp[8];
		size_t n;

		if (c == '"' || c == '\\')
			n = (size_t)snprintf(tmp, sizeof(tmp), "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			n = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", c);
		else
			n = (size_t)snprintf(tmp, sizeof(tmp), "%c", c);
		if (o + n > QUOTE_MAX || o + n + 5 > size) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(buf + o, tmp, n);
		o += n;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}
