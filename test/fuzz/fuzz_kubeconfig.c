/* fuzz_kubeconfig.c — the agent's kubeconfig (YAML, libyaml): the input is
 * written to a kubeconfig file in a private temp dir that also holds the
 * files a kubeconfig may reference relatively (ca.crt, token, client.crt,
 * client.key), then loaded with the current context and with a named one.
 * The base64 decoder and the token reader get the raw bytes too.
 * Properties: no crash or leak; a loaded config has an https server; a
 * refusal names the file. */
#include <fcntl.h>
#include <sys/stat.h>

#include "../../agent/kube/kubeconfig.h"
#include "fuzz.h"

static char dir[64];
static char path[128];
static char token_path[128];

static void write_file(const char *name, const void *data, size_t size)
{
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		perror(p);
		abort();
	}
	close(fd);
}

static void remove_dir(void)
{
	static const char *const names[] = {"config", "ca.crt", "token", "client.crt", "client.key", "raw"};
	char p[128];

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char pem[] = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUb3Jn\n-----END CERTIFICATE-----\n";
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/aiqos-fuzz-kc.XXXXXX", tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		abort();
	}
	atexit(remove_dir);
	snprintf(path, sizeof(path), "%s/config", dir);
	snprintf(token_path, sizeof(token_path), "%s/raw", dir);
	write_file("ca.crt", pem, sizeof(pem) - 1);
	write_file("client.crt", pem, sizeof(pem) - 1);
	write_file("client.key", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n", 62);
	write_file("token", "eyJhbGciOiJSUzI1NiJ9.fuzz.token\n", 32);
	return 0;
}

static void check_config(const struct kube_client_config *c)
{
	FUZZ_ASSERT(strncmp(c->server, "https://", 8) == 0, "server \"%s\"", c->server);
	FUZZ_ASSERT(!c->token || c->token[0], "empty token");
	FUZZ_ASSERT(!(c->ca_file[0] && c->ca_pem), "both a CA file and CA data");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_client_config c;
	struct error err = {0};

	if (size > KUBECONFIG_MAX_BYTES + 1)
		return 0;
	write_file("config", data, size);
	if (kube_config_load_file(path, NULL, &c, &err) == 0) {
		check_config(&c);
		kube_client_config_done(&c);
	} else {
		FUZZ_ASSERT(strstr(err.msg, path), "error does not name the file: %s", err.msg);
	}
	error_clear(&err);
	if (kube_config_load_file(path, "fuzz", &c, &err) == 0) {
		check_config(&c);
		kube_client_config_done(&c);
	}

	/* the same bytes as base64 data and as a token file */
	{
		char *out = NULL;
		size_t out_len = 0, off = 0;
		if (kube_base64_decode((const char *)data, size, &out, &out_len, &off) == 0) {
			FUZZ_ASSERT(out_len <= size / 4 * 3 + 3, "decoded %zu bytes from %zu", out_len, size);
			free(out);
		} else {
			FUZZ_ASSERT(off <= size, "error offset %zu past %zu", off, size);
		}
	}
	if (size <= KUBE_TOKEN_MAX_BYTES + 1) {
		char *token = NULL;
		write_file("raw", data, size);
		if (kube_token_read(token_path, &token, NULL) == 0) {
			FUZZ_ASSERT(token && token[0], "empty token accepted");
			free(token);
		}
	}
	return 0;
}
