/* chain.c — install the aiqos binary and chain it into the node's primary CNI
 * network config (see chain.h for the strategies). Reads at most
 * CHAIN_CONF_MAX_BYTES per file; every write is temp + fsync + rename in the
 * same directory and happens only when the content differs. */
#define _GNU_SOURCE /* mkostemp */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/stat.h>

#include "file.h"
#include "ifname.h"
#include "install/chain.h"
#include "../../cni/cni.h"

#define COPY_CHUNK     (64 * 1024)
#define TMP_TEMPLATE   ".aiqos-tmp-XXXXXX"
#define SCAN_FILES_MAX 4096
#define TYPE_MAX       64

static const char *const conf_exts[] = {".conflist", ".conf", ".json"};

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}
#define _cleanup_dir_ _cleanup_(closedirp) /* _cleanup_json_: json.h */

/* ---- small helpers ---- */

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && memcmp(s + n - m, suffix, m) == 0;
}

static const char *conf_ext(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(conf_exts); i++)
		if (has_suffix(name, conf_exts[i]))
			return conf_exts[i];
	return NULL;
}

bool chain_name_relevant(const char *name)
{
	return name && name[0] != '.' && conf_ext(name) != NULL;
}

const char *chain_strategy_name(enum chain_strategy s)
{
	static const char *const names[_CHAIN_STRATEGY_MAX] = {
	        [CHAIN_STRATEGY_NONE] = "none",
	        [CHAIN_STRATEGY_DROPIN] = "dropin",
	        [CHAIN_STRATEGY_OWNED_COPY] = "owned-copy",
	        [CHAIN_STRATEGY_IN_PLACE] = "in-place",
	};
	return (unsigned)s < _CHAIN_STRATEGY_MAX ? names[s] : "invalid";
}

static int path_join(char *buf, size_t size, const char *dir, const char *name, struct error *err)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= size)
		return error_set(err, ENAMETOOLONG, "%s/%s: path too long", dir, name);
	return 0;
}

static _printf_(2, 3) void what_add(struct chain_report *r, const char *fmt, ...)
{
	size_t n = strlen(r->what);
	va_list ap;

	if (n + 3 >= sizeof(r->what))
		return;
	if (n > 0) {
		memcpy(r->what + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(r->what + n, sizeof(r->what) - n, fmt, ap);
	va_end(ap);
}

/* A CNI network name used as a directory name (CNI: [A-Za-z0-9][A-Za-z0-9_.-]*). */
static bool name_is_path_safe(const char *s)
{
	return cni_id_valid(s, NAME_MAX);
}

/* ---- files ---- */

/* Read a whole regular file (at most max bytes) into a NUL-terminated buffer.
 * -ENOENT is returned without touching err (callers decide whether a missing
 * file is an error). */
static int file_read(const char *path, size_t max, char **ret, size_t *ret_len, mode_t *ret_mode, struct error *err)
{
	struct error e = {0};
	struct stat st;
	int r = file_read_bounded(path, max, 0, ret, ret_len, &st, &e);

	if (r == -ENOENT)
		return r;
	if (r < 0) {
		error_propagate(err, &e);
		error_prefix(err, "%s", path);
		return r;
	}
	if (ret_mode)
		*ret_mode = st.st_mode & 07777;
	return 0;
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int dir_fsync(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

/* Create a temp file in dir; fills tmp (size >= PATH_MAX). */
static int tmp_create(const char *dir, char *tmp, size_t size, struct error *err)
{
	int fd, r;

	r = path_join(tmp, size, dir, TMP_TEMPLATE, err);
	if (r < 0)
		return r;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return error_set(err, errno, "%s: create temp file: %s", dir, strerror(errno));
	return fd;
}

/* Finish a temp file: mode, fsync, close, rename over path, fsync the dir.
 * Closes fd and removes tmp on failure. */
static int tmp_commit(int fd, const char *tmp, const char *dir, const char *path, mode_t mode, struct error *err)
{
	int r = 0;

	if (fchmod(fd, mode) < 0)
		r = error_set(err, errno, "%s: chmod: %s", tmp, strerror(errno));
	else if (fsync(fd) < 0)
		r = error_set(err, errno, "%s: fsync: %s", tmp, strerror(errno));
	if (close(fd) < 0 && r == 0)
		r = error_set(err, errno, "%s: close: %s", tmp, strerror(errno));
	if (r == 0 && rename(tmp, path) < 0)
		r = error_set(err, errno, "%s: rename from %s: %s", path, tmp, strerror(errno));
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	(void)dir_fsync(dir); /* the rename is done; a failed dir fsync only weakens durability */
	return 0;
}

static int file_write_atomic(const char *dir, const char *name, const char *data, size_t len, mode_t mode,
                             struct error *err)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int fd, r;

	r = path_join(path, sizeof(path), dir, name, err);
	if (r < 0)
		return r;
	fd = tmp_create(dir, tmp, sizeof(tmp), err);
	if (fd < 0)
		return fd;
	r = write_all(fd, data, len);
	if (r < 0) {
		error_set(err, -r, "%s: write: %s", tmp, strerror(-r));
		close(fd);
		(void)unlink(tmp);
		return r;
	}
	return tmp_commit(fd, tmp, dir, path, mode, err);
}

/* Write dir/name unless it already holds exactly data. *ret_written says
 * whether it wrote. */
static int file_ensure(const char *dir, const char *name, const char *data, mode_t mode, bool *ret_written,
                       struct error *err)
{
	_cleanup_free_ char *old = NULL;
	char path[PATH_MAX];
	size_t old_len = 0, len = strlen(data);
	mode_t old_mode = 0;
	int r;

	*ret_written = false;
	r = path_join(path, sizeof(path), dir, name, err);
	if (r < 0)
		return r;
	r = file_read(path, CHAIN_CONF_MAX_BYTES, &old, &old_len, &old_mode, NULL);
	if (r == 0 && old_len == len && memcmp(old, data, len) == 0 && old_mode == mode)
		return 0;
	r = file_write_atomic(dir, name, data, len, mode, err);
	if (r < 0)
		return r;
	*ret_written = true;
	return 0;
}

/* Unlink dir/name; *ret_removed false if it was already gone. */
static int file_remove(const char *dir, const char *name, bool *ret_removed, struct error *err)
{
	char path[PATH_MAX];
	int r;

	*ret_removed = false;
	r = path_join(path, sizeof(path), dir, name, err);
	if (r < 0)
		return r;
	if (unlink(path) < 0) {
		if (errno == ENOENT)
			return 0;
		return error_set(err, errno, "%s: remove: %s", path, strerror(errno));
	}
	(void)dir_fsync(dir);
	*ret_removed = true;
	return 0;
}

/* ---- the plugin binary ---- */

/* Are the files at fd a (already open, at offset 0) and path b identical? */
static int same_content(int fd_a, const char *path_b, bool *ret_same, struct error *err)
{
	_cleanup_close_ int fd_b = -1;
	_cleanup_free_ char *ba = NULL, *bb = NULL;
	struct stat sa, sb;

	*ret_same = false;
	fd_b = open(path_b, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd_b < 0) {
		if (errno == ENOENT)
			return 0;
		return error_set(err, errno, "%s: open: %s", path_b, strerror(errno));
	}
	if (fstat(fd_a, &sa) < 0 || fstat(fd_b, &sb) < 0)
		return error_set(err, errno, "%s: stat: %s", path_b, strerror(errno));
	if (!S_ISREG(sb.st_mode) || sa.st_size != sb.st_size || (sb.st_mode & 07777) != 0755)
		return 0;
	ba = malloc(COPY_CHUNK);
	bb = malloc(COPY_CHUNK);
	if (!ba || !bb)
		return error_set(err, ENOMEM, "%s: out of memory", path_b);
	for (;;) {
		ssize_t na = read(fd_a, ba, COPY_CHUNK), nb;
		if (na < 0) {
			if (errno == EINTR)
				continue;
			return error_set(err, errno, "read: %s", strerror(errno));
		}
		if (na == 0)
			break;
		for (ssize_t got = 0; got < na; got += nb) {
			nb = read(fd_b, bb + got, (size_t)(na - got));
			if (nb < 0 && errno == EINTR) {
				nb = 0;
				continue;
			}
			if (nb < 0)
				return error_set(err, errno, "%s: read: %s", path_b, strerror(errno));
			if (nb == 0)
				return 0; /* shorter than it said */
		}
		if (memcmp(ba, bb, (size_t)na) != 0)
			return 0;
	}
	*ret_same = true;
	return 0;
}

static int binary_install(const char *src, const char *bin_dir, const char *name, bool *ret_changed, struct error *err)
{
	_cleanup_close_ int fd_src = -1;
	char buf[16 * 1024];
	char dst[PATH_MAX], tmp[PATH_MAX];
	struct stat st;
	bool same;
	int fd, r;

	*ret_changed = false;
	r = path_join(dst, sizeof(dst), bin_dir, name, err);
	if (r < 0)
		return r;
	fd_src = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd_src < 0)
		return error_set(err, errno, "plugin binary %s: open: %s", src, strerror(errno));
	if (fstat(fd_src, &st) < 0)
		return error_set(err, errno, "plugin binary %s: stat: %s", src, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "plugin binary %s: not a regular file", src);
	r = same_content(fd_src, dst, &same, err);
	if (r < 0)
		return r;
	if (same)
		return 0;
	if (lseek(fd_src, 0, SEEK_SET) < 0)
		return error_set(err, errno, "plugin binary %s: seek: %s", src, strerror(errno));

	fd = tmp_create(bin_dir, tmp, sizeof(tmp), err);
	if (fd < 0)
		return fd;
	for (;;) {
		ssize_t n = read(fd_src, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = error_set(err, errno, "plugin binary %s: read: %s", src, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		r = write_all(fd, buf, (size_t)n);
		if (r < 0) {
			error_set(err, -r, "%s: write: %s", tmp, strerror(-r));
			break;
		}
	}
	if (r < 0) {
		close(fd);
		(void)unlink(tmp);
		return r;
	}
	r = tmp_commit(fd, tmp, bin_dir, dst, 0755, err);
	if (r < 0)
		return r;
	*ret_changed = true;
	return 0;
}

/* ---- config files ---- */

/* Parse text as one JSON value (trailing garbage is an error). */
static int json_parse(const char *text, size_t len, const char *path, cJSON **ret, struct error *err)
{
	const char *end = NULL;
	cJSON *j;

	/* len + 1: the NUL terminator is part of the buffer, so cJSON can
	 * require that nothing but whitespace follows the value */
	j = cJSON_ParseWithLengthOpts(text, len + 1, &end, true);
	if (!j) {
		size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
		return error_set(err, EINVAL, "%s: invalid JSON at byte %zu", path, at);
	}
	*ret = j;
	return 0;
}

static bool json_is_owned(const cJSON *j)
{
	return cJSON_IsObject(j) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, CHAIN_MARKER_OWNED));
}

struct conf_entry {
	char name[NAME_MAX + 1];
	cJSON *json; /* NULL if unreadable or malformed */
	mode_t mode;
	int load_r; /* 0, or the negative errno of reading/parsing */
	struct error load_err;
	bool owned;  /* named 00-aiqos-* or carries the marker */
	bool marked; /* carries the marker (only these are ever deleted) */
};

struct conf_scan {
	struct conf_entry *v;
	size_t n;
	bool dir_missing;
};

static void conf_scan_done(struct conf_scan *s)
{
	for (size_t i = 0; i < s->n; i++)
		cJSON_Delete(s->v[i].json);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct conf_entry *)a)->name, ((const struct conf_entry *)b)->name);
}

/* List and parse every config file (by extension, regular files only) of
 * dir, sorted bytewise like libcni. A missing dir is an empty scan. */
static int conf_scan(const char *dir, struct conf_scan *ret, struct error *err)
{
	_cleanup_dir_ DIR *d = NULL;
	struct conf_scan s = {0};
	size_t cap = 0;
	struct dirent *de;

	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT) {
			*ret = (struct conf_scan){.dir_missing = true};
			return 0;
		}
		return error_set(err, errno, "CNI config dir %s: %s", dir, strerror(errno));
	}
	for (;;) {
		struct conf_entry *e;
		char path[PATH_MAX];
		_cleanup_free_ char *text = NULL;
		size_t len = 0;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno != 0) {
				int r = error_set(err, errno, "CNI config dir %s: read: %s", dir, strerror(errno));
				conf_scan_done(&s);
				return r;
			}
			break;
		}
		if (de->d_name[0] == '.' || !conf_ext(de->d_name))
			continue;
		if (de->d_type != DT_REG && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
			continue;
		if (s.n >= SCAN_FILES_MAX) {
			conf_scan_done(&s);
			return error_set(err, E2BIG, "CNI config dir %s: more than %d config files", dir,
			                 SCAN_FILES_MAX);
		}
		if (s.n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct conf_entry *nv = realloc(s.v, ncap * sizeof(*nv));
			if (!nv) {
				conf_scan_done(&s);
				return error_set(err, ENOMEM, "CNI config dir %s: out of memory", dir);
			}
			s.v = nv;
			cap = ncap;
		}
		e = &s.v[s.n];
		memset(e, 0, sizeof(*e));
		if (str_copy(e->name, sizeof(e->name), de->d_name) < 0)
			continue;
		if (path_join(path, sizeof(path), dir, e->name, NULL) < 0)
			continue;
		e->load_r = file_read(path, CHAIN_CONF_MAX_BYTES, &text, &len, &e->mode, &e->load_err);
		if (e->load_r == -ENOENT)
			continue; /* vanished since readdir (or a dangling symlink): not there */
		if (e->load_r == 0) {
			e->load_r = json_parse(text, len, path, &e->json, &e->load_err);
			if (e->load_r == 0 && !cJSON_IsObject(e->json)) {
				e->load_r = error_set(&e->load_err, EINVAL, "%s: not a JSON object", path);
				cJSON_Delete(e->json);
				e->json = NULL;
			}
		}
		e->marked = json_is_owned(e->json);
		e->owned = e->marked || strncmp(e->name, CHAIN_OWNED_PREFIX, strlen(CHAIN_OWNED_PREFIX)) == 0;
		s.n++;
	}
	if (s.n > 1)
		qsort(s.v, s.n, sizeof(s.v[0]), entry_cmp);
	*ret = s;
	return 0;
}

/* The list view of a network config: a .conflist as is (a copy; libcni >= 1.3
 * allows one without "plugins" that takes all of them from drop-ins: an empty
 * list here), a single-plugin config as {"cniVersion","name","plugins":[<it>]}
 * (libcni's ConfListFromConf). */
static int conflist_view(const cJSON *j, const char *path, bool list_file, cJSON **ret, struct error *err)
{
	_cleanup_json_ cJSON *v = NULL;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
	const cJSON *plugins = cJSON_GetObjectItemCaseSensitive(j, "plugins");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
	const cJSON *p;
	size_t i = 0;

	if (!cJSON_IsString(name) || !name->valuestring[0])
		return error_set(err, EINVAL, "%s: \"name\" missing or not a non-empty string", path);
	if (plugins) {
		if (!cJSON_IsArray(plugins))
			return error_set(err, EINVAL, "%s: \"plugins\" is not an array", path);
		cJSON_ArrayForEach(p, plugins)
		{
			const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
			if (!cJSON_IsObject(p) || !cJSON_IsString(t) || !t->valuestring[0])
				return error_set(err, EINVAL,
				                 "%s: plugins[%zu] is not an object with a \"type\" string", path, i);
			i++;
		}
		v = cJSON_Duplicate(j, true);
		if (!v)
			return error_set(err, ENOMEM, "%s: out of memory", path);
	} else if (cJSON_IsString(type) && type->valuestring[0]) {
		const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "cniVersion");
		cJSON *list, *copy;

		v = cJSON_CreateObject();
		if (!v)
			return error_set(err, ENOMEM, "%s: out of memory", path);
		if (ver && !cJSON_AddItemToObject(v, "cniVersion", cJSON_Duplicate(ver, true)))
			return error_set(err, ENOMEM, "%s: out of memory", path);
		if (!cJSON_AddStringToObject(v, "name", name->valuestring))
			return error_set(err, ENOMEM, "%s: out of memory", path);
		list = cJSON_AddArrayToObject(v, "plugins");
		copy = cJSON_Duplicate(j, true);
		if (!list || !copy || !cJSON_AddItemToArray(list, copy)) {
			cJSON_Delete(copy);
			return error_set(err, ENOMEM, "%s: out of memory", path);
		}
	} else if (list_file) {
		v = cJSON_Duplicate(j, true);
		if (!v || !cJSON_AddArrayToObject(v, "plugins"))
			return error_set(err, ENOMEM, "%s: out of memory", path);
	} else {
		return error_set(err, EINVAL,
		                 "%s: neither a network config list (\"plugins\") nor a plugin config (\"type\")",
		                 path);
	}
	*ret = TAKE_PTR(v);
	return 0;
}

static bool entry_is_type(const cJSON *p, const char *type)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
	return cJSON_IsString(t) && streq(t->valuestring, type);
}

static size_t plugins_count_all(const cJSON *list)
{
	const cJSON *plugins = cJSON_GetObjectItemCaseSensitive(list, "plugins");
	return cJSON_IsArray(plugins) ? (size_t)cJSON_GetArraySize(plugins) : 0;
}

static size_t plugins_count_type(const cJSON *list, const char *type)
{
	const cJSON *plugins = cJSON_GetObjectItemCaseSensitive(list, "plugins");
	const cJSON *p;
	size_t n = 0;

	cJSON_ArrayForEach(p, plugins)
	{
		if (entry_is_type(p, type))
			n++;
	}
	return n;
}

/* Is the entry chained exactly once and equal to want? */
static bool plugins_has_exactly(const cJSON *list, const cJSON *want, const char *type)
{
	const cJSON *plugins = cJSON_GetObjectItemCaseSensitive(list, "plugins");
	const cJSON *p;
	bool found = false;

	cJSON_ArrayForEach(p, plugins)
	{
		if (!entry_is_type(p, type))
			continue;
		if (found || !cJSON_Compare(p, want, true))
			return false;
		found = true;
	}
	return found;
}

/* Remove every entry of type from list's plugins; returns how many. */
static size_t plugins_remove_type(cJSON *list, const char *type)
{
	cJSON *plugins = cJSON_GetObjectItemCaseSensitive(list, "plugins");
	cJSON *p, *next;
	size_t n = 0;

	if (!cJSON_IsArray(plugins))
		return 0;
	for (p = plugins->child; p; p = next) {
		next = p->next;
		if (entry_is_type(p, type)) {
			cJSON_Delete(cJSON_DetachItemViaPointer(plugins, p));
			n++;
		}
	}
	return n;
}

/* Put want into list's plugins exactly once: replacing the first entry of its
 * type in place (others removed) or appended. */
static int plugins_put(cJSON *list, const cJSON *want, const char *type)
{
	cJSON *plugins = cJSON_GetObjectItemCaseSensitive(list, "plugins");
	cJSON *p, *next, *dup;
	bool placed = false;

	if (!cJSON_IsArray(plugins))
		return -EINVAL;
	for (p = plugins->child; p; p = next) {
		next = p->next;
		if (!entry_is_type(p, type))
			continue;
		if (placed) {
			cJSON_Delete(cJSON_DetachItemViaPointer(plugins, p));
			continue;
		}
		dup = cJSON_Duplicate(want, true);
		if (!dup || !cJSON_ReplaceItemViaPointer(plugins, p, dup)) {
			cJSON_Delete(dup);
			return -ENOMEM;
		}
		placed = true;
	}
	if (!placed) {
		dup = cJSON_Duplicate(want, true);
		if (!dup || !cJSON_AddItemToArray(plugins, dup)) {
			cJSON_Delete(dup);
			return -ENOMEM;
		}
	}
	return 0;
}

static int object_set(cJSON *o, const char *key, cJSON *v)
{
	if (!v)
		return -ENOMEM;
	if (cJSON_GetObjectItemCaseSensitive(o, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(o, key, v) ? 0 : -ENOMEM;
	return cJSON_AddItemToObject(o, key, v) ? 0 : -ENOMEM;
}

/* Printed form of a config we write: formatted, trailing newline. */
static char *json_print_file(const cJSON *j)
{
	_cleanup_free_ char *s = cJSON_Print(j);
	char *out;
	size_t n;

	if (!s)
		return NULL;
	n = strlen(s);
	out = malloc(n + 2);
	if (!out)
		return NULL;
	memcpy(out, s, n);
	out[n] = '\n';
	out[n + 1] = '\0';
	return out;
}

/* ---- the aiqos entry ---- */

static int plugin_entry_parse(const struct chain_options *o, bool validate, cJSON **ret, char *type, size_t type_size,
                              struct error *err)
{
	const char *text = o->plugin_conf ? o->plugin_conf : CHAIN_PLUGIN_CONF_DEFAULT;
	_cleanup_json_ cJSON *j = NULL;
	const cJSON *t;
	int r;

	r = json_parse(text, strlen(text), "aiqos plugin config", &j, err);
	if (r < 0)
		return r;
	t = cJSON_GetObjectItemCaseSensitive(j, "type");
	if (!cJSON_IsObject(j) || !cJSON_IsString(t))
		return error_set(err, EINVAL, "aiqos plugin config: not a JSON object with a \"type\" string");
	if (!t->valuestring[0] || strchr(t->valuestring, '/') || streq(t->valuestring, ".") ||
	    streq(t->valuestring, "..") || str_copy(type, type_size, t->valuestring) < 0)
		return error_set(err, EINVAL,
		                 "aiqos plugin config: \"type\" must be a plain file name of at most %zu bytes",
		                 type_size - 1);
	/* The entry as the plugin will read it (libcni adds the network's
	 * name and cniVersion): through the plugin's own parser, so a typo
	 * ("failurePolicy": "opne") is refused here, not at every pod's ADD. */
	if (validate) {
		_cleanup_json_ cJSON *net = cJSON_Duplicate(j, 1);
		_cleanup_free_ char *text_net = NULL;
		struct cni_conf c;
		struct error e = {0};

		if (!net || !cJSON_AddStringToObject(net, "cniVersion", "1.1.0") ||
		    (!cJSON_GetObjectItemCaseSensitive(net, "name") &&
		     !cJSON_AddStringToObject(net, "name", "aiqos-install-check")) ||
		    !(text_net = cJSON_PrintUnformatted(net)))
			return error_set(err, ENOMEM, "aiqos plugin config: out of memory");
		r = cni_conf_parse(text_net, strlen(text_net), &c, &e);
		cni_conf_free(&c);
		if (r < 0)
			return error_set(err, e.errnum ? e.errnum : EINVAL, "aiqos plugin config: %s", e.msg);
	}
	*ret = TAKE_PTR(j);
	return 0;
}

/* The plugin binary the chain will name: a regular, executable file. */
static int binary_check(const char *bin_dir, const char *type, struct error *err)
{
	char path[PATH_MAX];
	struct stat st;

	if (path_join(path, sizeof(path), bin_dir, type, err) < 0)
		return -ENAMETOOLONG;
	if (stat(path, &st) < 0)
		return error_set(
		        err, errno,
		        "plugin binary %s: %s; not chaining a plugin the runtime cannot run (install it there, "
		        "e.g. with --plugin-src)",
		        path, strerror(errno));
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
		return error_set(
		        err, EACCES,
		        "plugin binary %s is not an executable file; not chaining a plugin the runtime cannot run",
		        path);
	return 0;
}

static void report_init(struct chain_report *r)
{
	memset(r, 0, sizeof(*r));
}

/* ---- strategy helpers ---- */

/* Delete every marked (owned) config file but keep (may be NULL). */
static int owned_remove_except(const char *dir, const struct conf_scan *s, const char *keep, struct chain_report *rep,
                               struct error *err)
{
	for (size_t i = 0; i < s->n; i++) {
		bool removed;
		int r;

		if (!s->v[i].marked || (keep && streq(s->v[i].name, keep)))
			continue;
		r = file_remove(dir, s->v[i].name, &removed, err);
		if (r < 0)
			return r;
		if (removed) {
			rep->conf_changed = true;
			what_add(rep, "removed stale %s/%s", dir, s->v[i].name);
		}
	}
	return 0;
}

/* Delete "<dir>/<net>/aiqos.conf" if it is ours (its type), and the dir if
 * that leaves it empty. */
static int dropin_remove(const char *dir, const char *net, const char *type, struct chain_report *rep,
                         struct error *err)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ cJSON *j = NULL;
	char sub[PATH_MAX], path[PATH_MAX];
	size_t len = 0;
	bool removed;
	int r;

	if (!name_is_path_safe(net))
		return 0;
	r = path_join(sub, sizeof(sub), dir, net, err);
	if (r < 0)
		return r;
	r = path_join(path, sizeof(path), sub, CHAIN_DROPIN_FILE, err);
	if (r < 0)
		return r;
	r = file_read(path, CHAIN_CONF_MAX_BYTES, &text, &len, NULL, NULL);
	if (r < 0)
		return 0; /* absent or unreadable: not ours to touch */
	if (json_parse(text, len, path, &j, NULL) < 0 || !entry_is_type(j, type))
		return 0;
	r = file_remove(sub, CHAIN_DROPIN_FILE, &removed, err);
	if (r < 0)
		return r;
	if (removed) {
		rep->conf_changed = true;
		what_add(rep, "removed %s", path);
	}
	if (rmdir(sub) == 0)
		(void)dir_fsync(dir);
	return 0;
}

static int strategy_dropin(const char *dir, const struct conf_entry *pri, const cJSON *view, const cJSON *entry,
                           struct chain_report *rep, struct error *err)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(view, "name");
	_cleanup_free_ char *text = NULL;
	char sub[PATH_MAX];
	bool written;
	int r;

	r = path_join(sub, sizeof(sub), dir, name->valuestring, err);
	if (r < 0)
		return r;
	if (mkdir(sub, 0755) == 0) {
		/* readable by the runtime whatever our umask (the unit sets 0077) */
		if (chmod(sub, 0755) < 0)
			return error_set(err, errno, "%s: chmod: %s", sub, strerror(errno));
	} else if (errno != EEXIST) {
		return error_set(err, errno, "%s: mkdir: %s", sub, strerror(errno));
	}
	text = json_print_file(entry);
	if (!text)
		return error_set(err, ENOMEM, "%s: out of memory", sub);
	r = file_ensure(sub, CHAIN_DROPIN_FILE, text, 0644, &written, err);
	if (r < 0)
		return r;
	rep->strategy = CHAIN_STRATEGY_DROPIN;
	rep->conf_changed |= written;
	path_join(rep->target, sizeof(rep->target), sub, CHAIN_DROPIN_FILE, NULL);
	what_add(rep, "%s %s (drop-in for network \"%s\" of %s)", written ? "wrote" : "unchanged", rep->target,
	         name->valuestring, pri->name);
	return 0;
}

static int strategy_in_place(const char *dir, const struct conf_entry *pri, const cJSON *entry, const char *type,
                             struct chain_report *rep, struct error *err)
{
	_cleanup_json_ cJSON *edited = NULL;
	_cleanup_free_ char *text = NULL;
	char path[PATH_MAX];
	int r;

	r = path_join(path, sizeof(path), dir, pri->name, err);
	if (r < 0)
		return r;
	rep->strategy = CHAIN_STRATEGY_IN_PLACE;
	snprintf(rep->target, sizeof(rep->target), "%s", path);
	if (plugins_has_exactly(pri->json, entry, type)) {
		what_add(rep, "unchanged %s (aiqos chained in place)", path);
		return 0;
	}
	if (!has_suffix(pri->name, ".conflist"))
		return error_set(err, EINVAL,
		                 "%s: a single-plugin config cannot be edited in place (the runtime reads it as "
		                 "one plugin); use the owned copy",
		                 path);
	if (plugins_count_all(pri->json) == 0)
		return error_set(err, EINVAL,
		                 "%s: lists no plugins inline (only drop-ins); aiqos must follow the main plugin: "
		                 "use the drop-in dir",
		                 path);
	edited = cJSON_Duplicate(pri->json, true);
	if (!edited || plugins_put(edited, entry, type) < 0)
		return error_set(err, ENOMEM, "%s: out of memory", path);
	text = json_print_file(edited);
	if (!text)
		return error_set(err, ENOMEM, "%s: out of memory", path);
	r = file_write_atomic(dir, pri->name, text, strlen(text), pri->mode & 0777, err);
	if (r < 0)
		return r;
	rep->conf_changed = true;
	what_add(rep, "edited %s in place (aiqos chained)", path);
	return 0;
}

/* "10-kindnet.conflist" -> "00-aiqos-10-kindnet.conflist" */
static int owned_name(const char *primary, char *buf, size_t size, struct error *err)
{
	const char *ext = conf_ext(primary);
	size_t base = strlen(primary) - (ext ? strlen(ext) : 0);
	int n = snprintf(buf, size, "%s%.*s.conflist", CHAIN_OWNED_PREFIX, (int)base, primary);

	if (n < 0 || (size_t)n >= size || (size_t)n > NAME_MAX)
		return error_set(err, ENAMETOOLONG, "%s: name too long for an owned copy", primary);
	return 0;
}

static int strategy_owned_copy(const char *dir, const struct conf_entry *pri, const cJSON *view, const cJSON *entry,
                               const char *type, char *target, size_t target_size, struct chain_report *rep,
                               struct error *err)
{
	_cleanup_json_ cJSON *copy = NULL;
	_cleanup_free_ char *text = NULL;
	bool written;
	int r;

	r = owned_name(pri->name, target, target_size, err);
	if (r < 0)
		return r;
	if (plugins_count_all(view) == 0)
		return error_set(err, EINVAL,
		                 "%s/%s: lists no plugins inline (only drop-ins); aiqos must follow the main plugin: "
		                 "use the drop-in dir",
		                 dir, pri->name);
	if (strcmp(target, pri->name) >= 0)
		return error_set(err, EEXIST,
		                 "%s/%s: an owned copy named %s would not sort before it, so the runtime would "
		                 "not use it; use edit-in-place or the drop-in dir",
		                 dir, pri->name, target);
	copy = cJSON_Duplicate(view, true);
	if (!copy || plugins_put(copy, entry, type) < 0 ||
	    object_set(copy, CHAIN_MARKER_OWNED, cJSON_CreateTrue()) < 0 ||
	    object_set(copy, CHAIN_MARKER_SOURCE, cJSON_CreateString(pri->name)) < 0)
		return error_set(err, ENOMEM, "%s/%s: out of memory", dir, target);
	text = json_print_file(copy);
	if (!text)
		return error_set(err, ENOMEM, "%s/%s: out of memory", dir, target);
	r = file_ensure(dir, target, text, 0644, &written, err);
	if (r < 0)
		return r;
	rep->strategy = CHAIN_STRATEGY_OWNED_COPY;
	rep->conf_changed |= written;
	snprintf(rep->target, sizeof(rep->target), "%s/%s", dir, target);
	what_add(rep, "%s %s (aiqos chained into a copy of %s)", written ? "wrote" : "unchanged", rep->target,
	         pri->name);
	return 0;
}

/* ---- entry points ---- */

/* What install and uninstall start with: an empty report, a config dir,
 * aiqos' own entry parsed (validated for an install) into *entry. */
static int chain_begin(const struct chain_options *o, bool validate, struct chain_report *rep, cJSON **entry,
                       char *type, size_t type_size, struct error *err)
{
	report_init(rep);
	if (!o || !o->conf_dir || !o->conf_dir[0])
		return error_set(err, EINVAL, "chain: no CNI config dir given");
	return plugin_entry_parse(o, validate, entry, type, type_size, err);
}

int chain_plugin_type(const struct chain_options *o, char *type, size_t type_size, struct error *err)
{
	_cleanup_json_ cJSON *entry = NULL;

	return plugin_entry_parse(o, false, &entry, type, type_size, err);
}

bool chain_conf_names_type(const char *text, size_t len, const char *type)
{
	_cleanup_json_ cJSON *j = cJSON_ParseWithLength(text, len);

	if (!cJSON_IsObject(j))
		return false;
	if (cJSON_HasObjectItem(j, "plugins"))
		return plugins_count_type(j, type) > 0;
	return entry_is_type(j, type);
}

int chain_ensure_report(const struct chain_options *o, struct chain_report *ret, struct error *err)
{
	_cleanup_json_ cJSON *entry = NULL, *view = NULL;
	struct conf_scan scan = {0};
	struct chain_report rep;
	const struct conf_entry *pri = NULL;
	char type[TYPE_MAX], target[NAME_MAX + 1];
	const char *dir;
	bool dropin_ok = false;
	int r;

	r = chain_begin(o, true, &rep, &entry, type, sizeof(type), err);
	if (r < 0)
		return r;
	dir = o->conf_dir;

	if (o->plugin_src && o->bin_dir) {
		r = binary_install(o->plugin_src, o->bin_dir, type, &rep.binary_changed, err);
		if (r < 0)
			return r;
		if (rep.binary_changed)
			what_add(&rep, "copied %s to %s/%s", o->plugin_src, o->bin_dir, type);
	}

	r = conf_scan(dir, &scan, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < scan.n; i++) {
		if (!scan.v[i].owned) {
			pri = &scan.v[i];
			break;
		}
	}

	if (!pri) {
		rep.no_primary = true;
		what_add(&rep, "no primary network config in %s%s", dir, scan.dir_missing ? " (no such dir)" : "");
		r = owned_remove_except(dir, &scan, NULL, &rep, err);
		goto out;
	}
	str_copy(rep.primary, sizeof(rep.primary), pri->name);
	if (pri->load_r < 0) {
		/* the runtime would use (or choke on) this file: write nothing */
		error_propagate(err, &pri->load_err);
		error_prefix(err, "primary CNI network config");
		r = pri->load_r;
		goto out;
	}
	{
		char path[PATH_MAX];
		if (path_join(path, sizeof(path), dir, pri->name, err) < 0) {
			r = -ENAMETOOLONG;
			goto out;
		}
		r = conflist_view(pri->json, path, has_suffix(pri->name, ".conflist"), &view, err);
		if (r < 0) {
			error_prefix(err, "primary CNI network config");
			goto out;
		}
	}

	if (plugins_count_type(view, "bandwidth") > 0) {
		/* two shapers on every pod (its 25 ms TBF queue in front of
		 * ours): chained all the same, the pods are not to lose their
		 * tuning, but loudly, with the way out */
		rep.two_shapers = true;
		what_add(&rep,
		         "WARNING: %s also chains the \"bandwidth\" plugin: every pod is shaped twice (aiqos shapes "
		         "kubernetes.io/ingress-bandwidth and egress-bandwidth itself); remove it from that chain",
		         pri->name);
	}
	if (o->bin_dir) {
		r = binary_check(o->bin_dir, type, err);
		if (r < 0)
			goto out;
	}

	if (o->dropin) {
		const cJSON *net = cJSON_GetObjectItemCaseSensitive(view, "name");
		const cJSON *inl = cJSON_GetObjectItemCaseSensitive(pri->json, "loadOnlyInlinedPlugins");
		if (!has_suffix(pri->name, ".conflist"))
			what_add(&rep, "%s is not a .conflist, libcni loads no drop-ins for it", pri->name);
		else if (cJSON_IsTrue(inl) || (cJSON_IsString(inl) && !strcasecmp(inl->valuestring, "true")))
			what_add(&rep, "%s sets loadOnlyInlinedPlugins", pri->name);
		else if (!name_is_path_safe(net->valuestring))
			what_add(&rep, "network name of %s is not usable as a dir name", pri->name);
		else
			dropin_ok = true;
	}

	if (dropin_ok && plugins_count_type(pri->json, type) > 0) {
		/* already listed inline (edited in place before, or by hand): a
		 * drop-in would chain it twice */
		rep.strategy = CHAIN_STRATEGY_IN_PLACE;
		snprintf(rep.target, sizeof(rep.target), "%s/%s", dir, pri->name);
		what_add(&rep, "%s already lists %s, no drop-in needed", pri->name, type);
		r = owned_remove_except(dir, &scan, NULL, &rep, err);
		if (r == 0)
			r = dropin_remove(dir, cJSON_GetObjectItemCaseSensitive(view, "name")->valuestring, type, &rep,
			                  err);
	} else if (dropin_ok) {
		r = strategy_dropin(dir, pri, view, entry, &rep, err);
		if (r == 0)
			r = owned_remove_except(dir, &scan, NULL, &rep, err);
	} else if (o->edit_in_place) {
		r = strategy_in_place(dir, pri, entry, type, &rep, err);
		if (r == 0)
			r = owned_remove_except(dir, &scan, NULL, &rep, err);
		if (r == 0)
			r = dropin_remove(dir, cJSON_GetObjectItemCaseSensitive(view, "name")->valuestring, type, &rep,
			                  err);
	} else {
		r = strategy_owned_copy(dir, pri, view, entry, type, target, sizeof(target), &rep, err);
		if (r == 0)
			r = owned_remove_except(dir, &scan, target, &rep, err);
		if (r == 0)
			r = dropin_remove(dir, cJSON_GetObjectItemCaseSensitive(view, "name")->valuestring, type, &rep,
			                  err);
	}

out:
	conf_scan_done(&scan);
	if (r < 0)
		return r;
	if (ret)
		*ret = rep;
	return 0;
}

int chain_ensure(const struct chain_options *o, bool *ret_changed, char *ret_what, size_t what_size, struct error *err)
{
	struct chain_report rep = {0};
	int r = chain_ensure_report(o, &rep, err);

	if (r < 0)
		return r;
	if (ret_changed)
		*ret_changed = rep.binary_changed || rep.conf_changed;
	if (ret_what && what_size > 0)
		str_copy(ret_what, what_size, rep.what);
	return 0;
}

/* Remove our entries from a list edited in place (never empty a list). */
static int unedit(const char *dir, const struct conf_entry *e, const char *type, struct chain_report *rep,
                  struct error *err)
{
	_cleanup_json_ cJSON *edited = NULL;
	_cleanup_free_ char *text = NULL;
	const cJSON *plugins;
	size_t n;

	plugins = cJSON_GetObjectItemCaseSensitive(e->json, "plugins");
	if (!cJSON_IsArray(plugins))
		return 0;
	n = plugins_count_type(e->json, type);
	if (n == 0 || (size_t)cJSON_GetArraySize(plugins) <= n)
		return 0;
	edited = cJSON_Duplicate(e->json, true);
	if (!edited)
		return error_set(err, ENOMEM, "%s/%s: out of memory", dir, e->name);
	plugins_remove_type(edited, type);
	text = json_print_file(edited);
	if (!text)
		return error_set(err, ENOMEM, "%s/%s: out of memory", dir, e->name);
	int r = file_write_atomic(dir, e->name, text, strlen(text), e->mode & 0777, err);
	if (r < 0)
		return r;
	rep->conf_changed = true;
	what_add(rep, "removed %s from %s/%s", type, dir, e->name);
	return 0;
}

int chain_remove_report(const struct chain_options *o, bool remove_binary, struct chain_report *ret, struct error *err)
{
	_cleanup_json_ cJSON *entry = NULL;
	_cleanup_dir_ DIR *d = NULL;
	struct conf_scan scan = {0};
	struct chain_report rep;
	char type[TYPE_MAX];
	const char *dir;
	int r;

	r = chain_begin(o, false, &rep, &entry, type, sizeof(type), err);
	if (r < 0)
		return r;
	dir = o->conf_dir;
	r = conf_scan(dir, &scan, err);
	if (r < 0)
		return r;
	r = owned_remove_except(dir, &scan, NULL, &rep, err);
	for (size_t i = 0; r == 0 && i < scan.n; i++) {
		if (!scan.v[i].owned && scan.v[i].json)
			r = unedit(dir, &scan.v[i], type, &rep, err);
	}
	conf_scan_done(&scan);
	if (r < 0)
		return r;

	/* drop-ins: <dir>/<net>/aiqos.conf for every sub dir */
	d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.' || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
				continue;
			r = dropin_remove(dir, de->d_name, type, &rep, err);
			if (r < 0)
				return r;
		}
	} else if (errno != ENOENT) {
		return error_set(err, errno, "CNI config dir %s: %s", dir, strerror(errno));
	}

	if (remove_binary && o->bin_dir) {
		bool removed;
		r = file_remove(o->bin_dir, type, &removed, err);
		if (r < 0)
			return r;
		if (removed) {
			rep.binary_changed = true;
			what_add(&rep, "removed %s/%s", o->bin_dir, type);
		}
	}
	if (!rep.what[0])
		what_add(&rep, "nothing to remove in %s", dir);
	if (ret)
		*ret = rep;
	return 0;
}

int chain_remove(const struct chain_options *o, bool remove_binary, struct error *err)
{
	return chain_remove_report(o, remove_binary, NULL, err);
}

/* ---- read-only view (doctor) ---- */

static void types_of(const struct conf_entry *e, char *buf, size_t size)
{
	_cleanup_json_ cJSON *view = NULL;
	const cJSON *plugins, *p;
	size_t len = 0;

	buf[0] = '\0';
	if (!e->json || conflist_view(e->json, e->name, streq(conf_ext(e->name), ".conflist"), &view, NULL) < 0)
		return;
	plugins = cJSON_GetObjectItemCaseSensitive(view, "plugins");
	cJSON_ArrayForEach(p, plugins)
	{
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
		int n;

		if (!cJSON_IsString(t))
			continue;
		n = snprintf(buf + len, size - len, "%s%s", len ? "," : "", t->valuestring);
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
}

int chain_inspect(const char *conf_dir, struct chain_view *ret, struct error *err)
{
	struct conf_scan scan = {0};
	int r;

	memset(ret, 0, sizeof(*ret));
	r = conf_scan(conf_dir, &scan, err);
	if (r < 0)
		return r;
	ret->dir_missing = scan.dir_missing;
	ret->n_files = (unsigned)scan.n;
	for (size_t i = 0; i < scan.n; i++) {
		const struct conf_entry *e = &scan.v[i];

		if (e->owned)
			ret->n_owned++;
		if (!ret->loaded[0] && e->load_r == 0) {
			str_copy(ret->loaded, sizeof(ret->loaded), e->name);
			types_of(e, ret->loaded_types, sizeof(ret->loaded_types));
		}
		if (!e->owned && !ret->primary[0]) {
			str_copy(ret->primary, sizeof(ret->primary), e->name);
			ret->primary_load_r = e->load_r;
			if (e->load_r < 0)
				str_copy(ret->primary_load_msg, sizeof(ret->primary_load_msg), e->load_err.msg);
			else
				types_of(e, ret->primary_types, sizeof(ret->primary_types));
		}
	}
	conf_scan_done(&scan);
	return 0;
}
