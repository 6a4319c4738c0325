/* util.h — small helpers every module uses: cleanup attributes, ownership
 * transfer, bounded string copies. Header-only; owns nothing. */
#ifndef AIQOS_UTIL_H
#define AIQOS_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ARRAY_SIZE(a)  (sizeof(a) / sizeof((a)[0]))
#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_       __attribute__((unused))

static inline void freep(void *p)
{
	free(*(void **)p);
}
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_free_   _cleanup_(freep)
#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Move ownership out of a cleanup variable. */
#define TAKE_PTR(p)                     \
	({                              \
		__typeof__(p) _t = (p); \
		(p) = NULL;             \
		_t;                     \
	})
#define TAKE_FD(fd)            \
	({                     \
		int _t = (fd); \
		(fd) = -1;     \
		_t;            \
	})

/* Copy src into dst (size bytes). Returns 0, or -ENAMETOOLONG when src did
 * not fit (dst then holds a truncated, terminated copy). */
static inline int str_copy(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	if (size == 0)
		return -ENAMETOOLONG;
	if (n >= size) {
		memcpy(dst, src, size - 1);
		dst[size - 1] = '\0';
		return -ENAMETOOLONG;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

static inline bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* String tables (after systemd's): an enum's names in `static const char
 * *const table[_X_MAX]` indexed by value. func(v) is table[v], NULL outside
 * it; func(s) is the value named s, `invalid` for NULL or an unknown name. */
#define DEFINE_STRING_TABLE_NAME(func, type, table)                                      \
	const char *func(type v)                                                         \
	{                                                                                \
		return (int)v >= 0 && (size_t)v < ARRAY_SIZE(table) ? (table)[v] : NULL; \
	}
#define DEFINE_STRING_TABLE_FROM_NAME(func, type, table, invalid)   \
	type func(const char *s)                                    \
	{                                                           \
		for (size_t i = 0; s && i < ARRAY_SIZE(table); i++) \
			if ((table)[i] && streq((table)[i], s))     \
				return (type)i;                     \
		return (invalid);                                   \
	}

/* Append "<sep><formatted text>" to the string in buf (no separator when buf
 * is empty); a text that does not fit ends in "...". */
void str_append_sep(char *buf, size_t size, char sep, const char *fmt, ...) _printf_(4, 5);

/* Quote a value from untrusted input for a message: printable ASCII kept,
 * '"' and '\\' escaped, anything else as \xNN, at most QUOTE_MAX characters
 * of output before "...". Returns buf (size >= QUOTE_BUF for a full quote). */
#define QUOTE_MAX 72
#define QUOTE_BUF (QUOTE_MAX + 8)
const char *quote_value(const char *s, char *buf, size_t size);

#endif
