/* test_k8s.c — Kubernetes' identifier rules (shared/k8s.c) against the table
 * test/unit/golden/k8s-names.txt, the one test/k8s/test_names.py checks
 * against the real kube-apiserver; and the UID rule. Run from the repo root. */
#include "k8s.h"
#include "t.h"

static bool kind_valid(const char *kind, const char *v, bool *known)
{
	*known = true;
	if (streq(kind, "namespace"))
		return k8s_namespace_valid(v);
	if (streq(kind, "pod"))
		return k8s_pod_name_valid(v) && k8s_node_name_valid(v);
	*known = false;
	return false;
}

TEST(k8s_names_match_the_table)
{
	FILE *f = fopen("test/unit/golden/k8s-names.txt", "re");
	char line[1024];
	unsigned n = 0;

	CHECK(f != NULL);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *kind = line, *want, *v, *nl;
		bool known;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		want = strchr(kind, '\t');
		CHECK(want != NULL);
		if (!want)
			continue;
		*want++ = '\0';
		v = strchr(want, '\t');
		CHECK(v != NULL);
		if (!v)
			continue;
		*v++ = '\0';
		if (kind_valid(kind, v, &known) != streq(want, "valid")) {
			fprintf(stderr, "  %s \"%s\" (%zu chars): expected %s\n", kind, v, strlen(v), want);
			CHECK(false);
		}
		CHECK(known);
		n++;
	}
	fclose(f);
	CHECK(n >= 20);
}

TEST(k8s_long_label_pod_names)
{
	/* Tekton/Argo style: a label of more than 63 characters between dots */
	char name[300];

	memset(name, 'a', 100);
	memcpy(name + 100, ".run-1", 7);
	CHECK(k8s_pod_name_valid(name));
	CHECK(!k8s_namespace_valid(name));
	CHECK(!k8s_pod_name_valid(NULL));
	CHECK(!k8s_pod_name_valid(""));
}

TEST(k8s_uids)
{
	static const struct {
		const char *uid;
		bool ok;
	} cases[] = {
	        {"6f5b2c1e-8f7a-4c7e-9d3b-2a1f0e9d8c7b", true}, /* API server: RFC 4122 */
	        {"0123456789abcdef0123456789abcdef", true},     /* kubelet: static pod hash */
	        {"my-static.pod_1", true},                      /* a static pod's own */
	        {"6F5B2C1E-8F7A-4C7E-9D3B-2A1F0E9D8C7B", true},
	        {"", false},
	        {"a b", false},
	        {"a/b", false},
	        {"a\"b", false},
	        {"$(reboot)", false},
	};
	char long_uid[K8S_UID_MAX + 2];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		if (k8s_uid_valid(cases[i].uid) != cases[i].ok) {
			fprintf(stderr, "  uid \"%s\": expected %s\n", cases[i].uid, cases[i].ok ? "valid" : "invalid");
			CHECK(false);
		}
	}
	memset(long_uid, 'a', sizeof(long_uid) - 1);
	long_uid[sizeof(long_uid) - 1] = '\0';
	CHECK(!k8s_uid_valid(long_uid));
	long_uid[K8S_UID_MAX] = '\0';
	CHECK(k8s_uid_valid(long_uid));
}

/* One quantity grammar for the bandwidth annotations and the GPU counts:
 * the exact decomposition and the whole-number conversion. */
TEST(k8s_quantities)
{
	static const struct {
		const char *s;
		int parse, conv;
		uint64_t value;
	} cases[] = {
	        {"10M", 0, 0, 10000000},
	        {"500Mi", 0, 0, 524288000},
	        {"1e3", 0, 0, 1000},
	        {"1.5k", 0, 0, 1500},
	        {"2000m", 0, 0, 2},
	        {"3000000u", 0, 0, 3},
	        {"4000000000n", 0, 0, 4},
	        {"+7", 0, 0, 7},
	        {"0", 0, 0, 0},
	        {"-0", 0, 0, 0},
	        {"-1", 0, -ERANGE, 0},
	        {"1500m", 0, -EDOM, 0},
	        {"1e-50", 0, -EDOM, 0},
	        {"2Ei", 0, -ERANGE, 0},
	        {"1e100000000", 0, -ERANGE, 0},
	        {"", -EINVAL, 0, 0},
	        {"1 k", -EINVAL, 0, 0},
	        {"1K", -EINVAL, 0, 0},
	        {"1kk", -EINVAL, 0, 0},
	        {"e3", -EINVAL, 0, 0},
	        {"12345678901234567890123", -EINVAL, 0, 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct k8s_quantity q;
		struct error e = {0};
		uint64_t v = 77;
		int r = k8s_quantity_parse(cases[i].s, &q, &e);

		if (r != cases[i].parse)
			fprintf(stderr, "  \"%s\": parse %d (%s)\n", cases[i].s, r, e.msg);
		CHECK_INT(r, cases[i].parse);
		if (r < 0) {
			CHECK_CONTAINS(e.msg, "invalid quantity \"");
			continue;
		}
		r = k8s_quantity_to_u64(&q, 1000000000000000000ULL, &v);
		if (r != cases[i].conv)
			fprintf(stderr, "  \"%s\": conversion %d\n", cases[i].s, r);
		CHECK_INT(r, cases[i].conv);
		if (r == 0)
			CHECK_INT(v, cases[i].value);
	}
}

/* The callers' limits, table-driven: a label between dots may exceed 63
 * characters (apimachinery checks a subdomain's total only), the total may
 * not exceed 253; a namespace is one label of at most 63. */
TEST(k8s_name_lengths)
{
	static const struct {
		unsigned label1, label2; /* lengths of "<a...>.<b...>", label2 0: one label */
		bool pod, ns;
	} cases[] = {
	        {63, 0, true, true},      {64, 0, true, false},  {100, 6, true, false},  {64, 64, true, false},
	        {126, 126, true, false}, /* 126 + 1 + 126 = 253 */
	        {126, 127, false, false}, {253, 0, true, false}, {254, 0, false, false}, {1, 1, true, false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char name[600];
		size_t n = cases[i].label1;

		memset(name, 'a', n);
		if (cases[i].label2) {
			name[n++] = '.';
			memset(name + n, 'b', cases[i].label2);
			n += cases[i].label2;
		}
		name[n] = '\0';
		if (k8s_pod_name_valid(name) != cases[i].pod || k8s_node_name_valid(name) != cases[i].pod ||
		    k8s_namespace_valid(name) != cases[i].ns || k8s_dns_subdomain_valid(name) != cases[i].pod) {
			fprintf(stderr, "  %u.%u (%zu chars): expected pod %d namespace %d\n", cases[i].label1,
			        cases[i].label2, n, cases[i].pod, cases[i].ns);
			CHECK(false);
		}
	}
}
