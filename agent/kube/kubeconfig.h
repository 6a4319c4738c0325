/* kubeconfig.h — where the agent's API client connects and how it
 * authenticates: a kubeconfig file (libyaml; current-context -> cluster +
 * user) or the in-cluster service account. Pure loading and validation; the
 * caller builds the TLS client from the result. Secrets (token, key data)
 * never appear in error messages and are wiped when freed. */
#ifndef AIQOS_AGENT_KUBECONFIG_H
#define AIQOS_AGENT_KUBECONFIG_H

#include "error.h"

#define KUBE_SERVER_MAX      512
#define KUBE_PATH_MAX        4096
#define KUBE_CONFIG_NAME_MAX 256
#define KUBECONFIG_MAX_BYTES (1024 * 1024)
#define KUBE_TOKEN_MAX_BYTES (64 * 1024)
#define KUBE_SA_DIR_DEFAULT  "/var/run/secrets/kubernetes.io/serviceaccount"

struct kube_client_config {
	bool in_cluster;
	char server[KUBE_SERVER_MAX]; /* "https://host[:port][/path]", IPv6 hosts bracketed */
	/* TLS trust: ca_file (absolute path) or ca_pem (decoded certificate-authority-data) */
	char ca_file[KUBE_PATH_MAX];
	char *ca_pem;
	size_t ca_pem_len;
	/* insecure-skip-tls-verify: true. Never acted upon silently: the
	 * caller must refuse, or warn loudly (TLS is always verified). */
	bool insecure_skip_tls_verify;
	char tls_server_name[KUBE_CONFIG_NAME_MAX]; /* "" = the server's host */
	char proxy_url[KUBE_SERVER_MAX];            /* "" = none */
	/* bearer token: the value (secret, NUL-terminated) and, when it came from a
	 * file, the file to re-read on rotation (kube_token_read) */
	char *token;
	char token_file[KUBE_PATH_MAX];
	/* client certificate: a file (absolute path) or decoded PEM data */
	char cert_file[KUBE_PATH_MAX];
	char *cert_pem;
	size_t cert_pem_len;
	char key_file[KUBE_PATH_MAX];
	char *key_pem; /* secret */
	size_t key_pem_len;
	char namespace_[64]; /* context namespace / service-account namespace, "" = unset */
	/* for logs: which context, cluster and user were used */
	char context[KUBE_CONFIG_NAME_MAX];
	char cluster[KUBE_CONFIG_NAME_MAX];
	char user[KUBE_CONFIG_NAME_MAX];
};

/* Load path (a kubeconfig). context: NULL = current-context. Relative file
 * paths in it are resolved against the kubeconfig's directory; referenced
 * files must exist; a tokenFile is read now. Refused: http:// servers, exec
 * and auth-provider plugins, basic auth, both a file and its -data, a CA
 * together with insecure-skip-tls-verify. *ret is untouched on failure.
 * Errors name the file, entry and field: "kubeconfig /k: user \"admin\":
 * client-key-data: invalid base64 at offset 12". */
int kube_config_load_file(const char *path, const char *context, struct kube_client_config *ret, struct error *err);

/* In-cluster: host/port NULL = $KUBERNETES_SERVICE_HOST/_PORT; sa_dir NULL =
 * KUBE_SA_DIR_DEFAULT, holding token (required), ca.crt (required),
 * namespace (optional). An IPv6 host becomes https://[addr]:port. */
int kube_config_load_in_cluster(const char *host, const char *port, const char *sa_dir, struct kube_client_config *ret,
                                struct error *err);

void kube_client_config_done(struct kube_client_config *c);
/* A deep copy of src into dst (its data and token duplicated), -ENOMEM
 * with dst empty. Free with kube_client_config_done. */
int kube_client_config_copy(struct kube_client_config *dst, const struct kube_client_config *src);

/* Read a bearer token file (bounded, surrounding whitespace trimmed, must be
 * non-empty printable ASCII: it goes into an HTTP header). */
int kube_token_read(const char *path, char **ret_token, struct error *err);

/* Strict base64 (RFC 4648 alphabet, '=' padding required; CR/LF ignored as Go
 * does). On error *ret_offset (if non-NULL) is the offending input offset. */
int kube_base64_decode(const char *in, size_t len, char **ret, size_t *ret_len, size_t *ret_offset);

#endif
