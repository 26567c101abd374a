/* trustdir.c: directories root may keep its files in (see trustdir.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/trustdir.h"

int
gw_mkdirs(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	char *p;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, mode) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/* Can a user other than root change the entries of this directory? */
static const char *
untrusted(const struct stat *sb, int top)
{
	if (!S_ISDIR(sb->st_mode))
		return "not a directory";
	if (sb->st_uid != 0)
		return "owned by another user than root";
	if (!top && (sb->st_mode & S_ISVTX))
		return NULL;
	if (sb->st_mode & S_IWOTH)
		return "writable by every user";
	if ((sb->st_mode & S_IWGRP) && sb->st_gid != 0)
		return "writable by a group other than root";
	return NULL;
}

int
gw_dir_trusted(const char *what, const char *dir, mode_t mode, char *err,
    size_t errlen)
{
	char real[PATH_MAX], *slash;
	const char *why;
	struct stat sb;
	int top = 1;

	if (gw_mkdirs(dir, mode) == -1 || realpath(dir, real) == NULL) {
		snprintf(err, errlen, "%s %s: %s", what, dir, strerror(errno));
		return -1;
	}
	for (;;) {
		if (lstat(real, &sb) == -1) {
			snprintf(err, errlen, "%s %s: %s: %s", what, dir, real,
			    strerror(errno));
			return -1;
		}
		if ((why = untrusted(&sb, top)) != NULL) {
			snprintf(err, errlen, "%s %s: %s is %s (uid %u, mode "
			    "%04o): another user could replace the files "
			    "sluiced keeps there", what, dir, real, why,
			    (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
			errno = EPERM;
			return -1;
		}
		top = 0;
		if (strcmp(real, "/") == 0)
			return 0;
		slash = strrchr(real, '/');
		if (slash == real)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

int
gw_dir_trusted_parent(const char *what, const char *path, mode_t mode,
    char *err, size_t errlen)
{
	char dir[PATH_MAX], *slash;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		snprintf(err, errlen, "%s %s: path too long", what, path);
		return -1;
	}
	if ((slash = strrchr(dir, '/')) == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	return gw_dir_trusted(what, dir, mode, err, errlen);
}
