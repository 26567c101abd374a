/* trustdir.h: directories root may keep its files in. */
#ifndef GATEWAY_TRUSTDIR_H
#define GATEWAY_TRUSTDIR_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Makes dir (mkdir -p, new components with mode) and checks that nobody
 * but root can change what is in it: dir and every directory above it
 * (symbolic links resolved) must be owned by root and not writable by
 * another user or group, except that an ancestor may be a sticky
 * directory such as /tmp. In a directory another user may write to, that
 * user can put a symbolic link where sluiced creates a file (a state
 * file's .tmp, a capture file, the socket it chmods), or a file of their
 * own where it expects its own (the flow log). what names the option in
 * the error. Returns 0, or -1 with err.
 */
/* mkdir -p: path and what is missing above it, new ones with mode. */
int	gw_mkdirs(const char *path, mode_t mode);

int	gw_dir_trusted(const char *what, const char *dir, mode_t mode,
	    char *err, size_t errlen);

/* The same for the directory that holds file path. */
int	gw_dir_trusted_parent(const char *what, const char *path, mode_t mode,
	    char *err, size_t errlen);

#endif
