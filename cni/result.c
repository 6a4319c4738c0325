/* result.c — what the plugin prints on stdout: the result (prevResult passed
 * through with the config's cniVersion), the error object and the VERSION
 * answer. Nothing else ever goes to stdout. */
#include "cni.h"

static int print_json(FILE *out, const cJSON *j, struct error *err)
{
	_cleanup_free_ char *s = cJSON_PrintUnformatted(j);

	if (!s)
		return cni_error_set(err, CNI_ERR_IO, ENOMEM, "cannot encode result: out of memory");
	if (fputs(s, out) == EOF || fputc('\n', out) == EOF || fflush(out) == EOF)
		return cni_error_set(err, CNI_ERR_IO, errno ? errno : EIO, "cannot write result: %s",
		                     strerror(errno ? errno : EIO));
	return 0;
}

int cni_result_print(FILE *out, const cJSON *prev_result, const char *cni_version, struct error *err)
{
	_cleanup_json_ cJSON *res = cJSON_CreateObject();
	const cJSON *e;

	if (!res || !cJSON_AddStringToObject(res, "cniVersion", cni_version))
		return cni_error_set(err, CNI_ERR_IO, ENOMEM, "cannot encode result: out of memory");
	/* Same keys in the same order, only cniVersion replaced (and first). */
	cJSON_ArrayForEach(e, prev_result)
	{
		cJSON *dup;
		if (!e->string || streq(e->string, "cniVersion"))
			continue;
		dup = cJSON_Duplicate(e, 1);
		if (!dup)
			return cni_error_set(err, CNI_ERR_IO, ENOMEM, "cannot encode result: out of memory");
		if (!cJSON_AddItemToObject(res, e->string, dup)) {
			cJSON_Delete(dup);
			return cni_error_set(err, CNI_ERR_IO, ENOMEM, "cannot encode result: out of memory");
		}
	}
	return print_json(out, res, err);
}

int cni_error_print(FILE *out, const char *cni_version, int code, const char *msg, const char *details)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();

	if (!j || !cJSON_AddStringToObject(j, "cniVersion", cni_version ? cni_version : CNI_VERSION_LATEST) ||
	    !cJSON_AddNumberToObject(j, "code", code) || !cJSON_AddStringToObject(j, "msg", msg ? msg : "") ||
	    (details && details[0] && !cJSON_AddStringToObject(j, "details", details))) {
		/* Out of memory: still say something valid. */
		fprintf(out, "{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":\"out of memory\"}\n", CNI_VERSION_LATEST,
		        code);
		fflush(out);
		return -ENOMEM;
	}
	return print_json(out, j, NULL);
}

int cni_version_print(FILE *out)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	cJSON *list;

	if (!j || !cJSON_AddStringToObject(j, "cniVersion", CNI_VERSION_LATEST))
		return -ENOMEM;
	list = cJSON_AddArrayToObject(j, "supportedVersions");
	if (!list)
		return -ENOMEM;
	for (int v = 0; v < _CNI_V_MAX; v++) {
		cJSON *s = cJSON_CreateString(cni_version_name((enum cni_version)v));
		if (!s)
			return -ENOMEM;
		cJSON_AddItemToArray(list, s);
	}
	return print_json(out, j, NULL);
}
