/* plan_pods.c — the input of `aiqosctl plan`: pods from a file (plan.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#include <yaml.h>

#include "ctl/ctl.h"
#include "ctl/plan.h"
#include "file.h"
#include "k8s.h"

#define PODS_FILE_MAX (64 * 1024 * 1024)
#define CTL_PODS_MAX  KUBE_POD_LIST_ITEMS_MAX

void ctl_pods_done(struct ctl_pods *p)
{
	free(p->v);
	kube_pod_list_done(&p->list);
	if (p->have_single)
		kube_pod_done(&p->single);
	memset(p, 0, sizeof(*p));
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
	/* a stream, not only a regular file: "-" and --pods <(kubectl ...) */
	_cleanup_fclose_ FILE *f = streq(path, "-") ? NULL : fopen(path, "re");
	struct error e = {0};
	int r;

	if (!streq(path, "-") && !f)
		return fail("cannot read pods file %s: %s", path, strerror(errno));
	r = file_read_stream(f ? f : stdin, PODS_FILE_MAX, ret, ret_len, &e);
	if (r == -EFBIG)
		return fail("pods file %s is larger than %d bytes", path, PODS_FILE_MAX);
	if (r < 0)
		return fail("cannot read pods file %s: %s", path, e.msg);
	return EXIT_OK;
}

static bool ip_parse(const char *s, struct node_ip *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (inet_pton(AF_INET, s, ret->addr) == 1) {
		ret->family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, s, ret->addr) == 1) {
		ret->family = AF_INET6;
		return true;
	}
	return false;
}

static void ip_text(struct ctl_pod *p, unsigned i)
{
	inet_ntop(p->ips[i].family, p->ips[i].addr, p->ip_text[i], sizeof(p->ip_text[i]));
}

/* The simple format: {"pods": [{"namespace", "name", "uid", "annotations", "ips", "gpus", "hostNetwork"}]} */
static int pods_from_simple(const char *path, const cJSON *arr, struct ctl_pods *ret)
{
	static const char *const keys[] = {"namespace", "name", "uid", "annotations", "ips", "gpus", "hostNetwork"};
	const cJSON *it;
	int i = 0, n = cJSON_GetArraySize(arr);

	if (n > CTL_PODS_MAX)
		return fail("%s: pods: %d pods exceed the limit of %d", path, n, CTL_PODS_MAX);
	ret->v = calloc(n > 0 ? (size_t)n : 1, sizeof(*ret->v));
	if (!ret->v)
		return fail("out of memory");
	json_for_each(it, arr)
	{
		struct ctl_pod *p = &ret->v[ret->n];
		const cJSON *v, *a;

		if (!cJSON_IsObject(it))
			return fail("%s: pods[%d]: expected an object", path, i);
		for (const cJSON *k = it->child; k; k = k->next) {
			bool known = false;
			for (size_t j = 0; j < ARRAY_SIZE(keys); j++)
				known = known || streq(k->string, keys[j]);
			if (!known)
				return fail(
				        "%s: pods[%d]: unknown key '%s' (expected namespace, name, uid, annotations, "
				        "ips, gpus, hostNetwork)",
				        path, i, k->string);
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "name");
		if (!cJSON_IsString(v) || !k8s_pod_name_valid(v->valuestring) ||
		    str_copy(p->name, sizeof(p->name), v->valuestring) < 0)
			return fail("%s: pods[%d].name: expected a pod name (lower-case letters, digits, '-', '.')",
			            path, i);
		v = cJSON_GetObjectItemCaseSensitive(it, "namespace");
		if (v && (!cJSON_IsString(v) || !k8s_namespace_valid(v->valuestring) ||
		          str_copy(p->namespace_, sizeof(p->namespace_), v->valuestring) < 0))
			return fail("%s: pods[%d].namespace: expected a namespace name of at most %d characters", path,
			            i, KUBE_NAMESPACE_MAX - 1);
		if (!v)
			str_copy(p->namespace_, sizeof(p->namespace_), "default");
		v = cJSON_GetObjectItemCaseSensitive(it, "uid");
		if (v) {
			if (!cJSON_IsString(v) || !v->valuestring[0] ||
			    str_copy(p->uid, sizeof(p->uid), v->valuestring) < 0)
				return fail("%s: pods[%d].uid: expected a string of 1 to %d characters", path, i,
				            KUBE_UID_MAX - 1);
		} else if (snprintf(p->uid, sizeof(p->uid), "%s/%s", p->namespace_, p->name) >= (int)sizeof(p->uid)) {
			return fail(
			        "%s: pods[%d] (%s/%s): give it a \"uid\" (namespace/name is longer than %d characters)",
			        path, i, p->namespace_, p->name, KUBE_UID_MAX - 1);
		}
		a = cJSON_GetObjectItemCaseSensitive(it, "annotations");
		if (a && !cJSON_IsNull(a)) {
			if (!cJSON_IsObject(a))
				return fail("%s: pods[%d].annotations: expected an object of strings", path, i);
			for (const cJSON *k = a->child; k; k = k->next)
				if (!cJSON_IsString(k))
					return fail("%s: pods[%d].annotations.%s: expected a string", path, i,
					            k->string);
			p->annotations = a;
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "ips");
		if (v && !cJSON_IsArray(v))
			return fail("%s: pods[%d].ips: expected an array of IP addresses", path, i);
		json_for_each(a, v)
		{
			if (p->n_ips == NODE_POD_IPS_MAX)
				return fail("%s: pods[%d].ips: more than %d addresses", path, i, NODE_POD_IPS_MAX);
			if (!cJSON_IsString(a) || !ip_parse(a->valuestring, &p->ips[p->n_ips]))
				return fail("%s: pods[%d].ips: %s%s%s is not an IPv4 or IPv6 address", path, i,
				            cJSON_IsString(a) ? "'" : "",
				            cJSON_IsString(a) ? a->valuestring : "a non-string",
				            cJSON_IsString(a) ? "'" : "");
			ip_text(p, p->n_ips++);
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "gpus");
		if (v) {
			if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > KUBE_POD_GPU_MAX ||
			    v->valuedouble != (double)(int)v->valuedouble)
				return fail("%s: pods[%d].gpus: expected a whole number 0..%d", path, i,
				            KUBE_POD_GPU_MAX);
			p->gpus = (uint32_t)v->valuedouble;
		}
		v = cJSON_GetObjectItemCaseSensitive(it, "hostNetwork");
		if (v && !cJSON_IsBool(v))
			return fail("%s: pods[%d].hostNetwork: expected true or false", path, i);
		if (cJSON_IsTrue(v))
			p->skip = "hostNetwork";
		ret->n++;
		i++;
	}
	return EXIT_OK;
}

static void pod_from_kube(const struct kube_pod *k, struct ctl_pod *p)
{
	str_copy(p->namespace_, sizeof(p->namespace_), k->namespace_);
	str_copy(p->name, sizeof(p->name), k->name);
	str_copy(p->uid, sizeof(p->uid), k->uid);
	p->annotations = k->annotations;
	p->n_ips = pod_ips_from_kube(k, p->ips);
	for (unsigned i = 0; i < p->n_ips; i++)
		ip_text(p, i);
	p->gpus = k->gpus;
	if (k->host_network)
		p->skip = "hostNetwork";
	else if (k->phase == KUBE_POD_PHASE_SUCCEEDED)
		p->skip = "phase Succeeded";
	else if (k->phase == KUBE_POD_PHASE_FAILED)
		p->skip = "phase Failed";
}

/* Fill what a manifest or `kubectl` output may lack for the strict API
 * decoder (a dry run of pods not created yet): namespace, uid, resourceVersion. */
static bool kube_pod_fill_identity(cJSON *pod, int i)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	const cJSON *v;
	char uid[32];

	if (!cJSON_IsObject(meta))
		return true; /* the decoder names the problem */
	v = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
	if ((!v || cJSON_IsNull(v)) && (cJSON_DeleteItemFromObjectCaseSensitive(meta, "namespace"), true) &&
	    !cJSON_AddStringToObject(meta, "namespace", "default"))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(meta, "uid");
	snprintf(uid, sizeof(uid), "dry-run-%d", i);
	if ((!v || cJSON_IsNull(v)) && (cJSON_DeleteItemFromObjectCaseSensitive(meta, "uid"), true) &&
	    !cJSON_AddStringToObject(meta, "uid", uid))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
	if ((!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0])) &&
	    (cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion"), true) &&
	    !cJSON_AddStringToObject(meta, "resourceVersion", "0"))
		return false;
	return true;
}

/* A PodList (or kubectl's "List") or a single Pod. */
static int pods_from_kube(const char *path, cJSON *doc, struct ctl_pods *ret)
{
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(doc, "kind");
	struct error err = {0};
	cJSON *items, *it, *meta;
	int i = 0;

	if (cJSON_IsString(kind) && streq(kind->valuestring, "Pod")) {
		if (!kube_pod_fill_identity(doc, 0))
			return fail("out of memory");
		if (kube_pod_decode(doc, &ret->single, &err) < 0)
			return fail("%s: %s", path, err.msg);
		ret->have_single = true;
		ret->v = calloc(1, sizeof(*ret->v));
		if (!ret->v)
			return fail("out of memory");
		pod_from_kube(&ret->single, &ret->v[0]);
		ret->n = 1;
		return EXIT_OK;
	}
	/* kubectl prints {"kind": "List", "metadata": {"resourceVersion": ""}} */
	if (cJSON_IsString(kind) && streq(kind->valuestring, "List"))
		cJSON_ReplaceItemInObjectCaseSensitive(doc, "kind", cJSON_CreateString("PodList"));
	meta = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
	if (!meta || cJSON_IsNull(meta)) {
		cJSON_DeleteItemFromObjectCaseSensitive(doc, "metadata");
		meta = cJSON_AddObjectToObject(doc, "metadata");
		if (!meta)
			return fail("out of memory");
	}
	if (cJSON_IsObject(meta)) {
		const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
		if ((!rv || cJSON_IsNull(rv) || (cJSON_IsString(rv) && !rv->valuestring[0])) &&
		    (cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion"), true) &&
		    !cJSON_AddStringToObject(meta, "resourceVersion", "0"))
			return fail("out of memory");
	}
	items = cJSON_GetObjectItemCaseSensitive(doc, "items");
	json_for_each(it, cJSON_IsArray(items) ? items : NULL)
	{
		if (cJSON_IsObject(it) && !kube_pod_fill_identity(it, i))
			return fail("out of memory");
		i++;
	}
	if (kube_pod_list_decode(doc, &ret->list, &err) < 0)
		return fail("%s: %s", path, err.msg);
	if (ret->list.n_invalid)
		return fail("%s: %s", path, ret->list.first_invalid);
	ret->v = calloc(ret->list.n ? ret->list.n : 1, sizeof(*ret->v));
	if (!ret->v)
		return fail("out of memory");
	for (size_t k = 0; k < ret->list.n; k++)
		pod_from_kube(&ret->list.items[k], &ret->v[ret->n++]);
	return EXIT_OK;
}

/* ---- YAML: a stream of documents as one JSON document ---- */

#define YAML_DEPTH_MAX 64

/* A plain scalar as YAML 1.2's core schema reads it: null, true/false, an
 * integer or a float; anything else, and every quoted scalar, a string. */
static cJSON *yaml_scalar_json(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;
	char *end = NULL;
	double d;

	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return cJSON_CreateString(v);
	if (!v[0] || streq(v, "~") || streq(v, "null") || streq(v, "Null") || streq(v, "NULL"))
		return cJSON_CreateNull();
	if (streq(v, "true") || streq(v, "True") || streq(v, "TRUE"))
		return cJSON_CreateTrue();
	if (streq(v, "false") || streq(v, "False") || streq(v, "FALSE"))
		return cJSON_CreateFalse();
	if (strchr("+-.0123456789", v[0]) && !strchr(v, '_') && !strchr(v, 'x') && !strchr(v, 'o')) {
		errno = 0;
		d = strtod(v, &end);
		if (!errno && end && !*end && !strchr(v, 'n') && !strchr(v, 'N') && !strchr(v, 'i') && !strchr(v, 'I'))
			return cJSON_CreateNumber(d);
	}
	return cJSON_CreateString(v);
}

static cJSON *yaml_node_json(yaml_document_t *doc, yaml_node_t *n, unsigned depth)
{
	cJSON *o;

	if (!n || depth > YAML_DEPTH_MAX)
		return NULL;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return yaml_scalar_json(n);
	case YAML_SEQUENCE_NODE:
		o = cJSON_CreateArray();
		for (yaml_node_item_t *it = n->data.sequence.items.start; o && it < n->data.sequence.items.top; it++) {
			cJSON *c = yaml_node_json(doc, yaml_document_get_node(doc, *it), depth + 1);

			if (!c || !cJSON_AddItemToArray(o, c)) {
				cJSON_Delete(c);
				cJSON_Delete(o);
				return NULL;
			}
		}
		return o;
	case YAML_MAPPING_NODE:
		o = cJSON_CreateObject();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			cJSON *c;

			if (!k || k->type != YAML_SCALAR_NODE) {
				cJSON_Delete(o);
				return NULL;
			}
			c = yaml_node_json(doc, yaml_document_get_node(doc, p->value), depth + 1);
			if (!c || !cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, c)) {
				cJSON_Delete(c);
				cJSON_Delete(o);
				return NULL;
			}
		}
		return o;
	default:
		return NULL;
	}
}

/* The YAML stream in text: one document as is, several (Pod manifests
 * separated by "---", as kubectl kustomize prints them) as a List of
 * their items; empty documents are left out. */
static int yaml_load(const char *path, const char *text, size_t len, cJSON **ret)
{
	_cleanup_json_ cJSON *items = cJSON_CreateArray(), *list = NULL;
	yaml_parser_t parser;
	int q = EXIT_OK, n = 0;

	if (!items || !yaml_parser_initialize(&parser))
		return fail("out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	for (;;) {
		yaml_document_t doc;
		yaml_node_t *root;
		cJSON *j;

		if (!yaml_parser_load(&parser, &doc)) {
			q = fail("%s: not valid YAML (line %zu: %s)", path, parser.problem_mark.line + 1,
			         parser.problem ? parser.problem : "?");
			break;
		}
		root = yaml_document_get_root_node(&doc);
		if (!root) {
			yaml_document_delete(&doc);
			break; /* the end of the stream */
		}
		if (root->type == YAML_SCALAR_NODE && !root->data.scalar.value[0]) {
			yaml_document_delete(&doc);
			continue;
		}
		j = yaml_node_json(&doc, root, 0);
		yaml_document_delete(&doc);
		if (!j) {
			q = fail("%s: document %d: keys must be strings (and nesting at most %d deep)", path, n + 1,
			         YAML_DEPTH_MAX);
			break;
		}
		if (!cJSON_AddItemToArray(items, j)) {
			cJSON_Delete(j);
			q = fail("out of memory");
			break;
		}
		n++;
	}
	yaml_parser_delete(&parser);
	if (q != EXIT_OK)
		return q;
	if (n == 0)
		return fail("%s: no YAML document", path);
	if (n == 1) {
		*ret = cJSON_DetachItemFromArray(items, 0);
		return EXIT_OK;
	}
	list = cJSON_CreateObject();
	if (!list || !cJSON_AddStringToObject(list, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(list, "kind", "List"))
		return fail("out of memory");
	cJSON_AddItemToObject(list, "items", TAKE_PTR(items));
	*ret = TAKE_PTR(list);
	return EXIT_OK;
}

/* One file's text as one JSON document: JSON when it starts with '{' or
 * '[', else YAML (kubectl's and the manifests' format; several documents
 * become a List). */
static int doc_parse(const char *path, const char *text, size_t len, cJSON **ret)
{
	const char *end = NULL, *first = text ? text + strspn(text, " \t\r\n") : "";
	cJSON *doc;

	if (*first != '{' && *first != '[')
		return yaml_load(path, text, len, ret);
	doc = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!doc) {
		size_t off = end && end >= text ? (size_t)(end - text) : 0;
		unsigned line = 1;
		for (size_t i = 0; i < off && i < len; i++)
			line += text[i] == '\n';
		return fail("%s: not valid JSON (line %u, byte %zu)", path, line, off);
	}
	for (; end && text && end < text + len; end++)
		if (!strchr(" \t\r\n", *end)) {
			cJSON_Delete(doc);
			return fail("%s: trailing data after the JSON document", path);
		}
	*ret = doc;
	return EXIT_OK;
}

static bool kind_is(const cJSON *o, const char *kind)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "kind");
	return cJSON_IsString(k) && streq(k->valuestring, kind);
}

/* Add doc's pods (a Pod, or the items of a List or PodList) to items;
 * other kinds (a Kustomization next to the manifests) are left out. */
static bool dir_doc_add(cJSON *items, cJSON *doc)
{
	cJSON *it;

	if (kind_is(doc, "Pod"))
		return cJSON_AddItemToArray(items, cJSON_Duplicate(doc, true));
	if (!kind_is(doc, "List") && !kind_is(doc, "PodList"))
		return true;
	json_for_each(it, cJSON_GetObjectItemCaseSensitive(doc, "items"))
	{
		if (!dir_doc_add(items, it))
			return false;
	}
	return true;
}

static int yaml_or_json_name(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return d->d_name[0] != '.' &&
	       ((n > 5 && streq(d->d_name + n - 5, ".yaml")) || (n > 4 && streq(d->d_name + n - 4, ".yml")) ||
	        (n > 5 && streq(d->d_name + n - 5, ".json")));
}

/* A directory (manifests/examples/): the Pods of its .yaml, .yml and .json
 * files, in name order, as one List. */
static int dir_load(const char *path, cJSON **ret)
{
	_cleanup_json_ cJSON *list = cJSON_CreateObject();
	struct dirent **names = NULL;
	cJSON *items = list ? cJSON_AddArrayToObject(list, "items") : NULL;
	int n, q = EXIT_OK;

	if (!items || !cJSON_AddStringToObject(list, "kind", "List"))
		return fail("out of memory");
	n = scandir(path, &names, yaml_or_json_name, alphasort);
	if (n < 0)
		return fail("cannot read pods directory %s: %s", path, strerror(errno));
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *file = NULL, *text = NULL;
		_cleanup_json_ cJSON *doc = NULL;
		size_t len = 0;

		if (q == EXIT_OK && asprintf(&file, "%s/%s", path, names[i]->d_name) < 0)
			q = fail("out of memory");
		if (q == EXIT_OK)
			q = read_file(file, &text, &len);
		if (q == EXIT_OK)
			q = doc_parse(file, text, len, &doc);
		if (q == EXIT_OK && !dir_doc_add(items, doc))
			q = fail("out of memory");
		free(names[i]);
	}
	free(names);
	if (q != EXIT_OK)
		return q;
	if (cJSON_GetArraySize(items) == 0)
		return fail("%s: no Pod in its .yaml, .yml or .json files", path);
	*ret = TAKE_PTR(list);
	return EXIT_OK;
}

int pods_load(const char *path, cJSON **ret_doc, struct ctl_pods *ret)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ cJSON *doc = NULL;
	const cJSON *pods;
	struct stat st;
	size_t len = 0;
	int q;

	if (!streq(path, "-") && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		q = dir_load(path, &doc);
	} else {
		q = read_file(path, &text, &len);
		if (q == EXIT_OK)
			q = doc_parse(path, text, len, &doc);
	}
	if (q != EXIT_OK)
		return q;
	if (!cJSON_IsObject(doc))
		return fail("%s: expected a JSON object ({\"pods\": [...]}, a Pod or a PodList)", path);
	pods = cJSON_GetObjectItemCaseSensitive(doc, "pods");
	if (pods) {
		if (!cJSON_IsArray(pods))
			return fail("%s: pods: expected an array", path);
		q = pods_from_simple(path, pods, ret);
	} else if (cJSON_GetObjectItemCaseSensitive(doc, "items") || cJSON_GetObjectItemCaseSensitive(doc, "kind")) {
		q = pods_from_kube(path, doc, ret);
	} else {
		return fail("%s: expected {\"pods\": [...]}, a Pod or a PodList", path);
	}
	if (q != EXIT_OK)
		return q;
	/* the node planner keys pods by UID */
	for (size_t i = 0; ret->v && i < ret->n; i++)
		for (size_t j = 0; j < i; j++)
			if (streq(ret->v[i].uid, ret->v[j].uid))
				return fail("%s: pods %s/%s and %s/%s have the same uid '%s'", path,
				            ret->v[j].namespace_, ret->v[j].name, ret->v[i].namespace_, ret->v[i].name,
				            ret->v[i].uid);
	*ret_doc = TAKE_PTR(doc);
	return EXIT_OK;
}
