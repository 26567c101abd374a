/* testns.h: for unit tests that run in a private network namespace. */
#ifndef SLUICE_TESTNS_H
#define SLUICE_TESTNS_H

#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Brings lo up in the calling thread's (new, private) namespace: 0 or -1. */
static inline int
testns_loopback_up(void)
{
	struct ifreq ifr;
	int fd, ret = -1;

	if ((fd = socket(AF_INET, SOCK_DGRAM, 0)) == -1)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		ret = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return ret;
}

#endif
