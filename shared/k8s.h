/* k8s.h — Kubernetes' own rules, written once: the identifiers aiqos reads
 * from the API, CNI_ARGS and the plugin socket (namespaces are DNS-1123
 * labels, pod and node names DNS-1123 subdomains with no per-label limit,
 * UIDs what Kubernetes generates or a static pod's manifest may set) and
 * resource quantities (resource.Quantity's grammar: the bandwidth
 * annotations, GPU requests). Pure. */
#ifndef AIQOS_K8S_H
#define AIQOS_K8S_H

#include "error.h"

#define K8S_DNS_LABEL_MAX     63  /* IsDNS1123Label */
#define K8S_DNS_SUBDOMAIN_MAX 253 /* IsDNS1123Subdomain */
#define K8S_UID_MAX           63  /* see k8s_uid_valid */

/* [a-z0-9]([-a-z0-9]*[a-z0-9])?, 1..63 characters: namespace names. */
bool k8s_dns_label_valid(const char *s);
/* [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*, 1..253
 * characters; a label between dots may be longer than 63 (Kubernetes checks
 * the total only): pod and node names. */
bool k8s_dns_subdomain_valid(const char *s);
static inline bool k8s_namespace_valid(const char *s)
{
	return k8s_dns_label_valid(s);
}
static inline bool k8s_pod_name_valid(const char *s)
{
	return k8s_dns_subdomain_valid(s);
}
static inline bool k8s_node_name_valid(const char *s)
{
	return k8s_dns_subdomain_valid(s);
}
/* A pod UID: the API server sets RFC 4122 UUIDs, the kubelet 32 hex digits
 * for a static pod without one, and a static pod's manifest may carry its
 * own (the kubelet keeps it as written). Accepted: 1..63 of letters, digits,
 * '-', '.', '_' — all of those, nothing that could break a log line, a URL
 * or a JSON record. */
bool k8s_uid_valid(const char *s);

/* A quantity, exactly: (-1 if negative) * mant * 2^pow2 * 10^exp10.
 * Grammar: [+-] (digits | digits. | .digits | digits.digits) then one of
 * Ki Mi Gi Ti Pi Ei, n u m k M G T P E, e|E[+-]digits, or nothing. No
 * whitespace; at most 20 significant digits (more could only spell a whole
 * number absurdly). */
struct k8s_quantity {
	bool negative;
	unsigned __int128 mant;
	long exp10; /* saturated at +-100000 */
	int pow2;
};
/* 0, or -EINVAL/-ERANGE with err "invalid quantity \"<s>\": <why>" naming
 * the value (and an unknown suffix). */
int k8s_quantity_parse(const char *s, struct k8s_quantity *ret, struct error *err);
/* As a whole number in [0, max]: 0, -ERANGE (negative or above max), -EDOM
 * (not a whole number). */
int k8s_quantity_to_u64(const struct k8s_quantity *q, uint64_t max, uint64_t *ret);

#endif
