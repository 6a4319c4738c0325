/* run.c — the dispatcher: CNI_COMMAND -> verb, the bounded read of the
 * network config, logging set-up, the order of validation (config, env,
 * version, CNI_ARGS) and the one place that prints error results. */
#include <fcntl.h>
#include <time.h>

#include "cni.h"
#include "file.h"

#define LOG_BUF_BYTES 8192 /* > a log line (log.c writes at most 4 KiB at once) */

uint64_t cni_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void cni_phase(struct cni_ctx *ctx, const char *name)
{
	if (ctx->n_phases >= CNI_PHASES_MAX)
		return;
	ctx->phase_name[ctx->n_phases] = name;
	ctx->phase_ns[ctx->n_phases++] = cni_now_ns();
}

void cni_lock_release(struct cni_lock *l)
{
	if (l->fd >= 0)
		state_unlock_attachment(TAKE_FD(l->fd), l->dir, l->container_id, l->ifname);
}

int cni_attach_lock(const struct cni_ctx *ctx, const char *container_id, const char *ifname, unsigned timeout_ms,
                    struct cni_lock *ret, struct error *err)
{
	struct error e = {0};
	int fd = state_lock_attachment(ctx->conf.state_dir, container_id, ifname, timeout_ms, &e);

	*ret = (struct cni_lock){.fd = -1, .dir = ctx->conf.state_dir, .container_id = container_id, .ifname = ifname};
	if (fd >= 0) {
		ret->fd = fd;
		return 0;
	}
	switch (-fd) {
	case ENOENT:
	case EROFS:
	case EACCES:
	case ENOSPC:
	case EDQUOT:
	case ENOTDIR:
		/* No lock file exists and none can be made: nobody else can
		 * hold it either (nor write a record). */
		log_msg(LOG_LVL_WARN, "state directory unusable; no attachment lock to take", "command",
		        cni_command_name(ctx->cmd), "container", container_id, "ifname", ifname, "error", e.msg,
		        (char *)NULL);
		return 0;
	default:
		/* busy (another ADD/DEL/CHECK of it, or the agent re-tuning it)
		 * or out of resources: never going on without it */
		error_propagate(err, &e);
		error_prefix(err, "attachment %s/%s is busy, try again later", container_id, ifname);
		return cni_error_code(err, CNI_ERR_TRY_LATER, fd);
	}
}

const char *cni_phases_format(const struct cni_ctx *ctx, char *buf, size_t size)
{
	uint64_t from = ctx->start_ns;
	size_t n = 0;

	if (size)
		buf[0] = '\0';
	for (unsigned i = 0; i < ctx->n_phases && i < CNI_PHASES_MAX; i++) {
		int w = snprintf(buf + n, size - n, "%s%s=%llu", i ? "," : "", ctx->phase_name[i],
		                 (unsigned long long)((ctx->phase_ns[i] - from) / 1000));
		if (w < 0 || (size_t)w >= size - n)
			break;
		n += (size_t)w;
		from = ctx->phase_ns[i];
	}
	return buf;
}

/* Read all of in, at most CNI_STDIN_MAX bytes (one more is read to detect
 * an oversized config). *ret is NUL-terminated. */
static int input_read(FILE *in, char **ret, size_t *ret_len, struct error *err)
{
	int r = file_read_stream(in, CNI_STDIN_MAX, ret, ret_len, err);

	if (r == -EFBIG) {
		error_prefix(err, "cannot decode network configuration");
		return cni_error_code(err, CNI_ERR_DECODE, r);
	}
	if (r < 0) {
		error_prefix(err, "cannot read network configuration from stdin");
		return cni_error_code(err, CNI_ERR_IO, r);
	}
	return r;
}

/* logFile (append, close-on-exec) or stderr; a logFile that cannot be
 * opened falls back to stderr with a warning. */
static FILE *log_open(const struct cni_conf *c)
{
	static char log_buf[LOG_BUF_BYTES];
	FILE *f;
	int fd;

	if (!c->log_file[0]) {
		log_setup(CNI_PROGRAM, c->log_level, stderr);
		return NULL;
	}
	fd = open(c->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640);
	f = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (!f) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		log_setup(CNI_PROGRAM, c->log_level, stderr);
		log_msg(LOG_LVL_WARN, "cannot open logFile, logging to stderr", "logFile", c->log_file, "error",
		        strerror(e), (char *)NULL);
		return NULL;
	}
	/* one write per line: concurrent plugins interleave whole lines (a
	 * given buffer also spares stdio an fstat of the file) */
	setvbuf(f, log_buf, _IOLBF, sizeof(log_buf));
	log_setup(CNI_PROGRAM, c->log_level, f);
	return f;
}

static int dispatch(struct cni_ctx *ctx, struct error *err)
{
	switch (ctx->cmd) {
	case CNI_CMD_ADD:
		return cni_cmd_add(ctx, err);
	case CNI_CMD_DEL:
		return cni_cmd_del(ctx, err);
	case CNI_CMD_CHECK:
		return cni_cmd_check(ctx, err);
	case CNI_CMD_STATUS:
		return cni_cmd_status(ctx, err);
	case CNI_CMD_GC:
		return cni_cmd_gc(ctx, err);
	case CNI_CMD_VERSION:
		return cni_cmd_version(ctx, err);
	default:
		return cni_error_set(err, CNI_ERR_ENV, EINVAL, "unknown CNI_COMMAND");
	}
}

static int request_prepare(struct cni_ctx *ctx, FILE *in, FILE **ret_log, struct error *err)
{
	const struct cni_env *env = ctx->env;
	_cleanup_free_ char *data = NULL;
	char v[80];
	size_t len = 0;
	int r;

	if (!env->command || !env->command[0])
		return cni_error_set(err, CNI_ERR_ENV, EINVAL, "required environment variable CNI_COMMAND is not set");
	ctx->cmd = cni_command_from_name(env->command);
	if (ctx->cmd == _CNI_CMD_INVALID)
		return cni_error_set(err, CNI_ERR_ENV, EINVAL,
		                     "unknown CNI_COMMAND \"%s\" (want ADD, DEL, CHECK, STATUS, GC or VERSION)",
		                     cni_sanitize(env->command, v, sizeof(v)));
	r = input_read(in, &data, &len, err);
	if (r < 0)
		return r;
	ctx->start_ns = cni_now_ns(); /* from here on the time is ours, not the writer's */
	if (ctx->cmd == CNI_CMD_VERSION)
		return 0; /* the answer does not depend on the input */

	r = cni_conf_parse(data, len, &ctx->conf, err);
	if (r < 0)
		return r;
	*ret_log = log_open(&ctx->conf);
	log_failpoints_armed();
	r = cni_env_check(ctx->cmd, env, err);
	if (r < 0)
		return r;
	r = cni_version_check_command(ctx->conf.version, ctx->cmd, err);
	if (r < 0)
		return r;

	if (ctx->cmd == CNI_CMD_ADD || ctx->cmd == CNI_CMD_CHECK)
		return cni_args_parse(env->args, &ctx->args, err);
	if (ctx->cmd == CNI_CMD_DEL) {
		/* DEL must clean up whatever CNI_ARGS says: the pod identity is
		 * only used to notify the agent. */
		struct error e = {0};
		if (cni_args_parse(env->args, &ctx->args, &e) < 0)
			log_msg(LOG_LVL_WARN, "ignoring invalid CNI_ARGS on DEL", "container", env->container_id,
			        "error", e.msg, (char *)NULL);
	}
	return 0;
}

int cni_run(const struct cni_env *env, FILE *in, FILE *out)
{
	_cleanup_free_ struct cni_ctx *ctx = calloc(1, sizeof(*ctx));
	struct error err = {0};
	FILE *logf = NULL;
	int r, code;

	log_setup(CNI_PROGRAM, LOG_LVL_WARN, stderr);
	if (!ctx) {
		cni_error_print(out, NULL, CNI_ERR_IO, "out of memory", NULL);
		return 1;
	}
	ctx->env = env;
	ctx->out = out;
	ctx->start_ns = cni_now_ns();
	ctx->cmd = _CNI_CMD_INVALID;
	ctx->conf.version = _CNI_V_INVALID;

	r = request_prepare(ctx, in, &logf, &err);
	if (r >= 0)
		r = dispatch(ctx, &err);
	if (r >= 0) {
		if (fflush(out) == EOF)
			log_msg(LOG_LVL_ERROR, "cannot write to stdout", "error", strerror(errno), (char *)NULL);
		code = 0;
	} else {
		char codebuf[16], cid[80], ifn[40];
		int cni_code = err.code ? err.code : CNI_ERR_TUNE_FAILED;

		if (!err.msg[0])
			snprintf(err.msg, sizeof(err.msg), "%s", strerror(-r));
		snprintf(codebuf, sizeof(codebuf), "%d", cni_code);
		log_msg(LOG_LVL_ERROR, "request failed", "command", cni_command_name(ctx->cmd) ?: "", "container",
		        cni_sanitize(env->container_id, cid, sizeof(cid)), "ifname",
		        cni_sanitize(env->ifname, ifn, sizeof(ifn)), "code", codebuf, "error", err.msg, (char *)NULL);
		cni_error_print(out, ctx->conf.version != _CNI_V_INVALID ? ctx->conf.cni_version : CNI_VERSION_LATEST,
		                cni_code, err.msg, ctx->details);
		code = 1;
	}

	cni_conf_free(&ctx->conf);
	if (logf) {
		log_setup(CNI_PROGRAM, LOG_LVL_WARN, stderr);
		fclose(logf);
	}
	return code;
}
