/* test_ifname.c — the names libcni and Linux check (shared/ifname.c):
 * interface names, their file-name encoding round trip, and libcni's
 * container ID / network name rule. */
#include "ifname.h"
#include "t.h"

TEST(ifname_rules)
{
	static const struct {
		const char *s;
		bool ok;
	} cases[] = {
	        {"eth0", true},
	        {"net+1", true},
	        {"x@y", true},
	        {"eth0.100", true},
	        {"0123456789abcde", true},
	        {"0123456789abcdef", false}, /* 16 > IFNAMSIZ - 1 */
	        {"", false},
	        {".", false},
	        {"..", false},
	        {"a/b", false},
	        {"a:b", false},
	        {"a b", false},
	        {"a\tb", false},
	        {"a\xc2\xa0z", false}, /* U+00A0 */
	        {"\xc3\xa9t", true},   /* é: not a space */
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char enc[IFNAME_ENC_MAX], dec[IFNAME_ENC_MAX];

		if (ifname_valid(cases[i].s) != cases[i].ok) {
			fprintf(stderr, "  \"%s\": expected %s\n", cases[i].s, cases[i].ok ? "valid" : "invalid");
			CHECK(false);
		}
		if (!cases[i].ok) {
			CHECK_INT(ifname_encode(cases[i].s, enc, sizeof(enc)), -EINVAL);
			continue;
		}
		CHECK_INT(ifname_encode(cases[i].s, enc, sizeof(enc)), 0);
		CHECK_INT(ifname_decode(enc, strlen(enc), dec, sizeof(dec)), 0);
		CHECK_STR(dec, cases[i].s);
	}
	CHECK(!ifname_valid(NULL));
}

TEST(cni_id_rules)
{
	static const struct {
		const char *s;
		size_t max;
		bool ok;
	} cases[] = {
	        {"abc", 10, true},       {"A-b_c.9", 10, true}, {"0", 1, true},     {"", 10, false},
	        {"_a", 10, false},       {".a", 10, false},     {"-a", 10, false},  {"a/b", 10, false},
	        {"a b", 10, false},      {"a@b", 10, false},    {"abcd", 3, false}, {"abc", 3, true},
	        {"\xc3\xa9", 10, false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		if (cni_id_valid(cases[i].s, cases[i].max) != cases[i].ok) {
			fprintf(stderr, "  \"%s\" (max %zu): expected %s\n", cases[i].s, cases[i].max,
			        cases[i].ok ? "valid" : "invalid");
			CHECK(false);
		}
	CHECK(!cni_id_valid(NULL, 10));
}
