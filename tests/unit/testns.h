/* testns.h: for unit tests that run in a private network namespace. */
#ifndef SLUICE_TESTNS_H
#define SLUICE_TESTNS_H

#include <fcntl.h>
#include <sched.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

/*
 * Moves the whole process into a network namespace of its own with lo up:
 * what a test makes there vanishes when it exits, so nothing needs tearing
 * down. NULL, or why the tests cannot run (for skip()).
 */
static inline const char *
testns_enter(void)
{
	if (geteuid() != 0)
		return "needs root (a network namespace)";
	if (unshare(CLONE_NEWNET) == -1)
		return "unshare(CLONE_NEWNET) failed";
	if (testns_loopback_up() == -1)
		return "cannot bring up lo in the new namespace";
	return NULL;
}

/* Runs argv (iptables, say) with its output discarded: its exit status,
 * 127 when it could not be run, -1 when it did not exit. */
static inline int
testns_run(char *const argv[])
{
	pid_t pid;
	int status;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd != -1) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) == -1)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Skips the calling cmocka test, saying why, when why is not NULL. */
#define TESTNS_SKIP_IF(why) do {					\
	if ((why) != NULL) {						\
		print_message("skipped: %s\n", (why));			\
		skip();							\
	}								\
} while (0)

#endif
