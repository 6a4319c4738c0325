/* test_agent_kubeconfig.c — kubeconfig and in-cluster loading against files
 * written to a temporary directory: tokens, client certificates, relative
 * paths, missing/unknown entries, bad base64, insecure flag, refused
 * features, in-cluster with a fake service-account dir, IPv6 hosts. Every
 * error message is checked, and none may contain the token. */
#include <fcntl.h>
#include <sys/stat.h>

#include "../../agent/kube/kubeconfig.h"
#include "t.h"

#define SECRET   "s3cr3t-T0KEN.value_do-not-print"
#define PEM_CERT "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
#define PEM_KEY  "-----BEGIN EC PRIVATE KEY-----\nMHcfakeKEYmaterial\n-----END EC PRIVATE KEY-----\n"

/* Write rel (under the temp dir, creating directories) and return its absolute path. */
static const char *put(const char *rel, const char *content)
{
	static char paths[8][512];
	static int next;
	char *path = paths[next++ % 8];
	char dir[512];
	FILE *f;

	snprintf(path, 512, "%s/%s", t_tmpdir(), rel);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	for (char *p = dir + strlen(t_tmpdir()) + 1; (p = strchr(p, '/')); *p++ = '/') {
		*p = '\0';
		mkdir(dir, 0700);
	}
	mkdir(dir, 0700);
	f = fopen(path, "we");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputs(content, f);
	fclose(f);
	return path;
}

static char *b64(const char *s)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(s), o = 0;
	char *out = malloc(n / 3 * 4 + 5);
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned char)s[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)s[i + 2];
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

/* A kubeconfig with one context "ctx" -> cluster "c1" + user "u1"; the
 * cluster and user bodies are given (indented by 4 spaces). */
static const char *kubeconfig(const char *rel, const char *cluster_body, const char *user_body)
{
	static char buf[16384];
	snprintf(buf, sizeof(buf),
	         "apiVersion: v1\n"
	         "kind: Config\n"
	         "current-context: ctx\n"
	         "preferences: {}\n"
	         "contexts:\n"
	         "- name: other\n"
	         "  context: {cluster: c2, user: u2}\n"
	         "- name: ctx\n"
	         "  context:\n"
	         "    cluster: c1\n"
	         "    user: u1\n"
	         "    namespace: team-a\n"
	         "clusters:\n"
	         "- name: c2\n"
	         "  cluster: {server: 'https://other:443'}\n"
	         "- name: c1\n"
	         "  cluster:\n%s"
	         "users:\n"
	         "- name: u1\n"
	         "  user:\n%s",
	         cluster_body, user_body);
	return put(rel, buf);
}

TEST(token_and_relative_ca_path)
{
	struct kube_client_config c;
	struct error e = {0};
	char want[600];
	const char *path;

	put("a/ca.crt", PEM_CERT);
	path = kubeconfig("a/config",
	                  "    server: https://api.example.com:6443/\n"
	                  "    certificate-authority: ca.crt\n"
	                  "    tls-server-name: kubernetes.default\n",
	                  "    token: " SECRET "\n");
	CHECK_INT(kube_config_load_file(path, NULL, &c, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_STR(c.server, "https://api.example.com:6443");
	snprintf(want, sizeof(want), "%s/a/ca.crt", t_tmpdir());
	CHECK_STR(c.ca_file, want);
	CHECK(c.ca_pem == NULL);
	CHECK_STR(c.token, SECRET);
	CHECK_STR(c.token_file, "");
	CHECK_STR(c.tls_server_name, "kubernetes.default");
	CHECK_STR(c.namespace_, "team-a");
	CHECK_STR(c.context, "ctx");
	CHECK_STR(c.cluster, "c1");
	CHECK_STR(c.user, "u1");
	CHECK(!c.insecure_skip_tls_verify);
	CHECK(!c.in_cluster);
	kube_client_config_done(&c);
	CHECK(c.token == NULL);
}

TEST(relative_kubeconfig_path)
{
	/* the kubeconfig given relative to the cwd: file paths still come out absolute */
	struct kube_client_config c;
	struct error e = {0};
	char want[600], cwd[512];

	put("rel/sub/ca.pem", PEM_CERT);
	kubeconfig("rel/kc.yaml", "    server: https://10.0.0.1\n    certificate-authority: sub/ca.pem\n", "    {}\n");
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK_INT(chdir(t_tmpdir()), 0);
	CHECK_INT(kube_config_load_file("rel/kc.yaml", NULL, &c, &e), 0);
	CHECK_STR(e.msg, "");
	snprintf(want, sizeof(want), "%s/rel/sub/ca.pem", t_tmpdir());
	CHECK_STR(c.ca_file, want);
	CHECK(c.token == NULL);
	kube_client_config_done(&c);
	CHECK_INT(chdir(cwd), 0);
}

TEST(client_cert_data_kind_style)
{
	struct kube_client_config c;
	struct error e = {0};
	char cluster[2048], user[4096];
	char *ca = b64(PEM_CERT), *cert = b64(PEM_CERT), *key = b64(PEM_KEY);

	snprintf(cluster, sizeof(cluster), "    certificate-authority-data: %s\n    server: https://127.0.0.1:36443\n",
	         ca);
	/* a long base64 value folded over lines is fine (Go ignores CR/LF) */
	snprintf(user, sizeof(user), "    client-certificate-data: %s\n    client-key-data: \"%.20s\\n%s\"\n", cert,
	         key, key + 20);
	CHECK_INT(kube_config_load_file(kubeconfig("kind/config", cluster, user), NULL, &c, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_STR(c.server, "https://127.0.0.1:36443");
	CHECK_STR(c.ca_pem, PEM_CERT);
	CHECK_INT(c.ca_pem_len, strlen(PEM_CERT));
	CHECK_STR(c.cert_pem, PEM_CERT);
	CHECK_STR(c.key_pem, PEM_KEY);
	CHECK_INT(c.key_pem_len, strlen(PEM_KEY));
	CHECK_STR(c.ca_file, "");
	CHECK_STR(c.cert_file, "");
	kube_client_config_done(&c);
	free(ca);
	free(cert);
	free(key);
}

TEST(client_cert_files_and_token_file)
{
	struct kube_client_config c;
	struct error e = {0};
	char *rotated = NULL;

	put("files/pki/client.crt", PEM_CERT);
	put("files/pki/client.key", PEM_KEY);
	put("files/token", "  first-token\n");
	CHECK_INT(kube_config_load_file(kubeconfig("files/config", "    server: https://[fd00::1]:6443\n",
	                                           "    client-certificate: pki/client.crt\n"
	                                           "    client-key: pki/client.key\n"
	                                           "    token: ignored-when-tokenFile-is-set\n"
	                                           "    tokenFile: token\n"),
	                                NULL, &c, &e),
	          0);
	CHECK_STR(e.msg, "");
	CHECK_STR(c.server, "https://[fd00::1]:6443");
	CHECK_STR(c.token, "first-token");
	CHECK_CONTAINS(c.token_file, "/files/token");
	CHECK(c.token_file[0] == '/');
	CHECK_CONTAINS(c.cert_file, "/files/pki/client.crt");
	CHECK_CONTAINS(c.key_file, "/files/pki/client.key");
	/* rotation: the caller re-reads token_file */
	put("files/token", "second-token\r\n");
	CHECK_INT(kube_token_read(c.token_file, &rotated, &e), 0);
	CHECK_STR(rotated, "second-token");
	free(rotated);
	kube_client_config_done(&c);
}

TEST(context_override)
{
	struct kube_client_config c;
	struct error e = {0};
	const char *path = kubeconfig("ovr/config", "    server: https://a:1\n", "    token: t\n");

	CHECK_INT(kube_config_load_file(path, "other", &c, &e), -ENOENT);
	/* "other" points at user u2, which does not exist */
	CHECK_CONTAINS(e.msg, ": context \"other\": user \"u2\" not found");
	CHECK_INT(kube_config_load_file(path, "missing", &c, &e), -ENOENT);
	CHECK_CONTAINS(e.msg, ": context \"missing\" not found");
}

TEST(insecure_flag_reported)
{
	static const struct {
		const char *value;
		int ret;
		bool insecure;
		const char *msg; /* suffix after "kubeconfig <path>: " */
	} cases[] = {
	        {"true", 0, true, ""},
	        {"True", 0, true, ""},
	        {"yes", 0, true, ""},
	        {"false", 0, false, ""},
	        {"\"true\"", -EINVAL, false,
	         "cluster \"c1\": insecure-skip-tls-verify: expected true or false, got \"true\""},
	        {"maybe", -EINVAL, false,
	         "cluster \"c1\": insecure-skip-tls-verify: expected true or false, got \"maybe\""},
	        {"[true]", -EINVAL, false, "cluster \"c1\": insecure-skip-tls-verify: expected a string, got a list"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_client_config c;
		struct error e = {0};
		char body[256], want[1024];
		const char *path;

		snprintf(body, sizeof(body), "    server: https://a:1\n    insecure-skip-tls-verify: %s\n",
		         cases[i].value);
		path = kubeconfig("insecure/config", body, "    token: " SECRET "\n");
		CHECK_INT(kube_config_load_file(path, NULL, &c, &e), cases[i].ret);
		if (cases[i].ret == 0) {
			CHECK_INT(c.insecure_skip_tls_verify, cases[i].insecure);
			kube_client_config_done(&c);
		} else {
			snprintf(want, sizeof(want), "kubeconfig %s: %s", path, cases[i].msg);
			CHECK_STR(e.msg, want);
		}
	}
}

/* Invalid kubeconfigs: exact messages, and never the token. */
TEST(errors)
{
	char *ca = b64(PEM_CERT), *notpem = b64("hello"), cluster_ca_data[600], bad_not_pem[600];
	const char *ca_path = put("err/ca.crt", PEM_CERT);
	char ca_both[900];
	static char cluster_server_only[] = "    server: https://a:1\n";
	const struct {
		const char *cluster;
		const char *user;
		const char *msg;
		int ret;
	} cases[] = {
	        {"    server: http://a:8080\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"http://a:8080\": plain http is not supported (TLS is always verified)",
	         -EINVAL},
	        {"    server: ftp://a\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"ftp://a\": not an https:// URL", -EINVAL},
	        {"    server: https://a:0\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://a:0\": bad port", -EINVAL},
	        {"    server: https://a:99999\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://a:99999\": bad port", -EINVAL},
	        {"    server: https://user:pw@a\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://user:pw@a\": credentials in the URL are not allowed", -EINVAL},
	        {"    server: https://a/x?y=1\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://a/x?y=1\": a query or fragment is not allowed", -EINVAL},
	        {"    server: https://[fd00::1\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://[fd00::1\": bad IPv6 address", -EINVAL},
	        {"    server: https://[zz::1]:443\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://[zz::1]:443\": bad IPv6 address", -EINVAL},
	        {"    server: \"https://a b\"\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://a b\": contains a space, control or non-ASCII character", -EINVAL},
	        {"    server: https://a_b\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server \"https://a_b\": bad host name", -EINVAL},
	        {"    certificate-authority: x\n", "    token: " SECRET "\n", "cluster \"c1\": server: missing",
	         -EINVAL},
	        {"    server: [https://a]\n", "    token: " SECRET "\n",
	         "cluster \"c1\": server: expected a string, got a list", -EINVAL},
	        {"    server: https://a\n    certificate-authority: nope.crt\n", "    token: " SECRET "\n", NULL,
	         -ENOENT},
	        {ca_both, "    token: " SECRET "\n",
	         "cluster \"c1\": certificate-authority and certificate-authority-data are both set; keep one",
	         -EINVAL},
	        {cluster_ca_data, "    token: " SECRET "\n",
	         "cluster \"c1\": insecure-skip-tls-verify is set together with a certificate authority; keep one",
	         -EINVAL},
	        {"    server: https://a\n    certificate-authority-data: 'AAAA!AAA'\n", "    token: " SECRET "\n",
	         "cluster \"c1\": certificate-authority-data: invalid base64 at offset 4", -EINVAL},
	        {bad_not_pem, "    token: " SECRET "\n",
	         "cluster \"c1\": certificate-authority-data: decoded data is not PEM (no -----BEGIN line)", -EINVAL},
	        {"    server: https://a\n    tls-server-name: 'bad name'\n", "    token: " SECRET "\n",
	         "cluster \"c1\": tls-server-name: \"bad name\" is not a host name", -EINVAL},
	        {cluster_server_only, "    client-key-data: 'QUJD" SECRET "'\n",
	         "user \"u1\": client-key-data: invalid base64 at offset 10", -EINVAL},
	        {cluster_server_only, "    client-certificate-data: 'Zg='\n",
	         "user \"u1\": client-certificate-data: invalid base64 at offset 3", -EINVAL},
	        {cluster_server_only, "    token: \"" SECRET "\\r\\nX-Evil: 1\"\n",
	         "user \"u1\": token contains characters that cannot be sent in an HTTP header", -EINVAL},
	        {cluster_server_only, "    token: \"" SECRET "\\0\"\n", "user \"u1\": token: contains a NUL byte",
	         -EINVAL},
	        {cluster_server_only,
	         "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n",
	         "user \"u1\": exec: exec credential plugins are not supported; use a token, tokenFile or client "
	         "certificate",
	         -ENOTSUP},
	        {cluster_server_only, "    auth-provider: {name: gcp}\n",
	         "user \"u1\": auth-provider: auth-provider plugins are not supported; use a token, tokenFile or "
	         "client "
	         "certificate",
	         -ENOTSUP},
	        {cluster_server_only, "    username: admin\n    password: " SECRET "\n",
	         "user \"u1\": username: basic authentication (username/password) is not supported", -ENOTSUP},
	        {cluster_server_only, "    client-certificate-data: 'QUJD'\n    client-certificate: x.crt\n",
	         "user \"u1\": client-certificate and client-certificate-data are both set; keep one", -EINVAL},
	        {cluster_server_only, "    client-certificate: ca.crt\n",
	         "user \"u1\": a client certificate needs both client-certificate(-data) and client-key(-data)",
	         -EINVAL},
	        {cluster_server_only, "    tokenFile: /nonexistent/token\n",
	         "user \"u1\": tokenFile \"/nonexistent/token\": No such file or directory", -ENOENT},
	        {cluster_server_only, "    token: " SECRET "\n    token: other\n",
	         "user \"u1\": duplicate key \"token\"", -EINVAL},
	};

	snprintf(cluster_ca_data, sizeof(cluster_ca_data),
	         "    server: https://a\n    insecure-skip-tls-verify: true\n    certificate-authority-data: %s\n", ca);
	snprintf(bad_not_pem, sizeof(bad_not_pem), "    server: https://a\n    certificate-authority-data: %s\n",
	         notpem);
	snprintf(ca_both, sizeof(ca_both),
	         "    server: https://a\n    certificate-authority: %s\n"
	         "    certificate-authority-data: %s\n",
	         ca_path, ca);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_client_config c;
		struct error e = {0};
		char want[1024];
		const char *path = kubeconfig("err/config", cases[i].cluster, cases[i].user);

		memset(&c, 0x5a, sizeof(c));
		CHECK_INT(kube_config_load_file(path, NULL, &c, &e), cases[i].ret);
		if (cases[i].msg) {
			snprintf(want, sizeof(want), "kubeconfig %s: %s", path, cases[i].msg);
			CHECK_STR(e.msg, want);
		} else {
			CHECK_CONTAINS(e.msg, "cluster \"c1\": certificate-authority \"");
			CHECK_CONTAINS(e.msg, "/err/nope.crt\": No such file or directory");
		}
		CHECK(!strstr(e.msg, SECRET));
		CHECK(!strstr(e.msg, "QUJD"));
		CHECK_INT((unsigned char)c.server[0], 0x5a); /* untouched */
	}
	free(ca);
	free(notpem);
}

TEST(structure_errors)
{
	static const struct {
		const char *yaml;
		const char *msg;
	} cases[] = {
	        {"", "empty file"},
	        {"# only a comment\n", "empty file"},
	        {"- a\n- b\n", "expected a mapping at the top, got a list"},
	        {"just text\n", "expected a mapping at the top, got a scalar"},
	        {"current-context: x\n  bad: indent\n",
	         "invalid YAML at line 2, column 6: mapping values are not allowed in this context"},
	        {"a: [1, 2\n",
	         "invalid YAML at line 2, column 1: did not find expected ',' or ']' while parsing a flow sequence"},
	        {"kind: Config\nclusters: []\n", "current-context is not set"},
	        {"current-context: ''\n", "current-context is not set"},
	        {"current-context: ~\n", "current-context is not set"},
	        {"current-context: x\n", "context \"x\" not found (no contexts)"},
	        {"current-context: x\ncurrent-context: y\n", "kubeconfig: duplicate key \"current-context\""},
	        {"current-context: x\ncontexts: {x: 1}\n", "kubeconfig: contexts: expected a list, got a mapping"},
	        {"current-context: x\ncontexts: [7]\n", "contexts[0]: expected a mapping, got a scalar"},
	        {"current-context: x\ncontexts:\n- name: x\n", "context \"x\": context: missing"},
	        {"current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n", "context \"x\": cluster: missing"},
	        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n- name: x\n  context: {cluster: "
	         "d}\n",
	         "contexts: duplicate name \"x\""},
	        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: nope, user: u}\nclusters:\n- name: c\n"
	         "  cluster: {server: 'https://a'}\n",
	         "context \"x\": cluster \"nope\" not found"},
	        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: nope}\nclusters:\n- name: c\n"
	         "  cluster: {server: 'https://a'}\nusers: []\n",
	         "context \"x\": user \"nope\" not found"},
	        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, namespace: [a]}\n",
	         "context \"x\": namespace: expected a string, got a list"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_client_config c;
		struct error e = {0};
		char want[1024];
		const char *path = put("struct/config", cases[i].yaml);

		CHECK(kube_config_load_file(path, NULL, &c, &e) < 0);
		snprintf(want, sizeof(want), "kubeconfig %s: %s", path, cases[i].msg);
		CHECK_STR(e.msg, want);
	}
}

TEST(anonymous_user_and_aliases)
{
	/* a context without a user is anonymous; YAML anchors/aliases work */
	struct kube_client_config c;
	struct error e = {0};
	const char *path = put("alias/config", "current-context: x\n"
	                                       "contexts:\n- name: x\n  context: {cluster: c}\n"
	                                       "clusters:\n- name: c\n  cluster: &cl {server: 'https://a.b:443'}\n"
	                                       "- name: d\n  cluster: *cl\n"
	                                       "loop: &l [*l]\n");
	CHECK_INT(kube_config_load_file(path, NULL, &c, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_STR(c.server, "https://a.b:443");
	CHECK(c.token == NULL && c.cert_pem == NULL && c.cert_file[0] == '\0');
	kube_client_config_done(&c);
}

TEST(file_errors)
{
	struct kube_client_config c;
	struct error e = {0};
	char path[600], want[700];
	FILE *f;

	snprintf(path, sizeof(path), "%s/does-not-exist", t_tmpdir());
	CHECK_INT(kube_config_load_file(path, NULL, &c, &e), -ENOENT);
	snprintf(want, sizeof(want), "kubeconfig %s: No such file or directory", path);
	CHECK_STR(e.msg, want);

	CHECK_INT(kube_config_load_file(t_tmpdir(), NULL, &c, &e), -EINVAL);
	snprintf(want, sizeof(want), "kubeconfig %s: not a regular file", t_tmpdir());
	CHECK_STR(e.msg, want);

	snprintf(path, sizeof(path), "%s/big", t_tmpdir());
	f = fopen(path, "we");
	for (int i = 0; i < KUBECONFIG_MAX_BYTES / 16 + 1; i++)
		fputs("# padding......\n", f);
	fclose(f);
	CHECK_INT(kube_config_load_file(path, NULL, &c, &e), -EFBIG);
	snprintf(want, sizeof(want), "kubeconfig %s: larger than 1048576 bytes", path);
	CHECK_STR(e.msg, want);
}

TEST(base64)
{
	static const struct {
		const char *in;
		int ret;
		const char *out;
		size_t bad;
	} cases[] = {
	        {"", 0, "", 0},
	        {"Zg==", 0, "f", 0},
	        {"Zm8=", 0, "fo", 0},
	        {"Zm9v", 0, "foo", 0},
	        {"Zm9vYg==", 0, "foob", 0},
	        {"Zm9v\r\nYmFy\n", 0, "foobar", 0},
	        {"Zg=", -EINVAL, NULL, 3},
	        {"Zg", -EINVAL, NULL, 2},
	        {"Z===", -EINVAL, NULL, 1},
	        {"Zg==Zg==", -EINVAL, NULL, 4},
	        {"Zg=a", -EINVAL, NULL, 3},
	        {"Zm9v!", -EINVAL, NULL, 4},
	        {"Zm 9v", -EINVAL, NULL, 2},
	        {"Zm9-", -EINVAL, NULL, 3},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *out = NULL;
		size_t len = 99, bad = 99;
		int r = kube_base64_decode(cases[i].in, strlen(cases[i].in), &out, &len, &bad);
		CHECK_INT(r, cases[i].ret);
		if (r == 0) {
			CHECK_STR(out, cases[i].out);
			CHECK_INT(len, strlen(cases[i].out));
			free(out);
		} else {
			CHECK_INT(bad, cases[i].bad);
		}
	}
}

/* ---- in-cluster ---- */

static const char *sa_dir(const char *name, const char *token, const char *ca, const char *ns)
{
	static char dir[600];
	char rel[300];

	snprintf(dir, sizeof(dir), "%s/%s", t_tmpdir(), name);
	if (token) {
		snprintf(rel, sizeof(rel), "%s/token", name);
		put(rel, token);
	}
	if (ca) {
		snprintf(rel, sizeof(rel), "%s/ca.crt", name);
		put(rel, ca);
	}
	if (ns) {
		snprintf(rel, sizeof(rel), "%s/namespace", name);
		put(rel, ns);
	}
	mkdir(dir, 0700);
	return dir;
}

TEST(in_cluster)
{
	struct kube_client_config c;
	struct error e = {0};
	const char *dir = sa_dir("sa1", SECRET "\n", PEM_CERT, "kube-system");
	char want[700];

	CHECK_INT(kube_config_load_in_cluster("10.96.0.1", "443", dir, &c, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK(c.in_cluster);
	CHECK_STR(c.server, "https://10.96.0.1:443");
	CHECK_STR(c.token, SECRET);
	snprintf(want, sizeof(want), "%s/token", dir);
	CHECK_STR(c.token_file, want);
	snprintf(want, sizeof(want), "%s/ca.crt", dir);
	CHECK_STR(c.ca_file, want);
	CHECK_STR(c.namespace_, "kube-system");
	kube_client_config_done(&c);

	/* IPv6 service host -> bracketed; from the environment */
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	CHECK_INT(kube_config_load_in_cluster(NULL, NULL, dir, &c, &e), 0);
	CHECK_STR(c.server, "https://[fd00:10:96::1]:6443");
	kube_client_config_done(&c);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");

	/* a DNS name is fine too; no namespace file is fine */
	dir = sa_dir("sa2", "tok", PEM_CERT, NULL);
	CHECK_INT(kube_config_load_in_cluster("kubernetes.default.svc", "443", dir, &c, &e), 0);
	CHECK_STR(c.server, "https://kubernetes.default.svc:443");
	CHECK_STR(c.namespace_, "");
	kube_client_config_done(&c);
}

TEST(in_cluster_errors)
{
	/* sa_dir() returns a static buffer: copy each */
	char g[600], nt[600], nc[600], et[600], bt[600], bn[600];
	const struct {
		const char *host, *port, *dir;
		int ret;
		const char *msg;
	} cases[] = {
	        {"", "443", g, -ENOENT,
	         "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not running in a "
	         "pod? "
	         "use --kubeconfig)"},
	        {"10.0.0.1", "", g, -ENOENT,
	         "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not running in a "
	         "pod? "
	         "use --kubeconfig)"},
	        {"10.0.0.1", "https", g, -EINVAL, "in-cluster config: KUBERNETES_SERVICE_PORT \"https\" is not a port"},
	        {"10.0.0.1", "70000", g, -EINVAL, "in-cluster config: KUBERNETES_SERVICE_PORT \"70000\" is not a port"},
	        {"a b", "443", g, -EINVAL,
	         "in-cluster config: KUBERNETES_SERVICE_HOST \"a b\" is not a host name or address"},
	        {"[fd00::1]", "443", g, -EINVAL,
	         "in-cluster config: KUBERNETES_SERVICE_HOST \"[fd00::1]\" is not a host name or address"},
	        {"10.0.0.1", "443", nt, -ENOENT, NULL},
	        {"10.0.0.1", "443", nc, -ENOENT, NULL},
	        {"10.0.0.1", "443", et, -EINVAL, NULL},
	        {"10.0.0.1", "443", bt, -EINVAL, NULL},
	        {"10.0.0.1", "443", bn, -EINVAL, NULL},
	};
	char want[7][1024];

	snprintf(g, sizeof(g), "%s", sa_dir("sa-good", SECRET, PEM_CERT, "default"));
	snprintf(nt, sizeof(nt), "%s", sa_dir("sa-notoken", NULL, PEM_CERT, NULL));
	snprintf(nc, sizeof(nc), "%s", sa_dir("sa-noca", SECRET, NULL, NULL));
	snprintf(et, sizeof(et), "%s", sa_dir("sa-empty", " \n", PEM_CERT, NULL));
	snprintf(bt, sizeof(bt), "%s",
	         sa_dir("sa-badtok",
	                SECRET "\x01"
	                       "x",
	                PEM_CERT, NULL));
	snprintf(bn, sizeof(bn), "%s", sa_dir("sa-badns", SECRET, PEM_CERT, "Bad NS"));
	snprintf(want[0], sizeof(want[0]), "in-cluster config: token file %s/token: No such file or directory", nt);
	snprintf(want[1], sizeof(want[1]), "in-cluster config: CA file %s/ca.crt: No such file or directory", nc);
	snprintf(want[2], sizeof(want[2]), "in-cluster config: %s/token: token file is empty", et);
	snprintf(want[3], sizeof(want[3]),
	         "in-cluster config: %s/token: token file contains characters that cannot be sent in an HTTP header",
	         bt);
	snprintf(want[4], sizeof(want[4]), "in-cluster config: %s/namespace: \"Bad NS\" is not a namespace", bn);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_client_config c;
		struct error e = {0};
		CHECK_INT(kube_config_load_in_cluster(cases[i].host, cases[i].port, cases[i].dir, &c, &e),
		          cases[i].ret);
		CHECK_STR(e.msg, cases[i].msg ? cases[i].msg : want[i - 6]);
		CHECK(!strstr(e.msg, SECRET));
	}
}
