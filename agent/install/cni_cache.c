/* cni_cache.c — count libcni's cached configs that chain a plugin type (see
 * cni_cache.h). Read only; every file bounded. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "file.h"
#include "install/chain.h"
#include "install/cni_cache.h"
#include "json.h"
#include "kube/kubeconfig.h"

#define CACHE_ENTRY_MAX (1024 * 1024)
#define CACHE_FILES_MAX 65536

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/* 1: names type, 0: does not, -1: not a cache entry */
static int entry_names(const char *path, const char *type)
{
	_cleanup_free_ char *text = NULL, *config = NULL;
	_cleanup_json_ cJSON *j = NULL;
	const cJSON *c;
	size_t len = 0, config_len = 0;
	struct error e = {0};

	if (file_read_bounded(path, CACHE_ENTRY_MAX, FILE_READ_NOFOLLOW, &text, &len, NULL, &e) < 0)
		return -1;
	j = cJSON_ParseWithLength(text, len);
	c = cJSON_GetObjectItemCaseSensitive(j, "config");
	if (!cJSON_IsString(c) ||
	    kube_base64_decode(c->valuestring, strlen(c->valuestring), &config, &config_len, NULL) < 0)
		return -1;
	return chain_conf_names_type(config, config_len, type) ? 1 : 0;
}

int cni_cache_count_type(const char *cache_dir, const char *type, struct cni_cache_count *ret, struct error *err)
{
	_cleanup_(closedirp) DIR *d = NULL;
	char path[PATH_MAX];
	struct cni_cache_count n = {0};
	struct dirent *de;
	struct stat st;
	unsigned seen = 0;

	*ret = n;
	if (stat(cache_dir, &st) < 0)
		return error_set(err, errno, "CNI cache dir %s: %s", cache_dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return error_set(err, ENOTDIR, "CNI cache dir %s: not a directory", cache_dir);
	if (snprintf(path, sizeof(path), "%s/results", cache_dir) >= (int)sizeof(path))
		return error_set(err, ENAMETOOLONG, "CNI cache dir %s: path too long", cache_dir);
	d = opendir(path);
	if (!d) {
		if (errno == ENOENT) /* no pod was ever created through libcni here */
			return 0;
		return error_set(err, errno, "%s: %s", path, strerror(errno));
	}
	while ((de = readdir(d))) {
		char file[PATH_MAX];
		int r;

		if (de->d_name[0] == '.')
			continue;
		if (++seen > CACHE_FILES_MAX)
			return error_set(err, E2BIG, "%s: more than %d entries", path, CACHE_FILES_MAX);
		if (snprintf(file, sizeof(file), "%s/%s", path, de->d_name) >= (int)sizeof(file)) {
			n.unreadable++;
			continue;
		}
		r = entry_names(file, type);
		if (r > 0)
			n.naming++;
		else if (r == 0)
			n.others++;
		else
			n.unreadable++;
	}
	*ret = n;
	return 0;
}
