/* overlay_cls.c — "overlay_cls PINDIR INF_IPV4 TRAIN_IPV4": loads aiqos's
 * upload and download classifiers (shared/bpf/cls.bpf.c, dcls.bpf.c, the
 * agent's loaders), gives both the two pods' classes as HTB class ids (1:10
 * inference, 1:30 training, 1:20 the default, as the agent's HTB plan does)
 * and pins the programs at PINDIR/cls and PINDIR/dcls, for tc to attach
 * (test/kernel/overlay.sh: pods behind IPIP and Geneve overlays on Debian's
 * kernel, classified at the uplink by the inner header). */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <stdio.h>
#include <string.h>

#include "bpf_cls.h"
#include "error.h"

#define CLASSID(minor) (0x10000u | (minor))

int main(int argc, char **argv)
{
	struct bpf_cls_entry ents[3] = {
	        {.key = {.kind = BPF_CLS_KEY_DEFAULT}, .priority = CLASSID(0x20)},
	        {.key = {.kind = BPF_CLS_KEY_SRC4}, .priority = CLASSID(0x10)},
	        {.key = {.kind = BPF_CLS_KEY_SRC4}, .priority = CLASSID(0x30)},
	};
	int map = -1, edt = -1, prog = -1, dmap = -1, dseen = -1, dprog = -1;
	struct error e = {0};
	char path[512];

	if (argc != 4 || inet_pton(AF_INET, argv[2], ents[1].key.addr) != 1 ||
	    inet_pton(AF_INET, argv[3], ents[2].key.addr) != 1) {
		fprintf(stderr, "usage: overlay_cls PINDIR INF_IPV4 TRAIN_IPV4\n");
		return 2;
	}
	if (bpf_cls_load(&map, &edt, &prog, &e) < 0 || bpf_cls_map_sync(map, ents, 3, NULL, &e) < 0 ||
	    bpf_dcls_load(&dmap, &dseen, &dprog, &e) < 0 || bpf_cls_map_sync(dmap, ents, 3, NULL, &e) < 0) {
		fprintf(stderr, "overlay_cls: %s\n", e.msg);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/cls", argv[1]);
	if (bpf_obj_pin(prog, path) < 0) {
		perror("overlay_cls: pin cls");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/dcls", argv[1]);
	if (bpf_obj_pin(dprog, path) < 0) {
		perror("overlay_cls: pin dcls");
		return 1;
	}
	return 0;
}
