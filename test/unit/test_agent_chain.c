/* test_agent_chain.c — installing and chaining aiqos into a CNI config dir
 * (agent/install/chain.c), in temp dirs, no root: the kindnet owned copy exactly once,
 * idempotence, regeneration after an atomic rewrite, removal when the primary
 * vanishes, .conf primaries, malformed primaries, drop-in and in-place modes,
 * removal, the binary copy, and which file is the primary. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <sys/stat.h>

#include "../../agent/install/chain.h"
#include "t.h"

#define KINDNET_0                                                                                                   \
	"{\n"                                                                                                       \
	"\t\"cniVersion\": \"0.3.1\",\n"                                                                            \
	"\t\"name\": \"kindnet\",\n"                                                                                \
	"\t\"plugins\": [\n"                                                                                        \
	"\t\t{\"type\": \"ptp\", \"ipMasq\": false, \"ipam\": {\"type\": \"host-local\", \"dataDir\": "             \
	"\"/run/cni-ipam-state\",\n"                                                                                \
	"\t\t  \"routes\": [{\"dst\": \"0.0.0.0/0\"}], \"ranges\": [[{\"subnet\": \"10.244.0.0/24\"}]]}, \"mtu\": " \
	"1500},\n"                                                                                                  \
	"\t\t{\"type\": \"portmap\", \"capabilities\": {\"portMappings\": true}}\n"                                 \
	"\t]\n"                                                                                                     \
	"}\n"
#define KINDNET_1                                                                                         \
	"{\"cniVersion\":\"0.3.1\",\"name\":\"kindnet\",\"plugins\":[{\"type\":\"ptp\",\"ipMasq\":false," \
	"\"ipam\":{\"type\":\"host-local\",\"ranges\":[[{\"subnet\":\"10.244.7.0/24\"}]]},\"mtu\":1500}," \
	"{\"type\":\"portmap\",\"capabilities\":{\"portMappings\":true}}]}"

/* A fresh dir <t_tmpdir()>/<tag> with conf/ and bin/ inside. */
static const char *fresh(const char *tag)
{
	static char dir[512];
	char p[600];

	t_tmppath(dir, sizeof(dir), tag);
	if (mkdir(dir, 0755) < 0) {
		perror(dir);
		exit(1);
	}
	snprintf(p, sizeof(p), "%s/conf", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/bin", dir);
	mkdir(p, 0755);
	/* the plugin binary in place, as install requires before chaining */
	snprintf(p, sizeof(p), "%s/bin/aiqos", dir);
	{
		FILE *f = fopen(p, "we");
		if (!f || fputs("#!/bin/sh\n", f) < 0 || fclose(f) != 0 || chmod(p, 0755) < 0) {
			perror(p);
			exit(1);
		}
	}
	return dir;
}

static const char *pathf(const char *dir, const char *sub, const char *name)
{
	static char bufs[4][700];
	static int i;
	char *b = bufs[i++ % 4];
	snprintf(b, sizeof(bufs[0]), "%s/%s/%s", dir, sub, name);
	return b;
}

static void put_mode(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "we");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

static void put(const char *path, const char *text)
{
	put_mode(path, text, 0644);
}

/* Replace path atomically (write a temp file, rename), as kindnetd does. */
static void put_rename(const char *path, const char *text)
{
	char tmp[800];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	put(tmp, text);
	if (rename(tmp, path) < 0)
		perror("rename");
}

static char *slurp(const char *path)
{
	static char buf[256 * 1024];
	FILE *f = fopen(path, "re");
	size_t n;
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static ino_t inode(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_mode & 07777 : 0;
}

/* The entries of dir, sorted, space separated ("" if empty). */
static const char *listing(const char *dir)
{
	static char out[2048];
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(names[i]->d_name, ".") != 0 && strcmp(names[i]->d_name, "..") != 0) {
			if (out[0])
				strncat(out, " ", sizeof(out) - strlen(out) - 1);
			strncat(out, names[i]->d_name, sizeof(out) - strlen(out) - 1);
		}
		free(names[i]);
	}
	free(names);
	return out;
}

/* "ptp,portmap,aiqos" */
static const char *types_of(const cJSON *list)
{
	static char out[256];
	const cJSON *p;
	out[0] = '\0';
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(list, "plugins"))
	{
		const cJSON *t = cJSON_GetObjectItem(p, "type");
		if (out[0])
			strncat(out, ",", sizeof(out) - strlen(out) - 1);
		strncat(out, cJSON_IsString(t) ? t->valuestring : "?", sizeof(out) - strlen(out) - 1);
	}
	return out;
}

static cJSON *load(const char *path)
{
	const char *s = slurp(path);
	return s ? cJSON_Parse(s) : NULL;
}

static struct chain_options opts(const char *dir)
{
	static char conf[600], bin[600];
	snprintf(conf, sizeof(conf), "%s/conf", dir);
	snprintf(bin, sizeof(bin), "%s/bin", dir);
	return (struct chain_options){.conf_dir = conf, .bin_dir = bin};
}

TEST(kindnet_owned_copy_exactly_once)
{
	const char *d = fresh("kindnet");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};
	cJSON *j, *aiq;
	const char *copy = pathf(d, "conf", "00-aiqos-10-kindnet.conflist");

	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK(rep.conf_changed);
	CHECK(!rep.binary_changed);
	CHECK(!rep.no_primary);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_OWNED_COPY);
	CHECK_STR(rep.primary, "10-kindnet.conflist");
	CHECK_STR(rep.target, copy);
	CHECK_CONTAINS(rep.what, "wrote ");
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 10-kindnet.conflist");
	/* the primary is untouched */
	CHECK_STR(slurp(pathf(d, "conf", "10-kindnet.conflist")), KINDNET_0);
	CHECK_INT(mode_of(copy), 0644);

	j = load(copy);
	CHECK(j != NULL);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "name")), "kindnet");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "cniVersion")), "0.3.1");
	CHECK_STR(types_of(j), "ptp,portmap,aiqos");
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, CHAIN_MARKER_OWNED)));
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, CHAIN_MARKER_SOURCE)), "10-kindnet.conflist");
	/* the default entry: capabilities for annotations and bandwidth, fail-open */
	aiq = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "plugins"), 2);
	CHECK(cJSON_IsTrue(
	        cJSON_GetObjectItem(cJSON_GetObjectItem(aiq, "capabilities"), "io.kubernetes.cri.pod-annotations")));
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(aiq, "capabilities"), "bandwidth")));
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(aiq, "failurePolicy")), "open");
	/* the rest of ptp survived the round trip */
	CHECK_CONTAINS(slurp(copy), "10.244.0.0/24");
	CHECK_CONTAINS(slurp(copy), "/run/cni-ipam-state");
	cJSON_Delete(j);
}

TEST(rerun_is_unchanged)
{
	const char *d = fresh("rerun");
	struct chain_options o = opts(d);
	const char *copy = pathf(d, "conf", "00-aiqos-10-kindnet.conflist");
	char what[CHAIN_WHAT_MAX];
	bool changed = false;
	struct error e = {0};
	ino_t ino;

	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	CHECK_INT(chain_ensure(&o, &changed, what, sizeof(what), &e), 0);
	CHECK(changed);
	ino = inode(copy);
	CHECK(ino != 0);
	for (int i = 0; i < 3; i++) {
		changed = true;
		CHECK_INT(chain_ensure(&o, &changed, what, sizeof(what), &e), 0);
		CHECK(!changed);
		CHECK_CONTAINS(what, "unchanged ");
	}
	CHECK(inode(copy) == ino); /* not rewritten */
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 10-kindnet.conflist");
}

TEST(primary_rewritten_by_rename_regenerates_copy)
{
	const char *d = fresh("rewrite");
	struct chain_options o = opts(d);
	const char *copy = pathf(d, "conf", "00-aiqos-10-kindnet.conflist");
	bool changed = false;
	struct error e = {0};
	cJSON *j;

	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	CHECK_INT(chain_ensure(&o, &changed, NULL, 0, &e), 0);
	put_rename(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_1);
	CHECK_INT(chain_ensure(&o, &changed, NULL, 0, &e), 0);
	CHECK(changed);
	CHECK_CONTAINS(slurp(copy), "10.244.7.0/24");
	CHECK(!strstr(slurp(copy), "10.244.0.0/24"));
	j = load(copy);
	CHECK_STR(types_of(j), "ptp,portmap,aiqos");
	cJSON_Delete(j);
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 10-kindnet.conflist");
	CHECK_INT(chain_ensure(&o, &changed, NULL, 0, &e), 0);
	CHECK(!changed);
}

TEST(primary_deleted_removes_copy)
{
	const char *d = fresh("vanish");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};

	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(unlink(pathf(d, "conf", "10-kindnet.conflist")) == 0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.no_primary);
	CHECK(rep.conf_changed);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_NONE);
	CHECK_STR(rep.primary, "");
	CHECK_CONTAINS(rep.what, "no primary network config in ");
	CHECK_CONTAINS(rep.what, "removed stale ");
	CHECK_CONTAINS(rep.what, "00-aiqos-10-kindnet.conflist");
	CHECK_STR(listing(o.conf_dir), "");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.no_primary);
	CHECK(!rep.conf_changed);
	/* and it comes back when the primary does */
	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_1);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(!rep.no_primary);
	CHECK(rep.conf_changed);
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 10-kindnet.conflist");
}

TEST(missing_conf_dir_is_no_primary)
{
	struct chain_options o = {.conf_dir = "/nonexistent/aqt-chain/net.d"};
	struct chain_report rep;
	struct error e = {0};

	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.no_primary);
	CHECK(!rep.conf_changed);
	CHECK_CONTAINS(rep.what, "(no such dir)");
}

TEST(single_plugin_conf_primary)
{
	static const char conf[] = "{\"cniVersion\":\"0.4.0\",\"name\":\"br0net\",\"type\":\"bridge\","
	                           "\"bridge\":\"cni0\",\"ipam\":{\"type\":\"host-local\",\"subnet\":\"10.9.0.0/16\"}}";
	const char *d = fresh("dotconf");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};
	cJSON *j, *first;

	put(pathf(d, "conf", "10-bridge.conf"), conf);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_STR(rep.target, pathf(d, "conf", "00-aiqos-10-bridge.conflist"));
	j = load(rep.target);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "name")), "br0net");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "cniVersion")), "0.4.0");
	CHECK_STR(types_of(j), "bridge,aiqos");
	first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "plugins"), 0);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(first, "bridge")), "cni0");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(first, "ipam"), "subnet")),
	          "10.9.0.0/16");
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, CHAIN_MARKER_SOURCE)), "10-bridge.conf");
	cJSON_Delete(j);
	/* a .json single plugin is read the same way */
	CHECK(unlink(pathf(d, "conf", "10-bridge.conf")) == 0);
	put(pathf(d, "conf", "10-bridge.json"), conf);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(rep.primary, "10-bridge.json");
	/* same owned name (the base is the same): regenerated from the new source */
	j = load(rep.target);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, CHAIN_MARKER_SOURCE)), "10-bridge.json");
	cJSON_Delete(j);
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-bridge.conflist 10-bridge.json");
}

TEST(malformed_primary_writes_nothing)
{
	static const struct {
		const char *text;
		const char *msg;
	} cases[] = {
	        {"{\"cniVersion\":\"0.3.1\",\"name\":\"x\",\"plugins\":[{\"type\":\"ptp\"}", "invalid JSON at byte"},
	        {"{\"name\":\"x\",\"plugins\":[]} trailing", "invalid JSON at byte"},
	        {"", "invalid JSON at byte 0"},
	        {"[1,2]", "not a JSON object"},
	        {"{\"cniVersion\":\"0.3.1\",\"plugins\":[{\"type\":\"ptp\"}]}", "\"name\" missing"},
	        {"{\"name\":\"x\",\"plugins\":{}}", "\"plugins\" is not an array"},
	        {"{\"name\":\"x\",\"plugins\":[{\"type\":\"ptp\"},{\"ipam\":{}}]}", "plugins[1] is not an object"},
	        {"{\"name\":\"x\",\"cniVersion\":\"0.3.1\"}", "neither a network config list"},
	};
	char tag[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *d, *primary;
		struct chain_options o;
		struct error e = {0};
		bool changed = true;
		char before[2048];

		snprintf(tag, sizeof(tag), "malformed%zu", i);
		d = fresh(tag);
		o = opts(d);
		/* .conf so the last case is not read as a drop-in-only list */
		primary = pathf(d, "conf", "10-kindnet.conf");
		/* an owned copy from before the primary broke stays as it is */
		put(pathf(d, "conf", "00-aiqos-10-kindnet.conflist"), "{\"keep\": true}");
		put(primary, cases[i].text);
		snprintf(before, sizeof(before), "%s", listing(o.conf_dir));
		CHECK(chain_ensure(&o, &changed, NULL, 0, &e) < 0);
		CHECK_CONTAINS(e.msg, primary);
		CHECK_CONTAINS(e.msg, cases[i].msg);
		CHECK_CONTAINS(e.msg, "primary CNI network config");
		CHECK_STR(listing(o.conf_dir), before);
		CHECK_STR(slurp(pathf(d, "conf", "00-aiqos-10-kindnet.conflist")), "{\"keep\": true}");
		CHECK_STR(slurp(primary), cases[i].text);
	}
}

TEST(multiple_primaries_lexicographic_first)
{
	const char *d = fresh("multi");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};
	cJSON *j;

	put(pathf(d, "conf", "99-z.conflist"),
	    "{\"cniVersion\":\"1.0.0\",\"name\":\"z\",\"plugins\":[{\"type\":\"bridge\"}]}");
	put(pathf(d, "conf", "10-b.conflist"),
	    "{\"cniVersion\":\"1.0.0\",\"name\":\"b\",\"plugins\":[{\"type\":\"bridge\"}]}");
	put(pathf(d, "conf", "10-a.conf"), "{\"cniVersion\":\"1.0.0\",\"name\":\"a\",\"type\":\"ptp\"}");
	put(pathf(d, "conf", "50-broken.conflist"), "{not json"); /* not the primary: ignored */
	put(pathf(d, "conf", "05-notes.txt"), "not a config");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_STR(rep.primary, "10-a.conf");
	j = load(rep.target);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "name")), "a");
	CHECK_STR(types_of(j), "ptp,aiqos");
	cJSON_Delete(j);
	/* bytewise, like Go's sort.Strings: upper case sorts before lower case */
	put(pathf(d, "conf", "10-Z.conflist"),
	    "{\"cniVersion\":\"1.0.0\",\"name\":\"Z\",\"plugins\":[{\"type\":\"bridge\"}]}");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(rep.primary, "10-Z.conflist");
	/* the copy of the old primary is gone: exactly one owned copy */
	CHECK_STR(listing(o.conf_dir),
	          "00-aiqos-10-Z.conflist 05-notes.txt 10-Z.conflist 10-a.conf 10-b.conflist 50-broken.conflist "
	          "99-z.conflist");
}

TEST(never_treats_own_file_as_primary)
{
	const char *d = fresh("own");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};

	/* ours by name (not marked: never deleted), ours by marker (a stale copy
	 * under another name: deleted), and the real primary */
	put(pathf(d, "conf", "00-aiqos-by-hand.conflist"), "{\"name\":\"x\",\"plugins\":[{\"type\":\"ptp\"}]}");
	put(pathf(d, "conf", "05-marked.conflist"),
	    "{\"name\":\"old\",\"aiqos.dev/owned\":true,\"plugins\":[{\"type\":\"ptp\"},{\"type\":\"aiqos\"}]}");
	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_STR(rep.primary, "10-kindnet.conflist");
	CHECK_CONTAINS(rep.what, "removed stale ");
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 00-aiqos-by-hand.conflist 10-kindnet.conflist");
	/* only owned files left: no primary */
	CHECK(unlink(pathf(d, "conf", "10-kindnet.conflist")) == 0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.no_primary);
	CHECK_STR(listing(o.conf_dir), "00-aiqos-by-hand.conflist");
	/* a malformed file with our prefix is not a malformed primary */
	put(pathf(d, "conf", "00-aiqos-broken.conflist"), "{");
	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(rep.primary, "10-kindnet.conflist");
}

TEST(owned_copy_must_sort_first)
{
	const char *d = fresh("precedence");
	struct chain_options o = opts(d);
	struct error e = {0};
	bool changed = true;

	put(pathf(d, "conf", "00-aaa.conflist"), "{\"name\":\"a\",\"plugins\":[{\"type\":\"ptp\"}]}");
	CHECK_INT(chain_ensure(&o, &changed, NULL, 0, &e), -EEXIST);
	CHECK_CONTAINS(e.msg, "00-aaa.conflist");
	CHECK_CONTAINS(e.msg, "would not sort before it");
	CHECK_STR(listing(o.conf_dir), "00-aaa.conflist");
	/* edit in place works there */
	o.edit_in_place = true;
	CHECK_INT(chain_ensure(&o, &changed, NULL, 0, &e), 0);
	CHECK(changed);
}

TEST(existing_entry_replaced_in_place_once)
{
	const char *d = fresh("replace");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};
	cJSON *j, *a;

	o.plugin_conf = "{\"type\":\"aiqos\",\"failurePolicy\":\"closed\"}";
	put(pathf(d, "conf", "10-x.conflist"),
	    "{\"name\":\"x\",\"cniVersion\":\"1.0.0\",\"disableCheck\":true,\"plugins\":[{\"type\":\"ptp\"},"
	    "{\"type\":\"aiqos\",\"logLevel\":\"debug\"},{\"type\":\"portmap\"},{\"type\":\"aiqos\"}]}");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	j = load(rep.target);
	CHECK_STR(types_of(j), "ptp,aiqos,portmap");
	a = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "plugins"), 1);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(a, "failurePolicy")), "closed");
	CHECK(cJSON_GetObjectItem(a, "logLevel") == NULL);
	/* other top-level keys are kept */
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "disableCheck")));
	cJSON_Delete(j);
}

TEST(edit_in_place_and_removal)
{
	const char *d = fresh("inplace");
	struct chain_options o = opts(d);
	const char *primary = pathf(d, "conf", "10-kindnet.conflist");
	struct chain_report rep;
	struct error e = {0};
	cJSON *j;
	ino_t ino;

	put_mode(primary, KINDNET_0, 0640);
	/* an owned copy from the default mode is replaced by the in-place edit */
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(exists(pathf(d, "conf", "00-aiqos-10-kindnet.conflist")));
	o.edit_in_place = true;
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK(rep.conf_changed);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_IN_PLACE);
	CHECK_STR(rep.target, primary);
	CHECK_STR(listing(o.conf_dir), "10-kindnet.conflist");
	CHECK_INT(mode_of(primary), 0640);
	j = load(primary);
	CHECK_STR(types_of(j), "ptp,portmap,aiqos");
	CHECK(cJSON_GetObjectItem(j, CHAIN_MARKER_OWNED) == NULL); /* still the runtime's own file */
	cJSON_Delete(j);
	/* idempotent: not rewritten */
	ino = inode(primary);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(!rep.conf_changed);
	CHECK(inode(primary) == ino);
	/* the primary CNI rewrites it: chained again */
	put_rename(primary, KINDNET_1);
	chmod(primary, 0640);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.conf_changed);
	CHECK_INT(mode_of(primary), 0640);
	j = load(primary);
	CHECK_STR(types_of(j), "ptp,portmap,aiqos");
	cJSON_Delete(j);
	/* a .conf cannot be edited in place */
	put(pathf(d, "conf", "05-single.conf"), "{\"name\":\"s\",\"type\":\"ptp\"}");
	CHECK(chain_ensure_report(&o, &rep, &e) < 0);
	CHECK_CONTAINS(e.msg, "05-single.conf: a single-plugin config cannot be edited in place");
	CHECK(unlink(pathf(d, "conf", "05-single.conf")) == 0);

	/* removal takes the entry out again, keeping everything else */
	CHECK_INT(chain_remove_report(&o, false, &rep, &e), 0);
	CHECK(rep.conf_changed);
	CHECK_CONTAINS(rep.what, "removed aiqos from ");
	j = load(primary);
	CHECK_STR(types_of(j), "ptp,portmap");
	CHECK_CONTAINS(slurp(primary), "10.244.7.0/24");
	cJSON_Delete(j);
	CHECK_INT(mode_of(primary), 0640);
	CHECK_INT(chain_remove_report(&o, false, &rep, &e), 0);
	CHECK(!rep.conf_changed);
	CHECK_CONTAINS(rep.what, "nothing to remove");
}

TEST(remove_deletes_only_marked_files)
{
	const char *d = fresh("remove");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};

	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	put(pathf(d, "conf", "00-aiqos-by-hand.conflist"), "{\"name\":\"x\",\"plugins\":[{\"type\":\"ptp\"}]}");
	put(pathf(d, "conf", "20-broken.conflist"), "{]");
	put(pathf(d, "conf", "30-only-aiqos.conflist"), "{\"name\":\"o\",\"plugins\":[{\"type\":\"aiqos\"}]}");
	CHECK_INT(chain_remove_report(&o, false, &rep, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK(rep.conf_changed);
	CHECK_STR(listing(o.conf_dir),
	          "00-aiqos-by-hand.conflist 10-kindnet.conflist 20-broken.conflist 30-only-aiqos.conflist");
	CHECK_STR(slurp(pathf(d, "conf", "10-kindnet.conflist")), KINDNET_0);
	/* a list of only aiqos is not emptied */
	CHECK_CONTAINS(slurp(pathf(d, "conf", "30-only-aiqos.conflist")), "aiqos");
}

TEST(dropin_mode)
{
	const char *d = fresh("dropin");
	struct chain_options o = opts(d);
	const char *dropin = pathf(d, "conf", "kindnet/aiqos.conf");
	struct chain_report rep;
	struct error e = {0};
	cJSON *j;

	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	/* default mode first: the switch removes the owned copy */
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	o.dropin = true;
	umask(0077); /* as under the systemd unit */
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	umask(0022);
	CHECK_STR(e.msg, "");
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_DROPIN);
	CHECK_STR(rep.target, dropin);
	CHECK(rep.conf_changed);
	CHECK_STR(listing(o.conf_dir), "10-kindnet.conflist kindnet");
	CHECK_INT(mode_of(dropin), 0644);
	CHECK_INT(mode_of(pathf(d, "conf", "kindnet")), 0755);
	j = load(dropin);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(j, "type")), "aiqos");
	cJSON_Delete(j);
	CHECK_STR(slurp(pathf(d, "conf", "10-kindnet.conflist")), KINDNET_0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(!rep.conf_changed);
	/* back to the owned copy: the drop-in (and its now empty dir) go away */
	o.dropin = false;
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_OWNED_COPY);
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 10-kindnet.conflist");
	/* and chain_remove removes drop-ins too (another tool's file stays) */
	o.dropin = true;
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	put(pathf(d, "conf", "kindnet/other.conf"), "{\"type\":\"other\"}");
	CHECK_INT(chain_remove_report(&o, false, &rep, &e), 0);
	CHECK_STR(listing(pathf(d, "conf", "kindnet")), "other.conf");
	CHECK_STR(listing(o.conf_dir), "10-kindnet.conflist kindnet");
}

TEST(dropin_falls_back)
{
	const char *d = fresh("dropinfb");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};

	o.dropin = true;
	/* a .conf gets no drop-ins from libcni */
	put(pathf(d, "conf", "10-a.conf"), "{\"name\":\"a\",\"type\":\"ptp\"}");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_OWNED_COPY);
	CHECK_CONTAINS(rep.what, "not a .conflist");
	CHECK(unlink(pathf(d, "conf", "10-a.conf")) == 0);
	/* nor a list that loads only inlined plugins */
	put(pathf(d, "conf", "10-a.conflist"),
	    "{\"name\":\"a\",\"loadOnlyInlinedPlugins\":true,\"plugins\":[{\"type\":\"ptp\"}]}");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_OWNED_COPY);
	CHECK_CONTAINS(rep.what, "loadOnlyInlinedPlugins");
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-a.conflist 10-a.conflist");
	/* already listed inline: no drop-in, no copy */
	put(pathf(d, "conf", "10-a.conflist"),
	    "{\"name\":\"a\",\"plugins\":[{\"type\":\"ptp\"},{\"type\":\"aiqos\"}]}");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_IN_PLACE);
	CHECK_CONTAINS(rep.what, "already lists aiqos");
	CHECK_STR(listing(o.conf_dir), "10-a.conflist");
	/* a list whose plugins all come from drop-ins: only the drop-in can work */
	put(pathf(d, "conf", "10-a.conflist"), "{\"name\":\"a\",\"cniVersion\":\"1.1.0\"}");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_INT(rep.strategy, CHAIN_STRATEGY_DROPIN);
	o.dropin = false;
	CHECK(chain_ensure_report(&o, &rep, &e) < 0);
	CHECK_CONTAINS(e.msg, "lists no plugins inline");
}

TEST(binary_copy_idempotent)
{
	const char *d = fresh("binary");
	struct chain_options o = opts(d);
	const char *src = pathf(d, "", "aiqos-src");
	const char *dst = pathf(d, "bin", "aiqos");
	char big[200000];
	struct chain_report rep;
	struct error e = {0};
	ino_t ino;

	/* larger than one copy chunk, with a difference near the end later */
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		big[i] = (char)('a' + i % 26);
	big[sizeof(big) - 1] = '\0';
	put_mode(src, big, 0600);
	o.plugin_src = src;
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0); /* no primary yet: still installs */
	CHECK_STR(e.msg, "");
	CHECK(rep.binary_changed);
	CHECK(rep.no_primary);
	CHECK_CONTAINS(rep.what, "copied ");
	CHECK_INT(mode_of(dst), 0755);
	CHECK(strcmp(slurp(dst), big) == 0);
	ino = inode(dst);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(!rep.binary_changed);
	CHECK(inode(dst) == ino);
	big[sizeof(big) - 10] = '!';
	put_mode(src, big, 0600);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.binary_changed);
	CHECK(strcmp(slurp(dst), big) == 0);
	/* a wrong mode is repaired too */
	chmod(dst, 0700);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.binary_changed);
	CHECK_INT(mode_of(dst), 0755);
	/* no temp files left behind */
	CHECK_STR(listing(o.bin_dir), "aiqos");
	/* removal leaves it unless asked */
	CHECK_INT(chain_remove_report(&o, false, &rep, &e), 0);
	CHECK(exists(dst));
	CHECK_INT(chain_remove_report(&o, true, &rep, &e), 0);
	CHECK(rep.binary_changed);
	CHECK(!exists(dst));
	/* a missing source names the file */
	o.plugin_src = pathf(d, "", "nope");
	CHECK_INT(chain_ensure_report(&o, &rep, &e), -ENOENT);
	CHECK_CONTAINS(e.msg, "plugin binary ");
	CHECK_CONTAINS(e.msg, "/nope: open: ");
}

TEST(bad_plugin_conf)
{
	static const struct {
		const char *conf;
		const char *msg;
	} cases[] = {
	        {"[]", "not a JSON object with a \"type\" string"},
	        {"{\"type\": 1}", "not a JSON object with a \"type\" string"},
	        {"{\"type\": \"../x\"}", "must be a plain file name"},
	        {"{\"type\": \"\"}", "must be a plain file name"},
	        {"{\"type\": \"aiqos\"", "invalid JSON"},
	};
	const char *d = fresh("badplugin");

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct chain_options o = opts(d);
		struct error e = {0};
		o.plugin_conf = cases[i].conf;
		CHECK(chain_ensure(&o, NULL, NULL, 0, &e) < 0);
		CHECK_CONTAINS(e.msg, "aiqos plugin config");
		CHECK_CONTAINS(e.msg, cases[i].msg);
		CHECK(chain_remove(&o, false, NULL) < 0);
	}
	{
		struct error e = {0};
		struct chain_options o = {0};
		CHECK(chain_ensure(&o, NULL, NULL, 0, &e) < 0);
		CHECK_CONTAINS(e.msg, "no CNI config dir");
	}
}

TEST(name_relevant)
{
	static const struct {
		const char *name;
		bool want;
	} cases[] = {
	        {"10-kindnet.conflist", true},
	        {"10-bridge.conf", true},
	        {"87-podman.json", true},
	        {".aiqos-tmp-ab12cd", false},
	        {".10-kindnet.conflist", false},
	        {"kindnet", false},
	        {"10-kindnet.conflist.tmp", false},
	        {"conf", false},
	        {".conf", false},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		CHECK_INT(chain_name_relevant(cases[i].name), cases[i].want);
	CHECK_STR(chain_strategy_name(CHAIN_STRATEGY_OWNED_COPY), "owned-copy");
	CHECK_STR(chain_strategy_name(_CHAIN_STRATEGY_MAX), "invalid");
}

/* install validates what it writes: the plugin's own parser reads the entry
 * (a typo in failurePolicy would fail every ADD on the node), the binary is
 * in place (nothing is written on refusal), and no second shaper is chained
 * silently. */
TEST(install_refuses_a_chain_that_cannot_work)
{
	const char *d = fresh("refuse");
	struct chain_options o = opts(d);
	struct chain_report rep;
	struct error e = {0};
	static const char bw[] = "{\"cniVersion\":\"0.3.1\",\"name\":\"kindnet\",\"plugins\":[{\"type\":\"ptp\"},"
	                         "{\"type\":\"bandwidth\",\"capabilities\":{\"bandwidth\":true}}]}";

	put(pathf(d, "conf", "10-kindnet.conflist"), KINDNET_0);
	/* the plugin's parser names the field and the value */
	o.plugin_conf = "{\"type\":\"aiqos\",\"failurePolicy\":\"opne\"}";
	CHECK_INT(chain_ensure_report(&o, &rep, &e), -EINVAL);
	CHECK_STR(e.msg, "aiqos plugin config: failurePolicy: invalid value \"opne\" (want \"open\" or \"closed\")");
	o.plugin_conf = "{\"type\":\"aiqos\",\"agentTimeoutMs\":\"fast\"}";
	CHECK(chain_ensure_report(&o, &rep, &e) < 0);
	CHECK_CONTAINS(e.msg, "agentTimeoutMs");
	CHECK_STR(listing(o.conf_dir), "10-kindnet.conflist");
	/* a good one passes */
	o.plugin_conf = "{\"type\":\"aiqos\",\"failurePolicy\":\"closed\",\"logLevel\":\"info\"}";
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 10-kindnet.conflist");
	CHECK_INT(chain_remove(&o, false, &e), 0);

	/* no binary in the bin dir: nothing chained */
	o.plugin_conf = NULL;
	CHECK(unlink(pathf(d, "bin", "aiqos")) == 0);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), -ENOENT);
	CHECK_CONTAINS(e.msg, "plugin binary ");
	CHECK_CONTAINS(e.msg, "/bin/aiqos: No such file or directory; not chaining");
	CHECK_STR(listing(o.conf_dir), "10-kindnet.conflist");
	put_mode(pathf(d, "bin", "aiqos"), "x", 0644); /* not executable */
	CHECK_INT(chain_ensure_report(&o, &rep, &e), -EACCES);
	CHECK_CONTAINS(e.msg, "is not an executable file");
	chmod(pathf(d, "bin", "aiqos"), 0755);

	/* a bandwidth plugin already in the chain: chained, loudly, with the way out */
	put(pathf(d, "conf", "10-kindnet.conflist"), bw);
	CHECK_INT(chain_ensure_report(&o, &rep, &e), 0);
	CHECK(rep.two_shapers);
	CHECK_CONTAINS(rep.what, "WARNING: 10-kindnet.conflist also chains the \"bandwidth\" plugin");
	CHECK_CONTAINS(rep.what, "remove it from that chain");
	CHECK_STR(listing(o.conf_dir), "00-aiqos-10-kindnet.conflist 10-kindnet.conflist");
}
