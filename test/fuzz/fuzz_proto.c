/* fuzz_proto.c — the plugin <-> agent protocol as the agent's socket server
 * reads it: one request line from whoever connects. Properties: no crash or
 * leak; errors are the documented codes with a message; a decoded request
 * re-encodes to one line that decodes and encodes to the same line. The response
 * encoder gets the input as a response object. */
#include "fuzz.h"
#include "proto.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_request req, again;

	struct error err = {0};
	int r;

	if (size > PROTO_MSG_MAX + 2)
		return 0;
	r = proto_request_decode((const char *)data, size, &req, &err);
	if (r < 0) {
		FUZZ_ASSERT(r == -EMSGSIZE || r == -EOPNOTSUPP || r == -ENAMETOOLONG || r == -EINVAL,
		            "undocumented error %d: %s", r, err.msg);
		FUZZ_ASSERT(err.msg[0], "error %d without a message", r);
	} else {
		_cleanup_free_ char *line = NULL;
		FUZZ_ASSERT(req.op >= 0 && req.op < _PROTO_OP_MAX, "op %d", req.op);
		FUZZ_ASSERT(proto_request_encode(&req, &line, &err) == 0, "re-encode: %s", err.msg);
		size_t n = strlen(line);
		FUZZ_ASSERT(n > 0 && line[n - 1] == '\n' && !memchr(line, '\n', n - 1), "not one line: %s", line);
		FUZZ_ASSERT(proto_request_decode(line, n, &again, &err) == 0, "re-decode of %s: %s", line, err.msg);
		/* the encoder sends the op's fields only: a second round is exact */
		_cleanup_free_ char *line2 = NULL;
		FUZZ_ASSERT(proto_request_encode(&again, &line2, &err) == 0, "re-encode: %s", err.msg);
		FUZZ_ASSERT(streq(line, line2), "round trip changed the request:\n%s%s", line, line2);
	}

	/* The server's encoder with whatever object the input is. */
	{
		_cleanup_json_ cJSON *j = fuzz_json_parse(data, size);
		_cleanup_free_ char *out = NULL;
		size_t len = 0;
		if (j && proto_response_encode(j, PROTO_MSG_MAX, &out, &len, NULL) == 0) {
			FUZZ_ASSERT(len > 0 && len <= PROTO_MSG_MAX && out[len - 1] == '\n', "response of %zu bytes",
			            len);
			FUZZ_ASSERT(!memchr(out, '\n', len - 1), "response is not one line");
		}
	}
	return 0;
}
