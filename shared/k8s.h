/* k8s.h — Kubernetes' own rules for the identifiers aiqos reads from the API,
 * CNI_ARGS and the plugin socket, written once: namespaces are DNS-1123
 * labels, pod and node names DNS-1123 subdomains (no per-label limit), UIDs
 * what Kubernetes generates or a static pod's manifest may set. Pure. */
#ifndef AIQOS_K8S_H
#define AIQOS_K8S_H

#include "util.h"

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

#endif
