/* k8s.c — Kubernetes' identifier rules (k8s.h), after apimachinery's
 * pkg/util/validation: IsDNS1123Label, IsDNS1123Subdomain. */
#include "k8s.h"

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One label of n characters: alphanumeric at both ends, '-' inside. */
static bool label_ok(const char *s, size_t n)
{
	if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!lower_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

bool k8s_dns_label_valid(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, K8S_DNS_LABEL_MAX + 1);
	return n <= K8S_DNS_LABEL_MAX && label_ok(s, n);
}

bool k8s_dns_subdomain_valid(const char *s)
{
	size_t n;
	const char *p;

	if (!s)
		return false;
	n = strnlen(s, K8S_DNS_SUBDOMAIN_MAX + 1);
	if (n == 0 || n > K8S_DNS_SUBDOMAIN_MAX)
		return false;
	for (p = s;;) {
		const char *dot = memchr(p, '.', (size_t)(s + n - p));
		size_t len = dot ? (size_t)(dot - p) : (size_t)(s + n - p);

		if (!label_ok(p, len))
			return false;
		if (!dot)
			return true;
		p = dot + 1;
	}
}

bool k8s_uid_valid(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, K8S_UID_MAX + 1);
	if (n == 0 || n > K8S_UID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!lower_alnum(c) && !(c >= 'A' && c <= 'Z') && c != '-' && c != '.' && c != '_')
			return false;
	}
	return true;
}

/* ---- quantities ---- */

/* Significant digits kept exactly (after dropping leading and trailing
 * zeros): 10^20 * 2^60 (Ei) still fits in 128 bits. Longer mantissas could
 * only name a whole number through absurd spellings
 * ("0.000...931322574615478515625Ei") and are refused. */
#define QUANTITY_DIGITS_MAX 20
/* Exponents beyond this saturate: the value is then far out of range. */
#define QUANTITY_EXP_CLAMP 100000

/* resource.Quantity's suffixes: decimal power of ten and binary power of
 * two. Longest first where one is a prefix of another ("Ei" before "E"). */
static const struct {
	const char *s;
	int pow10;
	int pow2;
} suffixes[] = {
        {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},
        {"Ei", 0, 60}, {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},
        {"M", 6, 0},   {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
};

/* A decimal exponent "[+-]digits" at s; returns chars consumed (0 if none),
 * saturating the value at +-QUANTITY_EXP_CLAMP. */
static size_t parse_exponent(const char *s, long *ret)
{
	size_t i = 0;
	bool neg = false;
	long v = 0;

	if (s[i] == '+' || s[i] == '-')
		neg = s[i++] == '-';
	if (s[i] < '0' || s[i] > '9')
		return 0;
	for (; s[i] >= '0' && s[i] <= '9'; i++)
		if (v < QUANTITY_EXP_CLAMP)
			v = v * 10 + (s[i] - '0');
	if (v > QUANTITY_EXP_CLAMP)
		v = QUANTITY_EXP_CLAMP;
	*ret = neg ? -v : v;
	return i;
}

int k8s_quantity_parse(const char *s, struct k8s_quantity *ret, struct error *err)
{
	char q[QUOTE_BUF];
	const char *p, *int_start, *frac_start = NULL;
	size_t int_len, frac_len = 0;
	struct k8s_quantity v = {0};
	unsigned sig = 0;

	if (!s)
		return error_set(err, EINVAL, "invalid quantity: missing value");
	quote_value(s, q, sizeof(q));
	if (!*s)
		return error_set(err, EINVAL, "invalid quantity \"\": empty value");
	for (p = s; *p; p++)
		if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
			return error_set(err, EINVAL, "invalid quantity %s: whitespace is not allowed", q);

	/* <signedNumber> ::= [+-] ( digits | digits. | .digits | digits.digits ) */
	p = s;
	if (*p == '-' || *p == '+')
		v.negative = *p++ == '-';
	int_start = p;
	while (*p >= '0' && *p <= '9')
		p++;
	int_len = (size_t)(p - int_start);
	if (*p == '.') {
		frac_start = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		frac_len = (size_t)(p - frac_start);
	}
	if (int_len == 0 && frac_len == 0)
		return error_set(err, EINVAL,
		                 "invalid quantity %s: expected a number (digits, optionally with a fraction)", q);

	/* <suffix> ::= binarySI | decimalSI | (e|E) signedNumber, or nothing */
	if (*p) {
		size_t used = 0;

		if ((*p == 'e' || *p == 'E') && (used = parse_exponent(p + 1, &v.exp10)) > 0) {
			used++;
		} else {
			for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
				size_t n = strlen(suffixes[i].s);
				if (strncmp(p, suffixes[i].s, n) == 0) {
					v.exp10 = suffixes[i].pow10;
					v.pow2 = suffixes[i].pow2;
					used = n;
					break;
				}
			}
		}
		if (p[used]) {
			char suf[QUOTE_BUF];
			return error_set(err, EINVAL, "invalid quantity %s: unknown suffix %s", q,
			                 quote_value(p + used, suf, sizeof(suf)));
		}
	}

	/* Mantissa digits as one integer, dropping leading zeros; every
	 * fraction digit lowers the decimal exponent. Trailing zeros are
	 * folded into the exponent so only significant digits count. */
	{
		const char *runs[2] = {int_start, frac_start};
		size_t lens[2] = {int_len, frac_len};
		unsigned pending_zeros = 0;

		for (int r = 0; r < 2; r++) {
			for (size_t i = 0; i < lens[r]; i++) {
				int d = runs[r][i] - '0';
				if (r == 1)
					v.exp10--;
				if (d == 0) {
					if (sig > 0)
						pending_zeros++;
					continue;
				}
				if (sig + pending_zeros + 1 > QUANTITY_DIGITS_MAX)
					return error_set(
					        err, EINVAL,
					        "invalid quantity %s: too many significant digits (at most %d)", q,
					        QUANTITY_DIGITS_MAX);
				for (; pending_zeros > 0; pending_zeros--, sig++)
					v.mant *= 10;
				v.mant = v.mant * 10 + (unsigned)d;
				sig++;
			}
		}
		v.exp10 += pending_zeros;
	}
	*ret = v;
	return 0;
}

int k8s_quantity_to_u64(const struct k8s_quantity *q, uint64_t max, uint64_t *ret)
{
	unsigned __int128 val;

	if (q->negative && q->mant != 0)
		return -ERANGE;
	if (q->mant == 0) {
		*ret = 0;
		return 0;
	}
	/* mant < 10^20 and 2^pow2 <= 2^60: the product fits in 128 bits */
	val = q->mant << q->pow2;
	if (q->exp10 >= 0) {
		for (long i = 0; i < q->exp10 && val <= max; i++)
			val *= 10;
	} else {
		unsigned __int128 div = 1;
		/* 10^38 < 2^128; a larger divisor leaves less than one unit */
		if (-q->exp10 > 38)
			return -EDOM;
		for (long i = 0; i < -q->exp10; i++)
			div *= 10;
		if (val % div != 0)
			return -EDOM;
		val /= div;
	}
	if (val > max)
		return -ERANGE;
	*ret = (uint64_t)val;
	return 0;
}
