/* tos_send.c — "tos_send ADDR TOS COUNT": COUNT UDP datagrams to ADDR port 9
 * with IP_TOS set to TOS (e.g. 0xb8, the EF mark), for the DSCP re-marking
 * check of the full-kernel VM (test/kernel/chain.sh: a default pod marking
 * EF itself must leave the pod with DS byte 0 when aiqos re-marks). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)};
	char payload[200];
	int fd, tos, n;

	if (argc != 4 || inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
		fprintf(stderr, "usage: tos_send IPV4 TOS COUNT\n");
		return 2;
	}
	tos = (int)strtol(argv[2], NULL, 0);
	n = (int)strtol(argv[3], NULL, 10);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) < 0) {
		perror("tos_send: socket");
		return 1;
	}
	memset(payload, 'x', sizeof(payload));
	for (int i = 0; i < n; i++)
		if (sendto(fd, payload, sizeof(payload), 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
			perror("tos_send: sendto");
			return 1;
		}
	close(fd);
	printf("sent %d datagrams with TOS 0x%02x to %s\n", n, tos, argv[1]);
	return 0;
}
