/* fuzz_state.c — the plugin's per-attachment state files: DEL, CHECK, GC
 * and the agent read them back, and a corrupt disk (or anyone who can write
 * the state dir) controls their bytes. The input is decoded with
 * state_from_json and loaded as a file with state_load (and listed), then
 * the plan is rebuilt from it with the planner as DEL does. Properties: no
 * crash or leak; an accepted state saves, loads and rebuilds to the same
 * JSON; refusals name the field or the file. */
#include <fcntl.h>
#include <sys/stat.h>

#include "attach.h"
#include "fuzz.h"
#include "state.h"

#define FUZZ_CID    "0123456789abcdef"
#define FUZZ_IFNAME "eth0"

static char dir[64];
static char file[160];

static void remove_dir(void)
{
	unlink(file);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/aiqos-fuzz-state.XXXXXX", tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		abort();
	}
	atexit(remove_dir);
	if (state_path(dir, FUZZ_CID, FUZZ_IFNAME, file, sizeof(file)) < 0)
		abort();
	return 0;
}

static char *to_text(const struct attach_state *s)
{
	_cleanup_json_ cJSON *j = state_to_json(s);
	FUZZ_ASSERT(j, "state_to_json");
	/* "updated" is kept; nothing else in the JSON depends on time */
	return cJSON_PrintUnformatted(j);
}

/* A state the reader accepted: rebuild the plan as DEL does, write it the
 * way the plugin does, and read that back. */
static void round_trip(struct attach_state *s, cJSON *choices)
{
	struct profile_set set;
	struct attach_state *back = calloc(1, sizeof(*back));
	_cleanup_json_ cJSON *j = NULL, *choices2 = NULL;
	_cleanup_free_ char *t1 = NULL, *t2 = NULL;
	struct error err = {0};

	FUZZ_ASSERT(back, "calloc");
	profile_set_builtin(&set);
	if (attach_plan_restore(&set, s, choices, NULL, &err) < 0) {
		FUZZ_ASSERT(err.msg[0], "restore refused without a message");
		attach_state_free(back);
		return;
	}
	t1 = to_text(s);
	FUZZ_ASSERT(t1, "print");
	j = cJSON_Parse(t1);
	FUZZ_ASSERT(j, "state_to_json printed invalid JSON: %.300s", t1);
	FUZZ_ASSERT(state_from_json(j, back, &choices2, &err) == 0, "saved state does not read back: %s\n%.500s",
	            err.msg, t1);
	FUZZ_ASSERT(attach_plan_restore(&set, back, choices2, NULL, &err) == 0, "saved choices do not restore: %s",
	            err.msg);
	t2 = to_text(back);
	FUZZ_ASSERT(t2 && streq(t1, t2), "state changed on a round trip:\n%.600s\n%.600s", t1, t2 ? t2 : "");
	attach_state_free(back);
}

static void write_state_file(const uint8_t *data, size_t size)
{
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		perror(file);
		abort();
	}
	close(fd);
}

static int count_cb(const char *container_id, const char *ifname, void *userdata)
{
	FUZZ_ASSERT(streq(container_id, FUZZ_CID) && streq(ifname, FUZZ_IFNAME), "listed %s@%s", container_id, ifname);
	(*(unsigned *)userdata)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct attach_state *s;
	cJSON *choices = NULL;
	struct error err = {0};
	unsigned n = 0;

	if (size > STATE_FILE_MAX + 1)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return 0;

	{
		_cleanup_json_ cJSON *j = fuzz_json_parse(data, size);
		if (j && state_from_json(j, s, &choices, &err) == 0) {
			round_trip(s, choices);
			cJSON_Delete(choices);
			choices = NULL;
		} else if (j) {
			FUZZ_ASSERT(err.msg[0], "state refused without a message");
		}
	}

	/* The same bytes as the file of attachment FUZZ_CID@eth0. */
	write_state_file(data, size);
	memset(s, 0, sizeof(*s));
	error_clear(&err);
	if (state_load(dir, FUZZ_CID, FUZZ_IFNAME, s, &choices, &err) == 0) {
		FUZZ_ASSERT(streq(s->container_id, FUZZ_CID) && streq(s->ifname, FUZZ_IFNAME),
		            "loaded the state of %s@%s", s->container_id, s->ifname);
		cJSON_Delete(choices);
	} else {
		FUZZ_ASSERT(strstr(err.msg, FUZZ_CID), "error does not name the file: %s", err.msg);
	}
	FUZZ_ASSERT(state_list(dir, count_cb, &n, NULL) == 0 && n == 1, "listed %u state files", n);
	attach_state_free(s);
	return 0;
}
