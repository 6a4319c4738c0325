/* kubeconfig.c — kubeconfig (libyaml document API) and in-cluster loading
 * (see kubeconfig.h). Only the fields the agent needs are read; everything
 * read is type-checked and bounded, and secrets are wiped after use. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <yaml.h>

#include "file.h"
#include "kube/decode.h"
#include "k8s.h"
#include "kube/kubeconfig.h"

/* ---- files ---- */

static void wipe_free(char *p, size_t len)
{
	if (p) {
		explicit_bzero(p, len);
		free(p);
	}
}

/* A secret file of at most max bytes: one NUL-terminated buffer
 * (wipe_free(buf, *ret_len + 1) when done). Messages say why, not which
 * file: callers prefix the path. */
static int read_bounded(const char *path, size_t max, char **ret, size_t *ret_len, struct error *err)
{
	return file_read_bounded(path, max, FILE_READ_SECRET, ret, ret_len, NULL, err);
}

static bool is_token_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

static int token_validate(const char *t, size_t len, const char *what, struct error *err)
{
	if (len == 0)
		return error_set(err, EINVAL, "%s is empty", what);
	for (size_t i = 0; i < len; i++)
		if (!is_token_char((unsigned char)t[i]))
			/* never quote the token */
			return error_set(err, EINVAL, "%s contains characters that cannot be sent in an HTTP header",
			                 what);
	return 0;
}

int kube_token_read(const char *path, char **ret_token, struct error *err)
{
	char *buf = NULL, *tok;
	size_t len = 0, start = 0, size;
	int r;

	r = read_bounded(path, KUBE_TOKEN_MAX_BYTES, &buf, &len, err);
	if (r < 0) {
		error_prefix(err, "token file %s", path);
		return r;
	}
	size = len + 1;
	while (start < len && strchr(" \t\r\n", buf[start]))
		start++;
	while (len > start && strchr(" \t\r\n", buf[len - 1]))
		len--;
	r = token_validate(buf + start, len - start, "token file", err);
	if (r < 0) {
		error_prefix(err, "%s", path);
		wipe_free(buf, size);
		return r;
	}
	// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): read_bounded sets buf when it succeeds
	tok = strndup(buf + start, len - start);
	wipe_free(buf, size);
	if (!tok)
		return error_set(err, ENOMEM, "token file %s: out of memory", path);
	*ret_token = tok;
	return 0;
}

/* ---- base64 ---- */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int kube_base64_decode(const char *in, size_t len, char **ret, size_t *ret_len, size_t *ret_offset)
{
	enum { PAD = 64 };
	unsigned char *out = malloc(len / 4 * 3 + 4);
	size_t o = 0, bad = 0;
	int q[4], n = 0;
	bool done = false;

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		int v;

		if (c == '\r' || c == '\n')
			continue;
		bad = i;
		if (done)
			goto fail; /* data after the padding */
		if (c == '=') {
			if (n < 2)
				goto fail;
			v = PAD;
		} else {
			v = b64_value(c);
			if (v < 0 || (n > 0 && q[n - 1] == PAD))
				goto fail;
		}
		q[n++] = v;
		if (n < 4)
			continue;
		out[o++] = (unsigned char)(q[0] << 2 | q[1] >> 4);
		if (q[2] != PAD)
			out[o++] = (unsigned char)((q[1] & 0xf) << 4 | q[2] >> 2);
		if (q[3] != PAD)
			out[o++] = (unsigned char)((q[2] & 0x3) << 6 | q[3]);
		done = q[3] == PAD;
		n = 0;
	}
	if (n != 0) {
		bad = len; /* truncated: padding missing */
		goto fail;
	}
	out[o] = '\0';
	*ret = (char *)out;
	*ret_len = o;
	return 0;
fail:
	wipe_free((char *)out, len / 4 * 3 + 4);
	if (ret_offset)
		*ret_offset = bad;
	return -EINVAL;
}

/* ---- YAML document access ---- */

struct kc {
	yaml_document_t doc;
	char dir[KUBE_PATH_MAX]; /* the kubeconfig's directory, absolute */
};

static yaml_node_t *kc_node(struct kc *kc, int idx)
{
	return yaml_document_get_node(&kc->doc, idx);
}

static bool scalar_is_null(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return !*v || streq(v, "~") || streq(v, "null") || streq(v, "Null") || streq(v, "NULL");
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return "a scalar";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "nothing";
	}
}

/* The value of key in map; NULL when absent or null. Duplicate keys are an error. */
static int map_get(struct kc *kc, yaml_node_t *map, const char *key, const char *where, yaml_node_t **ret,
                   struct error *err)
{
	size_t klen = strlen(key);
	yaml_node_t *found = NULL;

	*ret = NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = kc_node(kc, p->key);
		if (!k || k->type != YAML_SCALAR_NODE || k->data.scalar.length != klen ||
		    memcmp(k->data.scalar.value, key, klen) != 0)
			continue;
		if (found)
			return error_set(err, EINVAL, "%s: duplicate key \"%s\"", where, key);
		found = kc_node(kc, p->value);
	}
	if (found && found->type == YAML_SCALAR_NODE && scalar_is_null(found))
		found = NULL;
	*ret = found;
	return 0;
}

static int map_get_typed(struct kc *kc, yaml_node_t *map, const char *key, const char *where, yaml_node_type_t type,
                         yaml_node_t **ret, struct error *err)
{
	int r = map_get(kc, map, key, where, ret, err);
	if (r < 0)
		return r;
	if (*ret && (*ret)->type != type) {
		const char *want = type == YAML_MAPPING_NODE    ? "a mapping"
		                   : type == YAML_SEQUENCE_NODE ? "a list"
		                                                : "a string";
		return error_set(err, EINVAL, "%s: %s: expected %s, got %s", where, key, want, node_kind(*ret));
	}
	return 0;
}

/* A scalar's text (owned by the document); *ret NULL when absent/null/"". */
static int get_scalar(struct kc *kc, yaml_node_t *map, const char *key, const char *where, const char **ret,
                      size_t *ret_len, struct error *err)
{
	yaml_node_t *n;
	int r = map_get_typed(kc, map, key, where, YAML_SCALAR_NODE, &n, err);

	*ret = NULL;
	*ret_len = 0;
	if (r < 0 || !n || n->data.scalar.length == 0)
		return r;
	if (memchr(n->data.scalar.value, '\0', n->data.scalar.length))
		return error_set(err, EINVAL, "%s: %s: contains a NUL byte", where, key);
	*ret = (const char *)n->data.scalar.value;
	*ret_len = n->data.scalar.length;
	return 0;
}

static int get_str(struct kc *kc, yaml_node_t *map, const char *key, const char *where, char *dst, size_t size,
                   struct error *err)
{
	const char *v;
	size_t len;
	int r = get_scalar(kc, map, key, where, &v, &len, err);

	dst[0] = '\0';
	if (r < 0 || !v)
		return r;
	if (len >= size)
		return error_set(err, ENAMETOOLONG, "%s: %s: value of %zu bytes is too long (max %zu)", where, key, len,
		                 size - 1);
	memcpy(dst, v, len + 1);
	return 0;
}

static int get_bool(struct kc *kc, yaml_node_t *map, const char *key, const char *where, bool *ret, struct error *err)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
	yaml_node_t *n;
	char q[96];
	int r = map_get_typed(kc, map, key, where, YAML_SCALAR_NODE, &n, err);

	*ret = false;
	if (r < 0 || !n)
		return r;
	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
			if (streq((const char *)n->data.scalar.value, yes[i])) {
				*ret = true;
				return 0;
			}
			if (streq((const char *)n->data.scalar.value, no[i]))
				return 0;
		}
	}
	return error_set(err, EINVAL, "%s: %s: expected true or false, got %s", where, key,
	                 kube_quote(q, sizeof(q), (const char *)n->data.scalar.value, n->data.scalar.length, 32));
}

/* Find the entry named `name` in the list root[list_key] (items {name, item_key: {...}})
 * and return its item_key mapping. */
static int find_named(struct kc *kc, yaml_node_t *root, const char *list_key, const char *item_key, const char *name,
                      yaml_node_t **ret, struct error *err)
{
	yaml_node_t *list, *found = NULL;
	int r, i = 0;

	*ret = NULL;
	r = map_get_typed(kc, root, list_key, "kubeconfig", YAML_SEQUENCE_NODE, &list, err);
	if (r < 0)
		return r;
	if (!list)
		return error_set(err, ENOENT, "%s \"%s\" not found (no %s)", item_key, name, list_key);
	for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++, i++) {
		yaml_node_t *entry = kc_node(kc, *it);
		char where[64], entry_name[KUBE_CONFIG_NAME_MAX];

		snprintf(where, sizeof(where), "%s[%d]", list_key, i);
		if (!entry || entry->type != YAML_MAPPING_NODE)
			return error_set(err, EINVAL, "%s: expected a mapping, got %s", where,
			                 entry ? node_kind(entry) : "nothing");
		r = get_str(kc, entry, "name", where, entry_name, sizeof(entry_name), err);
		if (r < 0)
			return r;
		if (!streq(entry_name, name))
			continue;
		if (found)
			return error_set(err, EINVAL, "%s: duplicate name \"%s\"", list_key, name);
		snprintf(where, sizeof(where), "%s \"%.40s\"", item_key, name);
		r = map_get_typed(kc, entry, item_key, where, YAML_MAPPING_NODE, &found, err);
		if (r < 0)
			return r;
		if (!found)
			return error_set(err, EINVAL, "%s: %s: missing", where, item_key);
	}
	if (!found)
		return error_set(err, ENOENT, "%s \"%s\" not found", item_key, name);
	*ret = found;
	return 0;
}

/* ---- validation helpers ---- */

static bool hostname_valid(const char *s, size_t len)
{
	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		      c == '.'))
			return false;
	}
	return true;
}

static bool port_valid(const char *s, size_t len)
{
	unsigned long v = 0;
	if (len == 0 || len > 5)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v >= 1 && v <= 65535;
}

/* https://host[:port][/path]; copies a normalised form (no trailing '/') to dst. */
static int server_validate(const char *url, char *dst, size_t size, struct error *err)
{
	char q[160];
	const char *host, *p, *port = NULL, *path;
	size_t hlen;

#define BAD_URL(why) error_set(err, EINVAL, "server %s: %s", kube_quote(q, sizeof(q), url, strlen(url), 100), why)
	if (strncmp(url, "http://", 7) == 0)
		return BAD_URL("plain http is not supported (TLS is always verified)");
	if (strncmp(url, "https://", 8) != 0)
		return BAD_URL("not an https:// URL");
	for (p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return BAD_URL("contains a space, control or non-ASCII character");
	if (strpbrk(url, "?#"))
		return BAD_URL("a query or fragment is not allowed");
	host = url + 8;
	path = strchr(host, '/');
	if (!path)
		path = host + strlen(host);
	if (memchr(host, '@', (size_t)(path - host)))
		return BAD_URL("credentials in the URL are not allowed");
	if (*host == '[') {
		char addr[INET6_ADDRSTRLEN];
		struct in6_addr a6;
		const char *close = memchr(host, ']', (size_t)(path - host));
		if (!close || (size_t)(close - host - 1) >= sizeof(addr))
			return BAD_URL("bad IPv6 address");
		memcpy(addr, host + 1, (size_t)(close - host - 1));
		addr[close - host - 1] = '\0';
		if (inet_pton(AF_INET6, addr, &a6) != 1)
			return BAD_URL("bad IPv6 address");
		p = close + 1;
		if (p < path && *p != ':')
			return BAD_URL("bad host");
	} else {
		p = memchr(host, ':', (size_t)(path - host));
		if (!p)
			p = path;
		hlen = (size_t)(p - host);
		if (!hostname_valid(host, hlen))
			return BAD_URL("bad host name");
	}
	if (p < path) { /* ":port" */
		port = p + 1;
		if (!port_valid(port, (size_t)(path - port)))
			return BAD_URL("bad port");
	}
	if (strlen(url) >= size)
		return BAD_URL("too long");
#undef BAD_URL
	str_copy(dst, size, url);
	for (size_t n = strlen(dst); n > 8 && dst[n - 1] == '/'; n--)
		dst[n - 1] = '\0';
	return 0;
}

/* Resolve a path relative to the kubeconfig's directory; it must be a regular file. */
static int file_ref(struct kc *kc, const char *where, const char *key, const char *p, char *dst, size_t size,
                    struct error *err)
{
	struct stat st;
	int n;

	if (p[0] == '/')
		n = snprintf(dst, size, "%s", p);
	else
		n = snprintf(dst, size, "%s/%s", kc->dir, p);
	if (n < 0 || (size_t)n >= size)
		return error_set(err, ENAMETOOLONG, "%s: %s: path too long", where, key);
	if (stat(dst, &st) < 0)
		return error_set(err, errno, "%s: %s \"%s\": %s", where, key, dst, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "%s: %s \"%s\": not a regular file", where, key, dst);
	return 0;
}

/* key (a path) or key-data (base64 PEM), at most one. */
static int file_or_data(struct kc *kc, yaml_node_t *map, const char *where, const char *key, char *file,
                        size_t file_size, char **data, size_t *data_len, struct error *err)
{
	char data_key[64], path[KUBE_PATH_MAX];
	const char *v;
	size_t len, bad = 0;
	int r;

	snprintf(data_key, sizeof(data_key), "%s-data", key);
	r = get_str(kc, map, key, where, path, sizeof(path), err);
	if (r < 0)
		return r;
	r = get_scalar(kc, map, data_key, where, &v, &len, err);
	if (r < 0)
		return r;
	if (path[0] && v)
		return error_set(err, EINVAL, "%s: %s and %s are both set; keep one", where, key, data_key);
	if (path[0])
		return file_ref(kc, where, key, path, file, file_size, err);
	if (!v)
		return 0;
	r = kube_base64_decode(v, len, data, data_len, &bad);
	if (r == -ENOMEM)
		return error_set(err, ENOMEM, "%s: %s: out of memory", where, data_key);
	if (r < 0)
		return error_set(err, EINVAL, "%s: %s: invalid base64 at offset %zu", where, data_key, bad);
	if (!strstr(*data, "-----BEGIN "))
		return error_set(err, EINVAL, "%s: %s: decoded data is not PEM (no -----BEGIN line)", where, data_key);
	return 0;
}

/* ---- kubeconfig ---- */

static int load_cluster(struct kc *kc, yaml_node_t *cl, struct kube_client_config *c, struct error *err)
{
	char where[KUBE_CONFIG_NAME_MAX + 16], server[KUBE_SERVER_MAX * 2];
	int r;

	snprintf(where, sizeof(where), "cluster \"%.200s\"", c->cluster);
	r = get_str(kc, cl, "server", where, server, sizeof(server), err);
	if (r < 0)
		return r;
	if (!server[0])
		return error_set(err, EINVAL, "%s: server: missing", where);
	r = server_validate(server, c->server, sizeof(c->server), err);
	if (r < 0) {
		error_prefix(err, "%s", where);
		return r;
	}
	r = file_or_data(kc, cl, where, "certificate-authority", c->ca_file, sizeof(c->ca_file), &c->ca_pem,
	                 &c->ca_pem_len, err);
	if (r < 0)
		return r;
	r = get_bool(kc, cl, "insecure-skip-tls-verify", where, &c->insecure_skip_tls_verify, err);
	if (r < 0)
		return r;
	if (c->insecure_skip_tls_verify && (c->ca_file[0] || c->ca_pem))
		return error_set(err, EINVAL,
		                 "%s: insecure-skip-tls-verify is set together with a certificate authority; keep one",
		                 where);
	r = get_str(kc, cl, "tls-server-name", where, c->tls_server_name, sizeof(c->tls_server_name), err);
	if (r < 0)
		return r;
	if (c->tls_server_name[0] && !hostname_valid(c->tls_server_name, strlen(c->tls_server_name))) {
		char q[96];
		return error_set(err, EINVAL, "%s: tls-server-name: %s is not a host name", where,
		                 kube_quote(q, sizeof(q), c->tls_server_name, strlen(c->tls_server_name), 64));
	}
	r = get_str(kc, cl, "proxy-url", where, c->proxy_url, sizeof(c->proxy_url), err);
	if (r < 0)
		return r;
	for (const char *p = c->proxy_url; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return error_set(err, EINVAL, "%s: proxy-url: contains a space, control or non-ASCII character",
			                 where);
	return 0;
}

static int load_user(struct kc *kc, yaml_node_t *u, struct kube_client_config *c, struct error *err)
{
	static const struct {
		const char *key;
		const char *why;
	} unsupported[] = {
	        {"exec", "exec credential plugins are not supported; use a token, tokenFile or client certificate"},
	        {"auth-provider",
	         "auth-provider plugins are not supported; use a token, tokenFile or client certificate"},
	        {"username", "basic authentication (username/password) is not supported"},
	        {"password", "basic authentication (username/password) is not supported"},
	};
	char where[KUBE_CONFIG_NAME_MAX + 16], path[KUBE_PATH_MAX];
	const char *tok;
	size_t tok_len;
	int r;

	snprintf(where, sizeof(where), "user \"%.200s\"", c->user);
	for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++) {
		yaml_node_t *n;
		r = map_get(kc, u, unsupported[i].key, where, &n, err);
		if (r < 0)
			return r;
		if (n)
			return error_set(err, ENOTSUP, "%s: %s: %s", where, unsupported[i].key, unsupported[i].why);
	}
	r = get_scalar(kc, u, "token", where, &tok, &tok_len, err);
	if (r < 0)
		return r;
	if (tok) {
		r = token_validate(tok, tok_len, "token", err);
		if (r < 0) {
			error_prefix(err, "%s", where);
			return r;
		}
		c->token = strndup(tok, tok_len);
		if (!c->token)
			return error_set(err, ENOMEM, "%s: out of memory", where);
	}
	r = get_str(kc, u, "tokenFile", where, path, sizeof(path), err);
	if (r < 0)
		return r;
	if (path[0]) {
		char *t = NULL;
		r = file_ref(kc, where, "tokenFile", path, c->token_file, sizeof(c->token_file), err);
		if (r < 0)
			return r;
		/* as client-go: the file, re-read on rotation, wins over token */
		r = kube_token_read(c->token_file, &t, err);
		if (r < 0) {
			error_prefix(err, "%s", where);
			return r;
		}
		if (c->token)
			wipe_free(c->token, strlen(c->token));
		c->token = t;
	}
	r = file_or_data(kc, u, where, "client-certificate", c->cert_file, sizeof(c->cert_file), &c->cert_pem,
	                 &c->cert_pem_len, err);
	if (r < 0)
		return r;
	r = file_or_data(kc, u, where, "client-key", c->key_file, sizeof(c->key_file), &c->key_pem, &c->key_pem_len,
	                 err);
	if (r < 0)
		return r;
	if ((c->cert_file[0] || c->cert_pem) != (c->key_file[0] || c->key_pem))
		return error_set(err, EINVAL,
		                 "%s: a client certificate needs both client-certificate(-data) and client-key(-data)",
		                 where);
	return 0;
}

static int kc_set_dir(struct kc *kc, const char *path, struct error *err)
{
	const char *slash = strrchr(path, '/');
	char dir[KUBE_PATH_MAX];
	int n;

	if (!slash)
		n = snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		n = snprintf(dir, sizeof(dir), "/");
	else
		n = snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return error_set(err, ENAMETOOLONG, "path too long");
	if (dir[0] == '/') {
		memcpy(kc->dir, dir, sizeof(dir));
		return 0;
	}
	{
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return error_set(err, errno, "current directory: %s", strerror(errno));
		n = snprintf(kc->dir, sizeof(kc->dir), "%s/%s", cwd, dir);
		if (n < 0 || (size_t)n >= sizeof(kc->dir))
			return error_set(err, ENAMETOOLONG, "path too long");
	}
	return 0;
}

static void yaml_wipe_document(yaml_document_t *doc)
{
	for (yaml_node_t *n = doc->nodes.start; n && n < doc->nodes.top; n++)
		if (n->type == YAML_SCALAR_NODE && n->data.scalar.value)
			explicit_bzero(n->data.scalar.value, n->data.scalar.length);
}

static int load_doc(struct kc *kc, struct kube_client_config *c, const char *context, struct error *err)
{
	yaml_node_t *root, *ctx = NULL, *cl = NULL, *u = NULL;
	int r;

	root = yaml_document_get_root_node(&kc->doc);
	if (!root)
		return error_set(err, EINVAL, "empty file");
	if (root->type != YAML_MAPPING_NODE)
		return error_set(err, EINVAL, "expected a mapping at the top, got %s", node_kind(root));
	if (context)
		r = str_copy(c->context, sizeof(c->context), context) < 0
		            ? error_set(err, ENAMETOOLONG, "context name too long")
		            : 0;
	else
		r = get_str(kc, root, "current-context", "kubeconfig", c->context, sizeof(c->context), err);
	if (r < 0)
		return r;
	if (!c->context[0])
		return error_set(err, EINVAL, "current-context is not set");
	r = find_named(kc, root, "contexts", "context", c->context, &ctx, err);
	if (r < 0)
		return r;
	{
		char where[KUBE_CONFIG_NAME_MAX + 16];
		snprintf(where, sizeof(where), "context \"%.200s\"", c->context);
		r = get_str(kc, ctx, "cluster", where, c->cluster, sizeof(c->cluster), err);
		if (r >= 0)
			r = get_str(kc, ctx, "user", where, c->user, sizeof(c->user), err);
		if (r >= 0)
			r = get_str(kc, ctx, "namespace", where, c->namespace_, sizeof(c->namespace_), err);
		if (r < 0)
			return r;
		if (!c->cluster[0])
			return error_set(err, EINVAL, "%s: cluster: missing", where);
		r = find_named(kc, root, "clusters", "cluster", c->cluster, &cl, err);
		if (r < 0) {
			error_prefix(err, "%s", where);
			return r;
		}
		if (c->user[0]) {
			r = find_named(kc, root, "users", "user", c->user, &u, err);
			if (r < 0) {
				error_prefix(err, "%s", where);
				return r;
			}
		}
	}
	r = load_cluster(kc, cl, c, err);
	if (r < 0)
		return r;
	if (u) {
		r = load_user(kc, u, c, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int kube_config_load_file(const char *path, const char *context, struct kube_client_config *ret, struct error *err)
{
	struct kube_client_config *c = NULL;
	_cleanup_free_ struct kc *kc = NULL;
	yaml_parser_t parser;
	char *buf = NULL;
	size_t len = 0;
	bool have_doc = false;
	int r;

	c = calloc(1, sizeof(*c));
	kc = calloc(1, sizeof(*kc));
	if (!c || !kc) {
		free(c);
		return error_set(err, ENOMEM, "kubeconfig %s: out of memory", path);
	}
	r = kc_set_dir(kc, path, err);
	if (r < 0)
		goto fail;
	r = read_bounded(path, KUBECONFIG_MAX_BYTES, &buf, &len, err);
	if (r < 0)
		goto fail;
	if (!yaml_parser_initialize(&parser)) {
		r = error_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &kc->doc)) {
		r = error_set(err, EINVAL, "invalid YAML at line %zu, column %zu: %s%s%s", parser.problem_mark.line + 1,
		              parser.problem_mark.column + 1, parser.problem ? parser.problem : "syntax error",
		              parser.context ? " " : "", parser.context ? parser.context : "");
	} else {
		have_doc = true;
	}
	/* the parser's buffers hold the (secret) input */
	if (parser.raw_buffer.start)
		explicit_bzero(parser.raw_buffer.start, (size_t)(parser.raw_buffer.end - parser.raw_buffer.start));
	if (parser.buffer.start)
		explicit_bzero(parser.buffer.start, (size_t)(parser.buffer.end - parser.buffer.start));
	yaml_parser_delete(&parser);
	if (!have_doc)
		goto fail;

	r = load_doc(kc, c, context, err);
	yaml_wipe_document(&kc->doc);
	yaml_document_delete(&kc->doc);
	if (r < 0)
		goto fail;
	wipe_free(buf, len + 1);
	*ret = *c;
	free(c);
	return 0;
fail:
	error_prefix(err, "kubeconfig %s", path);
	wipe_free(buf, len + 1);
	kube_client_config_done(c);
	free(c);
	return r;
}

/* ---- in-cluster ---- */

int kube_config_load_in_cluster(const char *host, const char *port, const char *sa_dir, struct kube_client_config *ret,
                                struct error *err)
{
	struct kube_client_config *c;
	char path[KUBE_PATH_MAX], q[96];
	struct in6_addr a6;
	int r, n;

	if (!host)
		host = getenv("KUBERNETES_SERVICE_HOST");
	if (!port)
		port = getenv("KUBERNETES_SERVICE_PORT");
	if (!sa_dir)
		sa_dir = KUBE_SA_DIR_DEFAULT;
	if (!host || !*host || !port || !*port)
		return error_set(err, ENOENT,
		                 "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
		                 "(not running in a pod? use --kubeconfig)");
	if (!port_valid(port, strlen(port)))
		return error_set(err, EINVAL, "in-cluster config: KUBERNETES_SERVICE_PORT %s is not a port",
		                 kube_quote(q, sizeof(q), port, strlen(port), 32));
	c = calloc(1, sizeof(*c));
	if (!c)
		return error_set(err, ENOMEM, "in-cluster config: out of memory");
	c->in_cluster = true;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		n = snprintf(c->server, sizeof(c->server), "https://[%s]:%s", host, port);
	else if (hostname_valid(host, strlen(host)))
		n = snprintf(c->server, sizeof(c->server), "https://%s:%s", host, port);
	else {
		r = error_set(err, EINVAL,
		              "in-cluster config: KUBERNETES_SERVICE_HOST %s is not a host name or address",
		              kube_quote(q, sizeof(q), host, strlen(host), 64));
		goto fail;
	}
	if (n < 0 || (size_t)n >= sizeof(c->server)) {
		r = error_set(err, ENAMETOOLONG, "in-cluster config: server URL too long");
		goto fail;
	}

	n = snprintf(c->token_file, sizeof(c->token_file), "%s/token", sa_dir);
	if (n < 0 || (size_t)n >= sizeof(c->token_file)) {
		r = error_set(err, ENAMETOOLONG, "in-cluster config: path too long");
		goto fail;
	}
	r = kube_token_read(c->token_file, &c->token, err);
	if (r < 0)
		goto fail_prefix;

	n = snprintf(c->ca_file, sizeof(c->ca_file), "%s/ca.crt", sa_dir);
	if (n < 0 || (size_t)n >= sizeof(c->ca_file)) {
		r = error_set(err, ENAMETOOLONG, "in-cluster config: path too long");
		goto fail;
	}
	{
		struct stat st;
		if (stat(c->ca_file, &st) < 0) {
			r = error_set(err, errno, "CA file %s: %s", c->ca_file, strerror(errno));
			goto fail_prefix;
		}
		if (!S_ISREG(st.st_mode)) {
			r = error_set(err, EINVAL, "CA file %s: not a regular file", c->ca_file);
			goto fail_prefix;
		}
	}

	/* namespace: optional */
	n = snprintf(path, sizeof(path), "%s/namespace", sa_dir);
	if (n > 0 && (size_t)n < sizeof(path) && access(path, F_OK) == 0) {
		char *buf = NULL;
		size_t len = 0;
		r = read_bounded(path, 256, &buf, &len, err);
		if (r < 0) {
			error_prefix(err, "%s", path);
			goto fail_prefix;
		}
		while (len > 0 && strchr(" \t\r\n", buf[len - 1]))
			buf[--len] = '\0';
		if (len >= sizeof(c->namespace_) || !k8s_namespace_valid(buf)) {
			r = error_set(err, EINVAL, "%s: %s is not a namespace", path,
			              kube_quote(q, sizeof(q), buf, len, 64));
			free(buf);
			goto fail_prefix;
		}
		// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): read_bounded sets buf when it succeeds
		memcpy(c->namespace_, buf, len + 1);
		free(buf);
	}
	*ret = *c;
	free(c);
	return 0;
fail_prefix:
	error_prefix(err, "in-cluster config");
fail:
	kube_client_config_done(c);
	free(c);
	return r;
}

void kube_client_config_done(struct kube_client_config *c)
{
	if (!c)
		return;
	if (c->token)
		wipe_free(c->token, strlen(c->token));
	if (c->key_pem)
		wipe_free(c->key_pem, c->key_pem_len);
	free(c->ca_pem);
	free(c->cert_pem);
	c->token = c->key_pem = c->ca_pem = c->cert_pem = NULL;
	c->key_pem_len = c->ca_pem_len = c->cert_pem_len = 0;
}
