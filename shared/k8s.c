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
