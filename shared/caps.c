/* caps.c — the learned kernel capabilities kept in "<dir>/kernel-caps" (see
 * caps.h): bound to the boot id, expiring, merged on save, written
 * atomically. A file that is missing, stale or broken only means relearning.
 * {"version":1,"bootId":"...","learned":1700000000,
 *  "missing":{"qdisc/fq_codel":2},"pedit":2,"ccMissing":["dctcp"]} */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>

#include "json.h"
#include "caps.h"
#include "state.h"

#define CAPS_VERSION     1
#define CAPS_ERRNO_MAX   4095
#define CAPS_CC_NAME_MAX 16
#define CAPS_PATH_MAX    640 /* a state directory (at most 512) + the file name */

int caps_boot_id(char *buf, size_t size, struct error *err)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	if (size < 2)
		return error_set(err, EINVAL, "boot id: no buffer");
	fd = open(CAPS_BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error_set(err, errno, "read %s: %s", CAPS_BOOT_ID_PATH, strerror(errno));
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return error_set(err, errno, "read %s: %s", CAPS_BOOT_ID_PATH, strerror(errno));
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	if (n == 0)
		return error_set(err, ENODATA, "read %s: empty", CAPS_BOOT_ID_PATH);
	return 0;
}

/* "qdisc/fq_codel" for a kind (htb is a qdisc and a class: the type tells). */
static void kind_key(enum tc_kind_id k, char *buf, size_t size)
{
	const struct tc_kind *tk = tc_kind_get(k);

	snprintf(buf, size, "%s/%s", tc_type_name(tk ? tk->type : _TC_TYPE_INVALID), tk && tk->name ? tk->name : "?");
}

static enum tc_kind_id kind_from_key(const char *key)
{
	char buf[64];

	for (int k = 0; k < _TC_KIND_MAX; k++) {
		kind_key((enum tc_kind_id)k, buf, sizeof(buf));
		if (streq(buf, key))
			return (enum tc_kind_id)k;
	}
	return _TC_KIND_INVALID;
}

static bool cc_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CAPS_CC_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* The next word of a space-separated list into w (words that do not fit
 * are skipped); false at the end. */
static bool word_next(const char **p, char *w, size_t size)
{
	while (**p) {
		size_t len;

		while (**p == ' ')
			(*p)++;
		len = strcspn(*p, " ");
		if (len == 0)
			break;
		*p += len;
		if (len < size) {
			memcpy(w, *p - len, len);
			w[len] = '\0';
			return true;
		}
	}
	return false;
}

static bool word_in(const char *list, const char *word)
{
	char w[PLAN_CAPS_CC_MAX];

	while (word_next(&list, w, sizeof(w)))
		if (streq(w, word))
			return true;
	return false;
}

static void cc_add(struct plan_caps *c, const char *cc)
{
	size_t n = strlen(c->cc_missing), k = strlen(cc);

	if (word_in(c->cc_missing, cc) || n + 1 + k + 1 > sizeof(c->cc_missing))
		return;
	if (n > 0)
		c->cc_missing[n++] = ' ';
	memcpy(c->cc_missing + n, cc, k + 1);
}

static int errno_value(const cJSON *v)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
	    v->valuedouble < 1 || v->valuedouble > CAPS_ERRNO_MAX)
		return 0;
	return (int)v->valuedouble;
}

/* The facts of a parsed file for boot_id, if fresh at now (else 0). Their
 * learning time in *ret_learned. Errors say what is wrong with the file. */
static int caps_from_json(const cJSON *j, const char *boot_id, time_t now, struct plan_caps *ret, time_t *ret_learned,
                          struct error *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "version"), *o, *it;
	double learned;

	if (!cJSON_IsObject(j))
		return error_set(err, EINVAL, "not a JSON object");
	if (!cJSON_IsNumber(v) || v->valuedouble != CAPS_VERSION)
		return error_set(err, EPROTO, "field 'version' is not %d", CAPS_VERSION);
	v = cJSON_GetObjectItemCaseSensitive(j, "bootId");
	if (!cJSON_IsString(v) || !v->valuestring)
		return error_set(err, EINVAL, "field 'bootId' is not a string");
	if (!streq(v->valuestring, boot_id))
		return 0; /* learned on another boot (maybe another kernel) */
	v = cJSON_GetObjectItemCaseSensitive(j, "learned");
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return error_set(err, EINVAL, "field 'learned' is not a number");
	learned = v->valuedouble;
	/* a clock that went backwards also means "relearn" */
	if (learned > (double)now || (double)now - learned > CAPS_MAX_AGE_S)
		return 0;

	o = cJSON_GetObjectItemCaseSensitive(j, "missing");
	if (o && !cJSON_IsObject(o))
		return error_set(err, EINVAL, "field 'missing' is not an object");
	cJSON_ArrayForEach(it, o)
	{
		enum tc_kind_id k = it->string ? kind_from_key(it->string) : _TC_KIND_INVALID;
		int e = errno_value(it);

		if (k == _TC_KIND_INVALID)
			continue; /* a kind this version does not know */
		if (!e)
			return error_set(err, EINVAL, "field 'missing.%s' is not an errno", it->string);
		plan_caps_mark_missing(ret, k);
		ret->missing_errno[k] = e;
	}
	v = cJSON_GetObjectItemCaseSensitive(j, "pedit");
	if (v && !cJSON_IsNull(v)) {
		int e = errno_value(v);
		if (!e)
			return error_set(err, EINVAL, "field 'pedit' is not an errno");
		ret->missing_pedit = true;
		ret->missing_pedit_errno = e;
	}
	o = cJSON_GetObjectItemCaseSensitive(j, "ccMissing");
	if (o && !cJSON_IsArray(o))
		return error_set(err, EINVAL, "field 'ccMissing' is not an array");
	cJSON_ArrayForEach(it, o)
	{
		if (!cJSON_IsString(it) || !it->valuestring || !cc_name_ok(it->valuestring))
			return error_set(err, EINVAL, "field 'ccMissing' has an invalid entry");
		cc_add(ret, it->valuestring);
	}
	*ret_learned = (time_t)learned;
	return 1;
}

static int caps_path(const char *dir, const char *suffix, char *buf, size_t size, struct error *err)
{
	int n;

	if (!dir || !*dir)
		return error_set(err, EINVAL, "caps: state directory is empty");
	n = snprintf(buf, size, "%s/%s%s", dir, CAPS_FILE, suffix);
	if (n < 0 || (size_t)n >= size)
		return error_set(err, ENAMETOOLONG, "caps file under '%s': path too long", dir);
	return 0;
}

/* Read and check the file; 1 with facts, 0 without (err: why, if broken).
 * boot_id NULL: this kernel's, read only when there is a file. */
static int caps_read(const char *dir, const char *boot_id, time_t now, struct plan_caps *ret, time_t *ret_learned,
                     struct error *err)
{
	char path[CAPS_PATH_MAX], buf[CAPS_FILE_MAX + 1], own_boot_id[CAPS_BOOT_ID_MAX];
	_cleanup_close_ int fd = -1;
	_cleanup_json_ cJSON *j = NULL;
	size_t len = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	r = caps_path(dir, "", path, sizeof(path), err);
	if (r < 0)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno != ENOENT)
			error_set(err, errno, "caps file '%s' ignored: %s", path, strerror(errno));
		return 0;
	}
	for (;;) {
		ssize_t k = read(fd, buf + len, sizeof(buf) - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			error_set(err, errno, "caps file '%s' ignored: %s", path, strerror(errno));
			return 0;
		}
		if (k == 0)
			break;
		len += (size_t)k;
		if (len > CAPS_FILE_MAX) {
			error_set(err, EFBIG, "caps file '%s' ignored: larger than %d bytes", path, CAPS_FILE_MAX);
			return 0;
		}
	}
	j = cJSON_ParseWithLength(buf, len);
	if (!j) {
		error_set(err, EINVAL, "caps file '%s' ignored: invalid JSON", path);
		return 0;
	}
	if (!boot_id) {
		if (caps_boot_id(own_boot_id, sizeof(own_boot_id), err) < 0)
			return 0; /* cannot bind facts to this boot: learn afresh */
		boot_id = own_boot_id;
	}
	r = caps_from_json(j, boot_id, now, ret, ret_learned, err);
	if (r <= 0) {
		if (r < 0)
			error_prefix(err, "caps file '%s' ignored", path);
		memset(ret, 0, sizeof(*ret));
		return 0;
	}
	return 1;
}

int caps_load_at(const char *dir, const char *boot_id, time_t now, struct plan_caps *ret, struct error *err)
{
	time_t learned = 0;

	return caps_read(dir, boot_id, now, ret, &learned, err);
}

int caps_load(const char *dir, struct plan_caps *ret, struct error *err)
{
	time_t learned = 0;

	/* the boot id is read only if there is a file (none: nothing was
	 * ever missing, the usual case on a full kernel) */
	return caps_read(dir, NULL, time(NULL), ret, &learned, err);
}

static bool cc_more(const char *a, const char *b)
{
	char w[PLAN_CAPS_CC_MAX];

	while (word_next(&b, w, sizeof(w)))
		if (!word_in(a, w))
			return true;
	return false;
}

bool caps_learned_more(const struct plan_caps *a, const struct plan_caps *b)
{
	return (b->missing_kinds & ~a->missing_kinds) != 0 || (b->missing_pedit && !a->missing_pedit) ||
	       cc_more(a->cc_missing, b->cc_missing);
}

static cJSON *caps_to_json(const struct plan_caps *c, const char *boot_id, time_t learned)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	cJSON *o, *a;
	char key[64], w[PLAN_CAPS_CC_MAX];

	if (!j || !cJSON_AddNumberToObject(j, "version", CAPS_VERSION) ||
	    !cJSON_AddStringToObject(j, "bootId", boot_id) || !cJSON_AddNumberToObject(j, "learned", (double)learned))
		return NULL;
	o = cJSON_AddObjectToObject(j, "missing");
	if (!o)
		return NULL;
	for (int k = 0; k < _TC_KIND_MAX; k++) {
		if (plan_caps_has(c, (enum tc_kind_id)k))
			continue;
		kind_key((enum tc_kind_id)k, key, sizeof(key));
		if (!cJSON_AddNumberToObject(o, key, c->missing_errno[k] > 0 ? c->missing_errno[k] : EOPNOTSUPP))
			return NULL;
	}
	if (c->missing_pedit &&
	    !cJSON_AddNumberToObject(j, "pedit", c->missing_pedit_errno > 0 ? c->missing_pedit_errno : EOPNOTSUPP))
		return NULL;
	a = cJSON_AddArrayToObject(j, "ccMissing");
	if (!a)
		return NULL;
	for (const char *p = c->cc_missing; word_next(&p, w, sizeof(w));)
		if (cc_name_ok(w) && !cJSON_AddItemToArray(a, cJSON_CreateString(w)))
			return NULL;
	return TAKE_PTR(j);
}

int caps_save_at(const char *dir, const char *boot_id, time_t now, const struct plan_caps *caps, struct error *err)
{
	char path[CAPS_PATH_MAX];
	struct plan_caps merged, old;
	_cleanup_json_ cJSON *j = NULL;
	_cleanup_free_ char *text = NULL;
	time_t learned = now;
	int r;

	r = caps_path(dir, "", path, sizeof(path), err);
	if (r < 0)
		return r;

	merged = *caps;
	if (caps_read(dir, boot_id, now, &old, &learned, NULL) == 1) {
		for (int k = 0; k < _TC_KIND_MAX; k++)
			if (!plan_caps_has(&old, (enum tc_kind_id)k) && plan_caps_has(&merged, (enum tc_kind_id)k)) {
				plan_caps_mark_missing(&merged, (enum tc_kind_id)k);
				merged.missing_errno[k] = old.missing_errno[k];
			}
		if (old.missing_pedit && !merged.missing_pedit) {
			merged.missing_pedit = true;
			merged.missing_pedit_errno = old.missing_pedit_errno;
		}
		char w[PLAN_CAPS_CC_MAX];
		for (const char *p = old.cc_missing; word_next(&p, w, sizeof(w));)
			cc_add(&merged, w);
	} else {
		learned = now;
	}

	j = caps_to_json(&merged, boot_id, learned);
	text = j ? cJSON_PrintUnformatted(j) : NULL;
	if (!text)
		return error_set(err, ENOMEM, "encode caps file '%s': out of memory", path);
	return state_write_atomic(NULL, path, "caps file", text, false, err); /* the state save creates dir */
}

int caps_save(const char *dir, const struct plan_caps *caps, struct error *err)
{
	char boot_id[CAPS_BOOT_ID_MAX];
	int r = caps_boot_id(boot_id, sizeof(boot_id), err);

	if (r < 0)
		return r;
	return caps_save_at(dir, boot_id, time(NULL), caps, err);
}
