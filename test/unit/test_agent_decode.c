/* test_agent_decode.c — decoding of watch events, Pods and PodLists: every
 * event type, 410 -> relist, identity errors with exact messages, best-effort
 * fields with warnings, annotations, IPs, GPU quantities, lists. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>

#include "../../agent/kube/decode.h"
#include "t.h"

/* JSON with ' for " (readable tables); values here never contain a quote. */
static cJSON *jparse(const char *sq)
{
	char *s = strdup(sq);
	cJSON *j;
	for (char *p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	j = cJSON_Parse(s);
	if (!j)
		fprintf(stderr, "  bad test JSON: %s\n", s);
	free(s);
	return j;
}

/* The decoders on the JSON sq (jparse), the parsed tree freed again (the
 * decoded values own their memory). */
static int pod_decode(const char *sq, struct kube_pod *ret, struct error *err)
{
	cJSON *j = jparse(sq);
	int r = kube_pod_decode(j, ret, err);

	cJSON_Delete(j);
	return r;
}

static int event_decode(const char *sq, struct kube_event *ret, struct error *err)
{
	cJSON *j = jparse(sq);
	int r = kube_event_decode(j, ret, err);

	cJSON_Delete(j);
	return r;
}

static int pod_list_decode(const char *sq, struct kube_pod_list *ret, struct error *err)
{
	cJSON *j = jparse(sq);
	int r = kube_pod_list_decode(j, ret, err);

	cJSON_Delete(j);
	return r;
}

#define META "'metadata':{'namespace':'default','name':'web-0','uid':'6f1c-aa','resourceVersion':'42'"

static const char full_pod[] =
        "{'kind':'Pod','apiVersion':'v1','metadata':{'name':'trainer-1','namespace':'ml','uid':'4f0c2a1e-9b7d',"
        "'resourceVersion':'1234','deletionTimestamp':'2024-05-01T10:00:00Z','labels':{'app':'x'},"
        "'annotations':{'ai.workload':'training','ai.workload/profile':'training-dctcp',"
        "'kubernetes.io/ingress-bandwidth':'1G','kubernetes.io/egress-bandwidth':'500M','other/a':'1','other/b':'2'}},"
        "'spec':{'nodeName':'gpu-node-1','hostNetwork':false,'containers':[{'name':'a','resources':{'requests':"
        "{'nvidia.com/gpu':'2','cpu':'1'},'limits':{'nvidia.com/gpu':'2'}}},{'name':'b','resources':{'limits':"
        "{'amd.com/gpu':'1'}}},{'name':'c'}]},"
        "'status':{'phase':'Running','podIP':'10.244.1.5','podIPs':[{'ip':'10.244.1.5'},{'ip':'fd00:10:244:1::5'}]}}";

TEST(pod_full)
{
	struct kube_pod pod;
	struct error e = {0};
	char buf[64];

	CHECK_INT(pod_decode(full_pod, &pod, &e), 0);
	CHECK_STR(pod.namespace_, "ml");
	CHECK_STR(pod.name, "trainer-1");
	CHECK_STR(pod.uid, "4f0c2a1e-9b7d");
	CHECK_STR(pod.resource_version, "1234");
	CHECK_STR(pod.node_name, "gpu-node-1");
	CHECK_INT(pod.phase, KUBE_POD_PHASE_RUNNING);
	CHECK_STR(kube_pod_phase_name(pod.phase), "Running");
	CHECK(pod.deleting);
	CHECK(!pod.host_network);
	CHECK_INT(cJSON_GetArraySize(pod.annotations), 4);
	CHECK_STR(cJSON_GetObjectItem(pod.annotations, "ai.workload")->valuestring, "training");
	CHECK_STR(cJSON_GetObjectItem(pod.annotations, "ai.workload/profile")->valuestring, "training-dctcp");
	CHECK_STR(cJSON_GetObjectItem(pod.annotations, "kubernetes.io/ingress-bandwidth")->valuestring, "1G");
	CHECK_STR(cJSON_GetObjectItem(pod.annotations, "kubernetes.io/egress-bandwidth")->valuestring, "500M");
	CHECK_INT(pod.n_annotations_other, 2);
	CHECK_INT(pod.n_ips, 2);
	CHECK_INT(pod.ips[0].family, AF_INET);
	CHECK_STR(kube_ip_format(&pod.ips[0], buf, sizeof(buf)), "10.244.1.5");
	CHECK_INT(pod.ips[1].family, AF_INET6);
	CHECK_STR(kube_ip_format(&pod.ips[1], buf, sizeof(buf)), "fd00:10:244:1::5");
	CHECK_INT(pod.gpus, 3);
	CHECK_INT(pod.n_warn, 0);
	kube_pod_done(&pod);
	CHECK(pod.annotations == NULL);
}

TEST(pod_minimal)
{
	struct kube_pod pod;

	CHECK_INT(pod_decode("{" META "}}", &pod, NULL), 0);
	CHECK_STR(pod.name, "web-0");
	CHECK_STR(pod.node_name, "");
	CHECK_INT(pod.phase, KUBE_POD_PHASE_UNSET);
	CHECK(!pod.deleting && !pod.host_network);
	CHECK(pod.annotations == NULL);
	CHECK_INT(pod.n_ips, 0);
	CHECK_INT(pod.gpus, 0);
	CHECK_INT(pod.n_warn, 0);
	kube_pod_done(&pod);
}

TEST(pod_identity_errors)
{
	static const struct {
		const char *json;
		const char *msg;
	} cases[] = {
	        {"{'kind':'Pod'}", "pod: metadata: missing"},
	        {"{'metadata':[]}", "pod: metadata: expected an object, got an array"},
	        {"{'kind':'Node'," META "}}", "pod: kind: expected \"Pod\", got \"Node\""},
	        {"{'kind':7," META "}}", "pod: kind: expected a string, got a number (7)"},
	        {"{'metadata':{'name':'a','uid':'u','resourceVersion':'1'}}", "pod: metadata.namespace: missing"},
	        {"{'metadata':{'namespace':null,'name':'a'}}", "pod: metadata.namespace: missing"},
	        {"{'metadata':{'namespace':'Default','name':'a'}}",
	         "pod: metadata.namespace: \"Default\" is not a valid namespace (DNS-1123 label)"},
	        {"{'metadata':{'namespace':'a-','name':'a'}}",
	         "pod: metadata.namespace: \"a-\" is not a valid namespace (DNS-1123 label)"},
	        {"{'metadata':{'namespace':'default','name':5}}",
	         "pod: metadata.name: expected a string, got a number (5)"},
	        {"{'metadata':{'namespace':'default','name':'web..0'}}",
	         "pod: metadata.name: \"web..0\" is not a valid pod name (DNS-1123 subdomain)"},
	        {"{'metadata':{'namespace':'default','name':'a b\\n'}}",
	         "pod: metadata.name: \"a b\\x0a\" is not a valid pod name (DNS-1123 subdomain)"},
	        {"{'metadata':{'namespace':'default','name':'web','resourceVersion':'1'}}",
	         "pod default/web: metadata.uid: missing"},
	        {"{'metadata':{'namespace':'default','name':'web','uid':{}}}",
	         "pod default/web: metadata.uid: expected a string, got an object"},
	        {"{'metadata':{'namespace':'default','name':'web','uid':'u/../x','resourceVersion':'1'}}",
	         "pod default/web: metadata.uid: \"u/../x\" is not a valid uid"},
	        {"{'metadata':{'namespace':'default','name':'web','uid':'u'}}",
	         "pod default/web: metadata.resourceVersion: missing"},
	        {"{'metadata':{'namespace':'default','name':'web','uid':'u','resourceVersion':12}}",
	         "pod default/web: metadata.resourceVersion: expected a string, got a number (12)"},
	        {"{'metadata':{'namespace':'default','name':'web','uid':'u','resourceVersion':'1&watch=0'}}",
	         "pod default/web: metadata.resourceVersion: \"1&watch=0\" is not a valid resourceVersion"},
	        {"{'metadata':{'namespace':'default','name':'web','uid':'u','resourceVersion':''}}",
	         "pod default/web: metadata.resourceVersion: \"\" is not a valid resourceVersion"},
	        {"[1]", "pod: object: expected an object, got an array"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_pod pod;
		struct error e = {0};

		memset(&pod, 0x5a, sizeof(pod));
		CHECK_INT(pod_decode(cases[i].json, &pod, &e), -EINVAL);
		CHECK_STR(e.msg, cases[i].msg);
		CHECK_INT(e.code, 0); /* CNI codes are the plugin's (cni/), never the agent's */
		CHECK_INT(e.errnum, EINVAL);
		CHECK_INT(pod.namespace_[0], 0x5a); /* ret untouched on failure */
	}
}

/* A pod of namespace d named %s. */
#define POD_NAMED "{'metadata':{'namespace':'d','name':'%s','uid':'u','resourceVersion':'1'}}"

TEST(pod_name_length_limits)
{
	char name[300], json[600];
	struct kube_pod pod;
	struct error e = {0};

	/* 253 = the longest valid name (labels of 63 joined by dots) */
	memset(name, 'a', 253);
	name[63] = name[127] = name[191] = '.';
	name[253] = '\0';
	snprintf(json, sizeof(json), POD_NAMED, name);
	CHECK_INT(pod_decode(json, &pod, &e), 0);
	CHECK_STR(pod.name, name);
	kube_pod_done(&pod);

	name[253] = 'a';
	name[254] = '\0';
	snprintf(json, sizeof(json), POD_NAMED, name);
	CHECK_INT(pod_decode(json, &pod, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "pod: metadata.name: \"aaaa");
	CHECK_CONTAINS(e.msg, "...\" is not a valid pod name");

	/* pod names are DNS subdomains: a label between dots may be longer
	 * than 63 characters (Tekton, Argo); only the total is limited */
	memset(name, 'b', 100);
	memcpy(name + 100, ".run.x", 7);
	snprintf(json, sizeof(json), POD_NAMED, name);
	CHECK_INT(pod_decode(json, &pod, &e), 0);
	CHECK_STR(pod.name, name);
	kube_pod_done(&pod);

	/* a 64-character label is not a namespace */
	memset(name, 'n', 64);
	name[64] = '\0';
	snprintf(json, sizeof(json), "{'metadata':{'namespace':'%s','name':'a'}}", name);
	CHECK_INT(pod_decode(json, &pod, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "is not a valid namespace");
}

/* Bad optional fields: the pod decodes, the field keeps its default, a warning says why. */
TEST(pod_best_effort_fields)
{
	static const struct {
		const char *json;
		const char *warn;
		bool host_network;
		int phase;
	} cases[] = {
	        {"{" META "},'spec':{'hostNetwork':'true'}}",
	         "spec.hostNetwork: expected a boolean, got a string (\"true\"); ignored", false, 0},
	        {"{" META "},'spec':{'hostNetwork':true}}", NULL, true, 0},
	        {"{" META "},'spec':[]}", "spec: expected an object, got an array; ignored", false, 0},
	        {"{" META "},'spec':{'nodeName':'Bad_Node'}}",
	         "spec.nodeName: \"Bad_Node\" is not a valid node name; ignored", false, 0},
	        {"{" META "},'spec':{'nodeName':1}}", "spec.nodeName: expected a string, got a number (1); ignored",
	         false, 0},
	        {"{" META "},'status':{'phase':7}}", "status.phase: expected a string, got a number (7); ignored",
	         false, KUBE_POD_PHASE_UNSET},
	        {"{" META "},'status':{'phase':'Sleeping'}}",
	         "status.phase: unknown value \"Sleeping\", taken as Unknown", false, KUBE_POD_PHASE_UNKNOWN},
	        {"{" META "},'status':{'phase':'Succeeded'}}", NULL, false, KUBE_POD_PHASE_SUCCEEDED},
	        {"{" META "},'status':'Running'}", "status: expected an object, got a string (\"Running\"); ignored",
	         false, 0},
	        {"{" META ",'deletionTimestamp':5}}",
	         "metadata.deletionTimestamp: expected a timestamp string, got a number (5); ignored", false, 0},
	        {"{" META ",'annotations':['ai.workload']}}",
	         "metadata.annotations: expected an object, got an array; ignored", false, 0},
	        {"{" META ",'annotations':{'ai.workload':3}}}",
	         "ai.workload: expected a string, got a number (3); ignored", false, 0},
	        {"{" META "},'status':{'podIPs':{'ip':'10.0.0.1'}}}",
	         "status.podIPs: expected an array, got an object; ignored", false, 0},
	        {"{" META "},'status':{'podIPs':['10.0.0.1']}}",
	         "status.podIPs[0].ip: expected an object, got a string (\"10.0.0.1\"); ignored", false, 0},
	        {"{" META "},'spec':{'containers':{}}}", "spec.containers: expected an array, got an object; ignored",
	         false, 0},
	        {"{" META "},'spec':{'containers':[{'resources':7}]}}",
	         "spec.containers[0].resources: expected an object, got a number (7); ignored", false, 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_pod pod;
		struct error e = {0};

		CHECK_INT(pod_decode(cases[i].json, &pod, &e), 0);
		if (cases[i].warn) {
			CHECK_INT(pod.n_warn, 1);
			CHECK_STR(pod.warn[0], cases[i].warn);
		} else {
			CHECK_INT(pod.n_warn, 0);
		}
		CHECK_INT(pod.host_network, cases[i].host_network);
		CHECK_INT(pod.phase, cases[i].phase);
		CHECK_STR(pod.name, "web-0");
		kube_pod_done(&pod);
	}
}

TEST(annotations_kept_counted_bounded)
{
	/* 100 other annotations, a kept one of exactly 4096 bytes, one of 5000 */
	cJSON *j = jparse("{" META "}}");
	cJSON *ann = cJSON_AddObjectToObject(cJSON_GetObjectItem(j, "metadata"), "annotations");
	char *v4096 = malloc(4097), *v5000 = malloc(5001);
	struct kube_pod pod;

	for (int i = 0; i < 100; i++) {
		char k[32];
		snprintf(k, sizeof(k), "example.com/a%d", i);
		cJSON_AddStringToObject(ann, k, "v");
	}
	memset(v4096, 'p', 4096);
	v4096[4096] = '\0';
	memset(v5000, 'w', 5000);
	v5000[5000] = '\0';
	cJSON_AddStringToObject(ann, "ai.workload/profile", v4096);
	cJSON_AddStringToObject(ann, "ai.workload", v5000);
	cJSON_AddStringToObject(ann, "kubernetes.io/egress-bandwidth", "10M");

	CHECK_INT(kube_pod_decode(j, &pod, NULL), 0);
	CHECK_INT(pod.n_annotations_other, 100);
	CHECK_INT(cJSON_GetArraySize(pod.annotations), 2);
	CHECK_STR(cJSON_GetObjectItem(pod.annotations, "ai.workload/profile")->valuestring, v4096);
	CHECK(cJSON_GetObjectItem(pod.annotations, "ai.workload") == NULL);
	CHECK_STR(cJSON_GetObjectItem(pod.annotations, "kubernetes.io/egress-bandwidth")->valuestring, "10M");
	CHECK_INT(pod.n_warn, 1);
	CHECK_STR(pod.warn[0], "annotation ai.workload: value of 5000 bytes exceeds 4096 "
	                       "(\"wwwwwwwwwwwwwwwwwwwwwwww...\"); ignored");
	kube_pod_done(&pod);
	cJSON_Delete(j);
	free(v4096);
	free(v5000);
}

TEST(annotations_duplicate_key_last_wins)
{
	/* cJSON keeps duplicate keys; Go (the API server) would keep the last */
	static const char json[] = "{" META ",'annotations':{'ai.workload':'inference','ai.workload':'training'}}}";
	struct kube_pod pod;

	CHECK_INT(pod_decode(json, &pod, NULL), 0);
	CHECK_INT(cJSON_GetArraySize(pod.annotations), 1);
	CHECK_STR(cJSON_GetObjectItem(pod.annotations, "ai.workload")->valuestring, "training");
	CHECK_INT(pod.n_warn, 1);
	CHECK_STR(pod.warn[0], "annotation ai.workload: duplicate key, the last value wins");
	kube_pod_done(&pod);
}

TEST(pod_ips)
{
	static const struct {
		const char *status;
		const char *ips; /* formatted, space separated */
		unsigned n_warn;
		const char *warn0;
	} cases[] = {
	        {"{'podIP':'10.1.2.3'}", "10.1.2.3", 0, NULL},
	        {"{'podIP':'fd00::1','podIPs':[{'ip':'fd00::1'}]}", "fd00::1", 0, NULL},
	        {"{'podIP':'10.1.2.3','podIPs':[{'ip':'10.1.2.3'},{'ip':'fd00::3'}]}", "10.1.2.3 fd00::3", 0, NULL},
	        {"{'podIP':'','podIPs':[]}", "", 0, NULL},
	        {"{'podIP':null}", "", 0, NULL},
	        {"{'podIPs':[{'ip':'::ffff:10.0.0.1'}]}", "::ffff:10.0.0.1", 0, NULL},
	        {"{'podIPs':[{'ip':'10.0.0.1'},{'ip':'1.2.3'},{'ip':'fe80::1%eth0'},{'ip':'::1'}]}", "10.0.0.1 ::1", 2,
	         "status.podIPs[1].ip: \"1.2.3\" is not an IPv4 or IPv6 address; ignored"},
	        {"{'podIPs':[{'ip':'10.0.0.1'},{'ip':'10.0.0.2'},{'ip':'10.0.0.3'},{'ip':'fd00::4'},{'ip':'10.0.0.5'},"
	         "{'ip':'10.0.0.6'},{'ip':'10.0.0.7'},{'ip':'10.0.0.8'},{'ip':'10.0.0.9'},{'ip':'10.0.0.10'}]}",
	         "10.0.0.1 10.0.0.2 10.0.0.3 fd00::4", 1, "status.podIPs: 10 addresses, kept the first 4"},
	        {"{'podIPs':[{'ip':7}]}", "", 1,
	         "status.podIPs[0].ip: expected an IP address string, got a number (7); ignored"},
	        {"{'podIPs':[{}]}", "", 1, "status.podIPs[0].ip: expected an IP address string, got nothing; ignored"},
	        {"{'podIP':'10.0.0.0001'}", "", 1,
	         "status.podIP: \"10.0.0.0001\" is not an IPv4 or IPv6 address; ignored"},
	        {"{'podIP':'1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa'}", "", 1,
	         "status.podIP: \"1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa\" is not an IPv4 or IPv6 address; "
	         "ignored"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char json[1024], got[256] = "";
		struct kube_pod pod;

		snprintf(json, sizeof(json), "{" META "},'status':%s}", cases[i].status);
		CHECK_INT(pod_decode(json, &pod, NULL), 0);
		for (unsigned k = 0; k < pod.n_ips; k++) {
			char b[INET6_ADDRSTRLEN];
			size_t n = strlen(got);
			snprintf(got + n, sizeof(got) - n, "%s%s", k ? " " : "",
			         kube_ip_format(&pod.ips[k], b, sizeof(b)));
		}
		CHECK_STR(got, cases[i].ips);
		CHECK_INT(pod.n_warn, cases[i].n_warn);
		if (cases[i].warn0)
			CHECK_STR(pod.warn[0], cases[i].warn0);
		kube_pod_done(&pod);
	}
}

TEST(quantity_parse_count)
{
	static const struct {
		const char *s;
		int ret;
		uint64_t value;
		const char *msg;
	} cases[] = {
	        {"0", 0, 0, ""},
	        {"2", 0, 2, ""},
	        {"+3", 0, 3, ""},
	        {"007", 0, 7, ""},
	        {"1k", 0, 1000, ""},
	        {"1Ki", 0, 1024, ""},
	        {"2000m", 0, 2, ""},
	        {"4e0", 0, 4, ""},
	        {"1e1", 0, 10, ""},
	        {"1E1", 0, 10, ""},
	        {"1.0", 0, 1, ""},
	        {"2.", 0, 2, ""},
	        {"0.5k", 0, 500, ""},
	        {"1.000000000000000000000000000000000000000", 0, 1, ""},
	        {"100e-2", 0, 1, ""},
	        {"1024", 0, 1024, ""},
	        {"2.5", -EINVAL, 0, "\"2.5\" is not a whole number"},
	        {"500m", -EINVAL, 0, "\"500m\" is not a whole number"},
	        {"1e-1", -EINVAL, 0, "\"1e-1\" is not a whole number"},
	        {"-1", -ERANGE, 0, "\"-1\" is negative"},
	        {"1025", -ERANGE, 0, "\"1025\" exceeds 1024"},
	        {"2Ki", -ERANGE, 0, "\"2Ki\" exceeds 1024"},
	        {"1E", -ERANGE, 0, "\"1E\" exceeds 1024"},
	        {"1Ei", -ERANGE, 0, "\"1Ei\" exceeds 1024"},
	        {"9e40", -ERANGE, 0, "\"9e40\" exceeds 1024"},
	        {"99999999999999999999999999999999", -EINVAL, 0,
	         "invalid quantity \"99999999999999999999999999999999\": too many significant digits (at most 20)"},
	        {"", -EINVAL, 0, "invalid quantity \"\": empty value"},
	        {".", -EINVAL, 0, "invalid quantity \".\": expected a number (digits, optionally with a fraction)"},
	        {"k", -EINVAL, 0, "invalid quantity \"k\": expected a number (digits, optionally with a fraction)"},
	        {"1x", -EINVAL, 0, "invalid quantity \"1x\": unknown suffix \"x\""},
	        {"1 ", -EINVAL, 0, "invalid quantity \"1 \": whitespace is not allowed"},
	        {" 1", -EINVAL, 0, "invalid quantity \" 1\": whitespace is not allowed"},
	        {"1kk", -EINVAL, 0, "invalid quantity \"1kk\": unknown suffix \"k\""},
	        {"1e", -EINVAL, 0, "invalid quantity \"1e\": unknown suffix \"e\""},
	        {"1e99", -ERANGE, 0, "\"1e99\" exceeds 1024"}, /* a valid quantity, too large */
	        {"2000000000n", 0, 2, ""},                     /* nano and micro are quantities too */
	        {"3000000u", 0, 3, ""},
	        {"1e2x", -EINVAL, 0, "invalid quantity \"1e2x\": unknown suffix \"x\""},
	        {"0x10", -EINVAL, 0, "invalid quantity \"0x10\": unknown suffix \"x10\""},
	        {"1..2", -EINVAL, 0, "invalid quantity \"1..2\": unknown suffix \".2\""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t v = 12345;
		struct error e = {0};
		int r = kube_quantity_parse_count(cases[i].s, 1024, &v, &e);
		CHECK_INT(r, cases[i].ret);
		CHECK_STR(e.msg, cases[i].msg);
		if (r == 0)
			CHECK_INT(v, cases[i].value);
		else
			CHECK_INT(v, 12345);
		if (r != cases[i].ret)
			fprintf(stderr, "  case %s\n", cases[i].s);
	}
}

TEST(pod_gpus)
{
	static const struct {
		const char *containers;
		uint32_t gpus;
		const char *warn; /* first warning, NULL = none */
	} cases[] = {
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'2'}}}]", 2, NULL},
	        {"[{'resources':{'limits':{'nvidia.com/gpu':'4'}}}]", 4, NULL},
	        /* requests win over limits */
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'1'},'limits':{'nvidia.com/gpu':'8'}}}]", 1, NULL},
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'1','amd.com/gpu':'2'}}},{'resources':{'limits':"
	         "{'amd.com/gpu':'3'}}},{'name':'nogpu','resources':{'requests':{'cpu':'2'}}}]",
	         6, NULL},
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'2.5'}}}]", 0,
	         "spec.containers[0].resources.requests[nvidia.com/gpu]: \"2.5\" is not a whole number; ignored"},
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'1k'}}}]", 1000, NULL},
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'2k'}}}]", 0,
	         "spec.containers[0].resources.requests[nvidia.com/gpu]: \"2k\" exceeds 1024; ignored"},
	        {"[{'resources':{'limits':{'amd.com/gpu':2}}}]", 0,
	         "spec.containers[0].resources.limits[amd.com/gpu]: expected a quantity string, got a number (2); "
	         "ignored"},
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'-1'}}},{'resources':{'requests':{'nvidia.com/"
	         "gpu':'3'}}}]",
	         3, "spec.containers[0].resources.requests[nvidia.com/gpu]: \"-1\" is negative; ignored"},
	        {"[{'resources':{'requests':{'nvidia.com/gpu':'1000'}}},{'resources':{'requests':{'nvidia.com/"
	         "gpu':'100'}}}]",
	         1000,
	         "spec.containers[1].resources.requests[nvidia.com/gpu]: the pod's total exceeds 1024 GPUs; ignored"},
	        {"[]", 0, NULL},
	        {"null", 0, NULL},
	        {"[7,'x',null]", 0, NULL},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char json[2048];
		struct kube_pod pod;

		snprintf(json, sizeof(json), "{" META "},'spec':{'containers':%s}}", cases[i].containers);
		CHECK_INT(pod_decode(json, &pod, NULL), 0);
		CHECK_INT(pod.gpus, cases[i].gpus);
		if (cases[i].warn)
			CHECK_STR(pod.warn[0], cases[i].warn);
		else
			CHECK_INT(pod.n_warn, 0);
		kube_pod_done(&pod);
	}
}

TEST(warnings_bounded)
{
	/* 10 bad things: at most KUBE_POD_WARN_MAX kept, all counted */
	static const char json[] =
	        "{" META "},'status':{'podIPs':[{'ip':'a'},{'ip':'b'},{'ip':'c'},{'ip':'d'},{'ip':'e'},"
	        "{'ip':'f'},{'ip':'g'},{'ip':'h'},{'ip':'i'},{'ip':'j'}]}}";
	struct kube_pod pod;

	CHECK_INT(pod_decode(json, &pod, NULL), 0);
	CHECK_INT(pod.n_warn, 10);
	CHECK_STR(pod.warn[KUBE_POD_WARN_MAX - 1],
	          "status.podIPs[3].ip: \"d\" is not an IPv4 or IPv6 address; ignored");
	kube_pod_done(&pod);
}

TEST(event_types)
{
	static const struct {
		const char *json;
		enum kube_event_type type;
		const char *rv;
		int code;
		const char *reason;
		const char *message;
	} cases[] = {
	        {"{'type':'ADDED','object':{'kind':'Pod'," META "}}}", KUBE_EVENT_ADDED, "42", 0, "", ""},
	        {"{'type':'MODIFIED','object':{" META "}}}", KUBE_EVENT_MODIFIED, "42", 0, "", ""},
	        {"{'type':'DELETED','object':{" META ",'deletionTimestamp':'2024-01-01T00:00:00Z'}}}",
	         KUBE_EVENT_DELETED, "42", 0, "", ""},
	        {"{'type':'BOOKMARK','object':{'kind':'Pod','apiVersion':'v1','metadata':{'resourceVersion':'9001',"
	         "'annotations':{'k8s.io/initial-events-end':'true'}}}}",
	         KUBE_EVENT_BOOKMARK, "9001", 0, "", ""},
	        {"{'type':'ERROR','object':{'kind':'Status','apiVersion':'v1','metadata':{},'status':'Failure',"
	         "'message':'too old resource version: 1 (2)','reason':'Expired','code':410}}",
	         KUBE_EVENT_EXPIRED, "", 410, "Expired", "too old resource version: 1 (2)"},
	        {"{'type':'ERROR','object':{'kind':'Status','reason':'Gone','code':410}}", KUBE_EVENT_EXPIRED, "", 410,
	         "Gone", ""},
	        {"{'type':'ERROR','object':{'kind':'Status','status':'Failure','message':'etcdserver: request timed "
	         "out',"
	         "'reason':'InternalError','code':500}}",
	         KUBE_EVENT_ERROR, "", 500, "InternalError", "etcdserver: request timed out"},
	        {"{'type':'ERROR','object':{}}", KUBE_EVENT_ERROR, "", 0, "", ""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_event ev;
		struct error e = {0};

		CHECK_INT(event_decode(cases[i].json, &ev, &e), 0);
		CHECK_STR(e.msg, "");
		CHECK_INT(ev.type, cases[i].type);
		CHECK_STR(ev.resource_version, cases[i].rv);
		CHECK_INT(ev.status.code, cases[i].code);
		CHECK_STR(ev.status.reason, cases[i].reason);
		CHECK_STR(ev.status.message, cases[i].message);
		if (ev.type <= KUBE_EVENT_DELETED) {
			CHECK_STR(ev.pod.name, "web-0");
			CHECK_INT(ev.pod.deleting, ev.type == KUBE_EVENT_DELETED);
		}
		kube_event_done(&ev);
	}
	CHECK_STR(kube_event_type_name(KUBE_EVENT_EXPIRED), "EXPIRED");
	CHECK_INT(kube_event_type_from_name("EXPIRED"), _KUBE_EVENT_INVALID);
	CHECK_INT(kube_event_type_from_name("BOOKMARK"), KUBE_EVENT_BOOKMARK);
	CHECK_STR(kube_event_type_name(_KUBE_EVENT_INVALID), "invalid");
}

TEST(event_errors)
{
	static const struct {
		const char *json;
		const char *msg;
	} cases[] = {
	        {"{'object':{}}", "watch event: type: missing"},
	        {"{'type':1,'object':{}}", "watch event: type: expected a string, got a number (1)"},
	        {"{'type':'added','object':{}}",
	         "watch event: type: unknown value \"added\" (expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR)"},
	        {"{'type':'EXPIRED','object':{}}",
	         "watch event: type: unknown value \"EXPIRED\" (expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR)"},
	        {"{'type':'ADDED'}", "ADDED event: object: missing"},
	        {"{'type':'ADDED','object':'pod'}", "ADDED event: object: expected an object, got a string (\"pod\")"},
	        {"{'type':'MODIFIED','object':{'metadata':{'namespace':'default'}}}",
	         "MODIFIED pod: metadata.name: missing"},
	        {"{'type':'DELETED','object':{'metadata':{'namespace':'default','name':'x','uid':'u'}}}",
	         "DELETED pod default/x: metadata.resourceVersion: missing"},
	        {"{'type':'BOOKMARK','object':{'metadata':{}}}", "BOOKMARK event: metadata.resourceVersion: missing"},
	        {"{'type':'BOOKMARK','object':{}}", "BOOKMARK event: metadata: missing"},
	        {"{'type':'BOOKMARK','object':{'metadata':{'resourceVersion':'1 2'}}}",
	         "BOOKMARK event: metadata.resourceVersion: \"1 2\" is not a valid resourceVersion"},
	        {"{'type':'ERROR','object':{'kind':'Pod','code':410}}",
	         "ERROR event: kind: expected \"Status\", got \"Pod\""},
	        {"{'type':'ERROR','object':{'code':'410'}}",
	         "ERROR event: code: expected an integer status code (0-999), got a string (\"410\")"},
	        {"{'type':'ERROR','object':{'code':4.5}}",
	         "ERROR event: code: expected an integer status code (0-999), got a number (4.5)"},
	        {"{'type':'ERROR','object':{'code':1e300}}",
	         "ERROR event: code: expected an integer status code (0-999), got a number (1e+300)"},
	        {"{'type':'ERROR','object':{'message':[]}}", "ERROR event: message: expected a string, got an array"},
	        {"[]", "watch event: expected an object, got an array"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_event ev;
		struct error e = {0};

		CHECK_INT(event_decode(cases[i].json, &ev, &e), -EINVAL);
		CHECK_STR(e.msg, cases[i].msg);
	}
}

TEST(status_message_sanitized_and_bounded)
{
	char json[2048], *p;
	struct kube_event ev;
	struct error e = {0};
	int n;

	/* control bytes become '?'; a long message is cut on a UTF-8 boundary */
	n = snprintf(json, sizeof(json),
	             "{\"type\":\"ERROR\",\"object\":{\"code\":500,\"reason\":\"A\\u001b[31mB\",\"message\":\"");
	p = json + n;
	for (int i = 0; i < 300; i++) {
		memcpy(p, "\xc3\xa9", 2); /* é */
		p += 2;
	}
	snprintf(p, sizeof(json) - (size_t)(p - json), "\"}}");
	CHECK_INT(kube_event_decode_json(json, strlen(json), &ev, &e), 0);
	CHECK_STR(ev.status.reason, "A?[31mB");
	CHECK_INT(strlen(ev.status.message), 510);
	CHECK_INT((unsigned char)ev.status.message[509], 0xa9);
	kube_event_done(&ev);
}

TEST(event_decode_json)
{
	static const struct {
		const char *text;
		int ret;
		const char *msg;
	} cases[] = {
	        {"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}  \r\n", 0, ""},
	        {"{\"type\":", -EBADMSG, "watch event: invalid JSON at byte 7 near \":\""},
	        {"{\"type\":\"BOOKMARK\"} x", -EBADMSG, "watch event: trailing data after JSON at byte 20: \"x\""},
	        {"", -EBADMSG, "watch event: invalid JSON at byte 0 near \"\""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_event ev;
		struct error e = {0};
		CHECK_INT(kube_event_decode_json(cases[i].text, strlen(cases[i].text), &ev, &e), cases[i].ret);
		CHECK_STR(e.msg, cases[i].msg);
		if (cases[i].ret == 0)
			kube_event_done(&ev);
	}
	{
		/* not NUL-terminated: only len bytes are read */
		const char buf[] = {'{', '}', 'X'};
		struct kube_event ev;
		struct error e = {0};
		CHECK_INT(kube_event_decode_json(buf, 2, &ev, &e), -EINVAL);
		CHECK_STR(e.msg, "watch event: type: missing");
		CHECK_INT(kube_event_decode_json("{\"type\"\0:1}", 11, &ev, &e), -EBADMSG);
		CHECK_STR(e.msg, "watch event: NUL byte in JSON");
	}
}

TEST(pod_list)
{
	static const char json[] = "{'kind':'PodList','apiVersion':'v1','metadata':{'resourceVersion':'777','continue':"
	                           "'eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Nzc3fQ=='},'items':["
	                           "{" META "}},"
	                           "{'metadata':{'namespace':'default','name':'BAD'}},"
	                           "{'metadata':{'namespace':'ml','name':'t-1','uid':'u-2','resourceVersion':'700'},"
	                           "'status':{'podIP':'10.0.0.9'}},"
	                           "7]}";
	struct kube_pod_list list;
	struct error e = {0};

	CHECK_INT(pod_list_decode(json, &list, &e), 0);
	CHECK_STR(list.resource_version, "777");
	CHECK_STR(list.continue_token, "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Nzc3fQ==");
	CHECK_INT(list.n, 2);
	CHECK_STR(list.items[0].name, "web-0");
	CHECK_STR(list.items[1].namespace_, "ml");
	CHECK_INT(list.items[1].n_ips, 1);
	CHECK_INT(list.n_invalid, 2);
	CHECK_STR(list.first_invalid,
	          "items[1]: pod: metadata.name: \"BAD\" is not a valid pod name (DNS-1123 subdomain)");
	kube_pod_list_done(&list);
	CHECK_INT(list.n, 0);
}

TEST(pod_list_edge_cases)
{
	static const struct {
		const char *json;
		int ret;
		size_t n;
		const char *msg;
	} cases[] = {
	        {"{'kind':'PodList','metadata':{'resourceVersion':'1'},'items':[]}", 0, 0, ""},
	        {"{'metadata':{'resourceVersion':'1'},'items':null}", 0, 0, ""},
	        {"{'metadata':{'resourceVersion':'1'}}", 0, 0, ""},
	        {"{'kind':'List','metadata':{'resourceVersion':'1'},'items':[]}", -EINVAL, 0,
	         "PodList: kind: expected \"PodList\", got \"List\""},
	        {"{'items':[]}", -EINVAL, 0, "PodList: metadata: missing"},
	        {"{'metadata':{},'items':[]}", -EINVAL, 0, "PodList: metadata.resourceVersion: missing"},
	        {"{'metadata':{'resourceVersion':'1'},'items':{}}", -EINVAL, 0,
	         "PodList: items: expected an array, got an object"},
	        {"{'metadata':{'resourceVersion':'1','continue':'a b'},'items':[]}", -EINVAL, 0,
	         "PodList: metadata.continue: \"a b\" is not a valid continue token"},
	        {"{'metadata':{'resourceVersion':'1','continue':3},'items':[]}", -EINVAL, 0,
	         "PodList: metadata.continue: expected a string, got a number (3)"},
	        {"'x'", -EINVAL, 0, "PodList: expected an object, got a string (\"x\")"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kube_pod_list list;
		struct error e = {0};
		int r = pod_list_decode(cases[i].json, &list, &e);

		CHECK_INT(r, cases[i].ret);
		CHECK_STR(e.msg, cases[i].msg);
		if (r == 0) {
			CHECK_INT(list.n, cases[i].n);
			kube_pod_list_done(&list);
		}
	}
}

TEST(pod_list_too_many_items)
{
	cJSON *j = jparse("{'metadata':{'resourceVersion':'1'},'items':[]}");
	cJSON *items = cJSON_GetObjectItem(j, "items");
	struct kube_pod_list list;
	struct error e = {0};

	for (int i = 0; i <= KUBE_POD_LIST_ITEMS_MAX; i++)
		cJSON_AddItemToArray(items, cJSON_CreateObject());
	CHECK_INT(kube_pod_list_decode(j, &list, &e), -E2BIG);
	CHECK_STR(e.msg, "PodList: items: 4097 pods exceed the limit of 4096");
	cJSON_Delete(j);
}

TEST(pod_list_json)
{
	const char *text = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"3\"},\"items\":[{\"metadata\":"
	                   "{\"namespace\":\"a\",\"name\":\"b\",\"uid\":\"c\",\"resourceVersion\":\"2\"}}]}";
	struct kube_pod_list list;
	struct error e = {0};

	CHECK_INT(kube_pod_list_decode_json(text, strlen(text), &list, &e), 0);
	CHECK_INT(list.n, 1);
	CHECK_STR(list.items[0].uid, "c");
	kube_pod_list_done(&list);
	CHECK_INT(kube_pod_list_decode_json("{", 1, &list, &e), -EBADMSG);
	CHECK_STR(e.msg, "PodList: invalid JSON at byte 0 near \"{\"");
}

TEST(pod_move)
{
	struct kube_pod a, b;

	CHECK_INT(pod_decode(full_pod, &a, NULL), 0);
	kube_pod_move(&b, &a);
	CHECK(a.annotations == NULL);
	CHECK(b.annotations != NULL);
	CHECK_STR(b.name, "trainer-1");
	kube_pod_done(&a);
	kube_pod_done(&b);
}

TEST(quote)
{
	static const struct {
		const char *in;
		size_t len, max, size;
		const char *out;
	} cases[] = {
	        {"abc", 3, 64, 64, "\"abc\""},
	        {"a\"b\\c", 5, 64, 64, "\"a\\\"b\\\\c\""},
	        {"\x01\xff", 2, 64, 64, "\"\\x01\\xff\""},
	        {"abcdef", 6, 3, 64, "\"abc...\""},
	        {"abcdefghij", 10, 64, 12, "\"abcdef...\""},
	        {"a\0b", 3, 64, 64, "\"a\\x00b\""},
	        {"", 0, 64, 64, "\"\""},
	        {"abc", 3, 64, 4, ""},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char buf[64];
		memset(buf, 'Z', sizeof(buf));
		kube_quote(buf, cases[i].size, cases[i].in, cases[i].len, cases[i].max);
		CHECK_STR(buf, cases[i].out);
		CHECK(strlen(buf) < cases[i].size);
	}
}
