/* test_workload.c — workload classes, the Kubernetes quantity parser, and the
 * annotation / runtimeConfig readers (table-driven, exact messages). */
#include <cjson/cJSON.h>

#include "json.h"
#include "t.h"
#include "workload.h"

TEST(class_names)
{
	CHECK_STR(workload_class_name(CLASS_DEFAULT), "default");
	CHECK_STR(workload_class_name(CLASS_INFERENCE), "inference");
	CHECK_STR(workload_class_name(CLASS_TRAINING), "training");
	CHECK(workload_class_name(_CLASS_MAX) == NULL);
	CHECK(workload_class_name(_CLASS_INVALID) == NULL);
	CHECK_INT(workload_class_from_name("inference"), CLASS_INFERENCE);
	CHECK_INT(workload_class_from_name("training"), CLASS_TRAINING);
	CHECK_INT(workload_class_from_name("default"), CLASS_DEFAULT);
	CHECK_INT(workload_class_from_name("Inference"), _CLASS_INVALID);
	CHECK_INT(workload_class_from_name(" training"), _CLASS_INVALID);
	CHECK_INT(workload_class_from_name(""), _CLASS_INVALID);
	CHECK_INT(workload_class_from_name(NULL), _CLASS_INVALID);
}

/* Valid quantities and their value in bit/s. */
static const struct {
	const char *in;
	uint64_t bps;
} good[] = {
        {"1000", 1000},
        {"+1000", 1000},
        {"1k", 1000},
        {"100k", 100000},
        {"10M", 10000000},
        {"1G", 1000000000},
        {"1T", 1000000000000ULL},
        {"1Ki", 1024},
        {"500Mi", 524288000},
        {"1Gi", 1073741824},
        {"1e9", 1000000000},
        {"1E9", 1000000000},
        {"1e+9", 1000000000},
        {"1.5M", 1500000},
        {"1.5e6", 1500000},
        {"0.5G", 500000000},
        {".5G", 500000000},
        {"5.M", 5000000},
        {"1500000m", 1500},
        {"0001000", 1000},
        {"10.000M", 10000000},
        {"0.001G", 1000000},
        {"100000000000000000000e-8", 1000000000000ULL},
        {"2.5Ki", 2560},
        {"1.5Ki", 1536},
        {"1000000000000", 1000000000000ULL},
        {"0.000000001P", 1000000},
        {"0.000001E", 1000000000000ULL},
        {"999999999999.0000000000000", 999999999999ULL},
        {"0.0009765625Mi", 1024},
        {"1e3", 1000},
        {"1000e-0", 1000},
        {"1e12", 1000000000000ULL},
        /* resource.Quantity's nano and micro suffixes */
        {"1000000000000n", 1000},
        {"2000000000u", 2000},
};

TEST(quantity_good)
{
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct error e = {0};
		uint64_t v = 0;
		int r;

		r = quantity_parse_bps(good[i].in, &v, &e);
		if (r != 0 || v != good[i].bps)
			fprintf(stderr, "  case %s: r=%d v=%" PRIu64 " msg=%s\n", good[i].in, r, v, e.msg);
		CHECK_INT(r, 0);
		CHECK_INT(v, good[i].bps);
	}
}

/* Invalid quantities with the exact message and errno. */
static const struct {
	const char *in;
	int r;
	const char *msg;
} bad[] = {
        {"", -EINVAL, "invalid quantity \"\": empty value"},
        {" ", -EINVAL, "invalid quantity \" \": whitespace is not allowed"},
        {" 10M", -EINVAL, "invalid quantity \" 10M\": whitespace is not allowed"},
        {"10M ", -EINVAL, "invalid quantity \"10M \": whitespace is not allowed"},
        {"10 M", -EINVAL, "invalid quantity \"10 M\": whitespace is not allowed"},
        {"10M\n", -EINVAL, "invalid quantity \"10M\\x0a\": whitespace is not allowed"},
        {"-10M", -EINVAL, "invalid quantity \"-10M\": negative values are not allowed"},
        {"-0", -EINVAL, "invalid quantity \"-0\": negative values are not allowed"},
        {"+", -EINVAL, "invalid quantity \"+\": expected a number (digits, optionally with a fraction)"},
        {"++10", -EINVAL, "invalid quantity \"++10\": expected a number (digits, optionally with a fraction)"},
        {"+-10", -EINVAL, "invalid quantity \"+-10\": expected a number (digits, optionally with a fraction)"},
        {".", -EINVAL, "invalid quantity \".\": expected a number (digits, optionally with a fraction)"},
        {"Mi", -EINVAL, "invalid quantity \"Mi\": expected a number (digits, optionally with a fraction)"},
        {"M", -EINVAL, "invalid quantity \"M\": expected a number (digits, optionally with a fraction)"},
        {"e9", -EINVAL, "invalid quantity \"e9\": expected a number (digits, optionally with a fraction)"},
        {"10Mbps", -EINVAL, "invalid quantity \"10Mbps\": unknown suffix \"bps\""},
        {"10mbit", -EINVAL, "invalid quantity \"10mbit\": unknown suffix \"bit\""},
        {"10K", -EINVAL, "invalid quantity \"10K\": unknown suffix \"K\""},
        {"10KiB", -EINVAL, "invalid quantity \"10KiB\": unknown suffix \"B\""},
        {"10Mi5", -EINVAL, "invalid quantity \"10Mi5\": unknown suffix \"5\""},
        {"10MM", -EINVAL, "invalid quantity \"10MM\": unknown suffix \"M\""},
        {"1.5.5", -EINVAL, "invalid quantity \"1.5.5\": unknown suffix \".5\""},
        {"0x10", -EINVAL, "invalid quantity \"0x10\": unknown suffix \"x10\""},
        {"1e", -EINVAL, "invalid quantity \"1e\": unknown suffix \"e\""},
        {"1e+", -EINVAL, "invalid quantity \"1e+\": unknown suffix \"e+\""},
        {"1E+", -EINVAL, "invalid quantity \"1E+\": unknown suffix \"+\""},
        {"1e3.5", -EINVAL, "invalid quantity \"1e3.5\": unknown suffix \".5\""},
        {"1ki", -EINVAL, "invalid quantity \"1ki\": unknown suffix \"i\""},
        {"inf", -EINVAL, "invalid quantity \"inf\": expected a number (digits, optionally with a fraction)"},
        {"NaN", -EINVAL, "invalid quantity \"NaN\": expected a number (digits, optionally with a fraction)"},
        {"1\"x", -EINVAL, "invalid quantity \"1\\\"x\": unknown suffix \"\\\"x\""},
        {"10M\x01", -EINVAL, "invalid quantity \"10M\\x01\": unknown suffix \"\\x01\""},
        {"10\xc3\xa9", -EINVAL, "invalid quantity \"10\\xc3\\xa9\": unknown suffix \"\\xc3\\xa9\""},
        {"0", -ERANGE, "bandwidth \"0\" is below the minimum 1000 bit/s"},
        {"0.0", -ERANGE, "bandwidth \"0.0\" is below the minimum 1000 bit/s"},
        {"000e99999999999999999999", -ERANGE, "bandwidth \"000e99999999999999999999\" is below the minimum 1000 bit/s"},
        {"500", -ERANGE, "bandwidth \"500\" is below the minimum 1000 bit/s"},
        {"999", -ERANGE, "bandwidth \"999\" is below the minimum 1000 bit/s"},
        {"1500m", -ERANGE, "bandwidth \"1500m\" is not a whole number of bit/s"},
        {"1000.5", -ERANGE, "bandwidth \"1000.5\" is not a whole number of bit/s"},
        {"1.0001k", -ERANGE, "bandwidth \"1.0001k\" is not a whole number of bit/s"},
        {"1e-99999999999", -ERANGE, "bandwidth \"1e-99999999999\" is not a whole number of bit/s"},
        {"1000000000001", -ERANGE, "bandwidth \"1000000000001\" is above the maximum 1000000000000 bit/s"},
        {"2Ti", -ERANGE, "bandwidth \"2Ti\" is above the maximum 1000000000000 bit/s"},
        {"1P", -ERANGE, "bandwidth \"1P\" is above the maximum 1000000000000 bit/s"},
        {"9E", -ERANGE, "bandwidth \"9E\" is above the maximum 1000000000000 bit/s"},
        {"99999999999999999999E", -ERANGE,
         "bandwidth \"99999999999999999999E\" is above the maximum 1000000000000 bit/s"},
        {"99999999999999999999Ei", -ERANGE,
         "bandwidth \"99999999999999999999Ei\" is above the maximum 1000000000000 bit/s"},
        {"1e99999999999999999999", -ERANGE,
         "bandwidth \"1e99999999999999999999\" is above the maximum 1000000000000 bit/s"},
        {"184467440737095516160", -ERANGE,
         "bandwidth \"184467440737095516160\" is above the maximum 1000000000000 bit/s"},
        {"123456789012345678901", -EINVAL,
         "invalid quantity \"123456789012345678901\": too many significant digits (at most 20)"},
        {"1000.000000000000000001", -EINVAL,
         "invalid quantity \"1000.000000000000000001\": too many significant digits (at most 20)"},
};

TEST(quantity_bad)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct error e = {0};
		uint64_t v = 12345;
		int r = quantity_parse_bps(bad[i].in, &v, &e);

		if (r != bad[i].r || strcmp(e.msg, bad[i].msg) != 0)
			fprintf(stderr, "  case %zu:\n", i);
		CHECK_INT(r, bad[i].r);
		CHECK_STR(e.msg, bad[i].msg);
		CHECK_INT(v, 12345); /* untouched on failure */
	}
	CHECK_INT(quantity_parse_bps(NULL, NULL, NULL), -EINVAL);
}

TEST(quantity_hostile_long)
{
	/* 100 KB of digits, zeros, and a long junk suffix: bounded work, bounded message. */
	size_t n = 100000;
	char *s = malloc(n + 8);
	struct error e = {0};
	uint64_t v = 0;

	CHECK(s != NULL);
	if (!s)
		return;
	memset(s, '9', n);
	s[n] = '\0';
	CHECK_INT(quantity_parse_bps(s, &v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "too many significant digits");
	CHECK(strlen(e.msg) < 200);

	/* "1" followed by zeros: one significant digit, far above the max */
	memset(s, '0', n);
	s[0] = '1';
	CHECK_INT(quantity_parse_bps(s, &v, &e), -ERANGE);
	CHECK_CONTAINS(e.msg, "is above the maximum");
	CHECK_CONTAINS(e.msg, "...\"");

	/* "0.000...01T": fraction digits lower the exponent past any value */
	s[0] = '0';
	s[1] = '.';
	s[n - 2] = '1';
	s[n - 1] = 'T';
	CHECK_INT(quantity_parse_bps(s, &v, &e), -ERANGE);
	CHECK_CONTAINS(e.msg, "is not a whole number of bit/s");

	/* 1000 followed by a huge junk suffix */
	memcpy(s, "1000", 4);
	memset(s + 4, 'x', n - 4);
	CHECK_INT(quantity_parse_bps(s, &v, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "unknown suffix \"xxxx");
	CHECK(strlen(e.msg) < 200);
	free(s);
}

static const struct {
	const char *json;
	enum workload_class class;
	const char *profile;
	uint64_t egress_bps, ingress_bps;
	const char *warn[WORKLOAD_WARN_MAX]; /* exact, in order; unused slots NULL */
} annots[] = {
        {"{}", CLASS_DEFAULT, "", 0, 0, {NULL}},
        {"{\"other\":\"x\"}", CLASS_DEFAULT, "", 0, 0, {NULL}},
        {"{\"ai.workload\":\"inference\"}", CLASS_INFERENCE, "", 0, 0, {NULL}},
        {"{\"ai.workload\":\"training\"}", CLASS_TRAINING, "", 0, 0, {NULL}},
        {"{\"ai.workload\":\"GPU-train\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: invalid value \"GPU-train\" (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":\"Training\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: invalid value \"Training\" (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":\" inference\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: invalid value \" inference\" (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":\"default\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: invalid value \"default\" (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":\"\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: invalid value \"\" (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":\"a\\nb\\u0000c\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: invalid value \"a\\x0ab\" (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":42}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: value is not a string (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":null}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: value is not a string (accepted: inference, training); using class default"}},
        {"{\"ai.workload\":\"inference\",\"ai.workload/profile\":\"inference-strict\"}",
         CLASS_INFERENCE,
         "inference-strict",
         0,
         0,
         {NULL}},
        {"{\"ai.workload/profile\":\"training-dctcp\"}", CLASS_DEFAULT, "training-dctcp", 0, 0, {NULL}},
        {"{\"ai.workload\":\"training\",\"ai.workload/profile\":\"Bad_Name\"}",
         CLASS_TRAINING,
         "",
         0,
         0,
         {"ai.workload/profile: invalid profile name \"Bad_Name\" (lowercase letters, digits and '-', at most 63 "
          "characters); ignored"}},
        {"{\"ai.workload/profile\":\"-x\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload/profile: invalid profile name \"-x\" (lowercase letters, digits and '-', at most 63 "
          "characters); ignored"}},
        {"{\"ai.workload/profile\":\"x-\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload/profile: invalid profile name \"x-\" (lowercase letters, digits and '-', at most 63 "
          "characters); ignored"}},
        {"{\"ai.workload/profile\":\"a123456789012345678901234567890123456789012345678901234567890bc\"}",
         CLASS_DEFAULT,
         "a123456789012345678901234567890123456789012345678901234567890bc",
         0,
         0,
         {NULL}},
        {"{\"ai.workload/profile\":\"a123456789012345678901234567890123456789012345678901234567890bcd\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload/profile: invalid profile name "
          "\"a123456789012345678901234567890123456789012345678901234567890bcd\" (lowercase letters, digits and "
          "'-', at most 63 characters); ignored"}},
        {"{\"ai.workload/profile\":true}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload/profile: value is not a string; ignored"}},
        {"{\"kubernetes.io/egress-bandwidth\":\"10M\",\"kubernetes.io/ingress-bandwidth\":\"1G\"}",
         CLASS_DEFAULT,
         "",
         10000000,
         1000000000,
         {NULL}},
        {"{\"ai.workload\":\"inference\",\"kubernetes.io/egress-bandwidth\":\"10Mbps\"}",
         CLASS_INFERENCE,
         "",
         0,
         0,
         {"kubernetes.io/egress-bandwidth: invalid quantity \"10Mbps\": unknown suffix \"bps\"; limit ignored"}},
        {"{\"kubernetes.io/ingress-bandwidth\":\"500\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"kubernetes.io/ingress-bandwidth: bandwidth \"500\" is below the minimum 1000 bit/s; limit ignored"}},
        {"{\"kubernetes.io/ingress-bandwidth\":1000000}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"kubernetes.io/ingress-bandwidth: value is not a string; limit ignored"}},
        /* every annotation wrong at once: four warnings, in a fixed order */
        {"{\"kubernetes.io/ingress-bandwidth\":\"-1\",\"kubernetes.io/egress-bandwidth\":\"x\","
         "\"ai.workload/profile\":\"A\",\"ai.workload\":\"gpu\"}",
         CLASS_DEFAULT,
         "",
         0,
         0,
         {"ai.workload: invalid value \"gpu\" (accepted: inference, training); using class default",
          "ai.workload/profile: invalid profile name \"A\" (lowercase letters, digits and '-', at most 63 "
          "characters); ignored",
          "kubernetes.io/egress-bandwidth: invalid quantity \"x\": expected a number (digits, optionally with a "
          "fraction); limit ignored",
          "kubernetes.io/ingress-bandwidth: invalid quantity \"-1\": negative values are not allowed; limit "
          "ignored"}},
};

TEST(annotations_table)
{
	for (size_t i = 0; i < ARRAY_SIZE(annots); i++) {
		_cleanup_json_ cJSON *j = t_json(annots[i].json);
		struct error e = {0};
		struct workload w;
		unsigned n_warn = 0;

		memset(&w, 0xaa, sizeof(w));
		CHECK_INT(workload_from_annotations(j, &w, &e), 0);
		while (n_warn < WORKLOAD_WARN_MAX && annots[i].warn[n_warn])
			n_warn++;
		if (w.class != annots[i].class || w.n_warn != n_warn)
			fprintf(stderr, "  case %zu: %s\n", i, annots[i].json);
		CHECK_INT(w.class, annots[i].class);
		CHECK_STR(w.profile, annots[i].profile);
		CHECK_INT(w.egress_bps, annots[i].egress_bps);
		CHECK_INT(w.ingress_bps, annots[i].ingress_bps);
		CHECK_INT(w.n_warn, n_warn);
		for (unsigned k = 0; k < n_warn && k < w.n_warn; k++)
			CHECK_STR(w.warn[k], annots[i].warn[k]);
	}
}

TEST(annotations_null_and_non_object)
{
	struct workload w;
	struct error e = {0};
	_cleanup_json_ cJSON *arr = t_json("[\"ai.workload\"]");
	_cleanup_json_ cJSON *str = t_json("\"inference\"");

	memset(&w, 0xaa, sizeof(w));
	CHECK_INT(workload_from_annotations(NULL, &w, &e), 0);
	CHECK_INT(w.class, CLASS_DEFAULT);
	CHECK_STR(w.profile, "");
	CHECK_INT(w.n_warn, 0);
	CHECK_INT(w.egress_bps, 0);
	CHECK_INT(w.ingress_bps, 0);

	CHECK_INT(workload_from_annotations(arr, &w, &e), -EINVAL);
	CHECK_STR(e.msg, "annotations: expected a JSON object");
	CHECK_INT(e.errnum, EINVAL); /* the errno, unclassified: CNI codes are cni/'s */
	CHECK_INT(e.code, 0);
	CHECK_INT(workload_from_annotations(str, &w, NULL), -EINVAL);
}

TEST(annotation_warning_bounded)
{
	/* A hostile value: long, with control characters. The warning stays
	 * printable and within WORKLOAD_WARN_LEN. */
	char big[4096 + 64];
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	struct workload w;

	memset(big, '\x07', 4096);
	big[4096] = '\0';
	cJSON_AddStringToObject(j, "ai.workload", big);
	CHECK_INT(workload_from_annotations(j, &w, NULL), 0);
	CHECK_INT(w.n_warn, 1);
	CHECK(strlen(w.warn[0]) < WORKLOAD_WARN_LEN);
	CHECK_CONTAINS(w.warn[0], "ai.workload: invalid value \"\\x07\\x07");
	CHECK_CONTAINS(w.warn[0], "...\" (accepted: inference, training); using class default");
	for (const char *c = w.warn[0]; *c; c++)
		CHECK(*c >= 0x20 && *c < 0x7f);
}

TEST(add_warning_bounded)
{
	struct workload w = {0};

	for (int i = 0; i < WORKLOAD_WARN_MAX + 3; i++)
		workload_add_warning(&w, "warning %d", i);
	CHECK_INT(w.n_warn, WORKLOAD_WARN_MAX);
	CHECK_STR(w.warn[0], "warning 0");
	CHECK_STR(w.warn[WORKLOAD_WARN_MAX - 1], "warning 3");

	/* long warnings are cut, terminated */
	memset(&w, 0, sizeof(w));
	workload_add_warning(&w, "%0300d", 7);
	CHECK_INT(w.n_warn, 1);
	CHECK_INT(strlen(w.warn[0]), WORKLOAD_WARN_LEN - 1);
	workload_add_warning(NULL, "ignored");
}

static const struct {
	const char *json;
	int r;
	uint64_t egress_bps, ingress_bps; /* after applying on top of 5M/7M */
	const char *msg;
} runtime_bw[] = {
        {"null", 0, 5000000, 7000000, ""},
        {"{}", 0, 5000000, 7000000, ""},
        {"{\"ingressRate\":1000000,\"egressRate\":2000000,\"ingressBurst\":4294967295,\"egressBurst\":4294967295}", 0,
         2000000, 1000000, ""},
        {"{\"egressRate\":2000000}", 0, 2000000, 7000000, ""},
        {"{\"ingressRate\":0,\"egressRate\":0}", 0, 5000000, 7000000, ""},
        {"{\"egressRate\":1e9}", 0, 1000000000, 7000000, ""},
        {"{\"egressRate\":1000000000000}", 0, 1000000000000ULL, 7000000, ""},
        {"{\"futureField\":true,\"egressRate\":3000}", 0, 3000, 7000000, ""},
        {"[]", -EINVAL, 5000000, 7000000, "runtimeConfig.bandwidth: expected a JSON object"},
        {"{\"egressRate\":\"10M\"}", -EINVAL, 5000000, 7000000,
         "runtimeConfig.bandwidth.egressRate: expected a number"},
        {"{\"egressRate\":1.5e6,\"ingressRate\":1000.5}", -EINVAL, 5000000, 7000000,
         "runtimeConfig.bandwidth.ingressRate: 1000.5 is not a whole number"},
        {"{\"ingressRate\":-1}", -ERANGE, 5000000, 7000000, "runtimeConfig.bandwidth.ingressRate: -1 is negative"},
        {"{\"ingressRate\":999}", -ERANGE, 5000000, 7000000,
         "runtimeConfig.bandwidth.ingressRate: 999 is below the minimum 1000"},
        {"{\"egressRate\":1000000000001}", -ERANGE, 5000000, 7000000,
         "runtimeConfig.bandwidth.egressRate: 1000000000001 is above the maximum 1000000000000"},
        {"{\"egressRate\":1e300}", -ERANGE, 5000000, 7000000,
         "runtimeConfig.bandwidth.egressRate: 1e+300 is above the maximum 1000000000000"},
        {"{\"egressBurst\":-5}", -ERANGE, 5000000, 7000000, "runtimeConfig.bandwidth.egressBurst: -5 is negative"},
        {"{\"egressBurst\":0.5,\"egressRate\":2000000}", -EINVAL, 5000000, 7000000,
         "runtimeConfig.bandwidth.egressBurst: 0.5 is not a whole number"},
        {"{\"ingressBurst\":\"big\"}", -EINVAL, 5000000, 7000000,
         "runtimeConfig.bandwidth.ingressBurst: expected a number"},
};

TEST(runtime_bandwidth_table)
{
	for (size_t i = 0; i < ARRAY_SIZE(runtime_bw); i++) {
		_cleanup_json_ cJSON *j = t_json(runtime_bw[i].json);
		struct workload w = {.class = CLASS_TRAINING, .egress_bps = 5000000, .ingress_bps = 7000000};
		struct error e = {0};
		int r = workload_apply_runtime_bandwidth(j, &w, &e);

		if (r != runtime_bw[i].r)
			fprintf(stderr, "  case %zu: %s -> %s\n", i, runtime_bw[i].json, e.msg);
		CHECK_INT(r, runtime_bw[i].r);
		CHECK_STR(e.msg, runtime_bw[i].msg);
		/* all-or-nothing: a failure changes nothing */
		CHECK_INT(w.egress_bps, runtime_bw[i].egress_bps);
		CHECK_INT(w.ingress_bps, runtime_bw[i].ingress_bps);
		CHECK_INT(w.class, CLASS_TRAINING);
	}
	CHECK_INT(workload_apply_runtime_bandwidth(NULL, NULL, NULL), 0);
}

/* ai.workload/bulk: "true" or "false"; anything else is ignored with a
 * warning naming the value. */
TEST(annotation_bulk)
{
	static const struct {
		const char *json;
		bool bulk;
		const char *warn;
	} cases[] = {
	        {"{\"ai.workload\":\"inference\",\"ai.workload/bulk\":\"true\"}", true, NULL},
	        {"{\"ai.workload\":\"inference\",\"ai.workload/bulk\":\"false\"}", false, NULL},
	        {"{\"ai.workload\":\"inference\"}", false, NULL},
	        {"{\"ai.workload/bulk\":\"yes\"}", false,
	         "ai.workload/bulk: invalid value \"yes\" (accepted: \"true\", \"false\"); ignored"},
	        {"{\"ai.workload/bulk\":true}", false,
	         "ai.workload/bulk: invalid value (not a string) (accepted: \"true\", \"false\"); ignored"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_json_ cJSON *a = t_json(cases[i].json);
		struct workload w;

		CHECK_INT(workload_from_annotations(a, &w, NULL), 0);
		CHECK_INT(w.bulk, cases[i].bulk);
		CHECK_INT(w.n_warn, cases[i].warn ? 1 : 0);
		if (cases[i].warn && w.n_warn)
			CHECK_STR(w.warn[0], cases[i].warn);
	}
}
