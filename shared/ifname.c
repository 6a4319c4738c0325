/* ifname.c — interface name rules and their file-name encoding (ifname.h). */
#include "ifname.h"
#include "plan.h"

static bool plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
	       c == '-';
}

/* Length of a Unicode space (unicode.IsSpace, beyond ASCII) encoded at s, or 0. */
static size_t unicode_space_at(const unsigned char *s)
{
	if (s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
		return 2; /* U+0085, U+00A0 */
	if (s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80)
		return 3; /* U+1680 */
	if (s[0] == 0xe2 && s[1] == 0x80 &&
	    ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
		return 3; /* U+2000..U+200A, U+2028, U+2029, U+202F */
	if (s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f)
		return 3; /* U+205F */
	if (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80)
		return 3; /* U+3000 */
	return 0;
}

bool ifname_valid(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, IFNAME_LEN);
	if (n == 0 || n >= IFNAME_LEN || streq(s, ".") || streq(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '/' || c == ':' || c == ' ' || (c >= '\t' && c <= '\r') || c == 0xa0)
			return false;
		if (unicode_space_at((const unsigned char *)s + i))
			return false;
	}
	return true;
}

bool cni_id_valid(const char *s, size_t max)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, max + 1);
	if (n == 0 || n > max ||
	    !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!plain((unsigned char)s[i]))
			return false;
	return true;
}

int ifname_encode(const char *ifname, char *buf, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	if (!ifname_valid(ifname))
		return -EINVAL;
	for (const unsigned char *p = (const unsigned char *)ifname; *p; p++) {
		if (o + (plain(*p) ? 1 : 3) >= size)
			return -ENAMETOOLONG;
		if (plain(*p)) {
			buf[o++] = (char)*p;
		} else {
			buf[o++] = '%';
			buf[o++] = hex[*p >> 4];
			buf[o++] = hex[*p & 0xf];
		}
	}
	if (o >= size)
		return -ENAMETOOLONG;
	buf[o] = '\0';
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ifname_decode(const char *enc, size_t len, char *buf, size_t size)
{
	char again[IFNAME_ENC_MAX];
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)enc[i];

		if (o + 1 >= size)
			return -ENAMETOOLONG;
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= len)
				return -EINVAL;
			hi = hexval(enc[i + 1]);
			lo = hexval(enc[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (unsigned char)(hi << 4 | lo);
			if (c == 0)
				return -EINVAL;
			i += 2;
		} else if (!plain(c)) {
			return -EINVAL;
		}
		buf[o++] = (char)c;
	}
	if (o >= size)
		return -ENAMETOOLONG;
	buf[o] = '\0';
	/* one spelling per name: what encode gives back */
	if (ifname_encode(buf, again, sizeof(again)) < 0 || strlen(again) != len || memcmp(again, enc, len) != 0)
		return -EINVAL;
	return 0;
}
