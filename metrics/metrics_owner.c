/* See metrics_owner.h. /proc/locks lines read "N: FLOCK  ADVISORY  WRITE
 * PID MAJ:MIN:INODE START END" (major and minor in hex, the inode in
 * decimal); waiters are marked "->" and skipped. Only locks of processes
 * in our pid namespace are listed there. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "metrics_owner.h"

/* The FLOCK WRITE holder of (dev, ino) in /proc/locks: 1, 0 or -errno. */
static int proc_locks_find(dev_t dev, ino_t ino, pid_t *pid)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256], kind[16], adv[16], rw[16];
	unsigned maj, min;
	unsigned long long inode;
	int p, found = 0;

	if (!f)
		return -errno;
	while (!found && fgets(line, sizeof(line), f)) {
		const char *s = strchr(line, ':');

		if (!s || strstr(s, "->") ||
		    sscanf(s + 1, "%15s %15s %15s %d %x:%x:%llu", kind, adv,
			   rw, &p, &maj, &min, &inode) != 7)
			continue;
		found = !strcmp(kind, "FLOCK") && !strcmp(rw, "WRITE") &&
			maj == major(dev) && min == minor(dev) &&
			inode == (unsigned long long)ino;
	}
	fclose(f);
	if (found)
		*pid = p;
	return found;
}

int o1_metrics_owner_lock(int fd, pid_t *holder)
{
	struct stat st;

	*holder = 0;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno != EWOULDBLOCK)
		return -errno;
	if (fstat(fd, &st) == 0 && proc_locks_find(st.st_dev, st.st_ino,
						   holder) != 1)
		*holder = 0;
	return -EADDRINUSE;
}

int o1_metrics_owner_find(const char *path, pid_t *pid)
{
	struct stat st;

	*pid = 0;
	if (stat(path, &st) != 0)
		return -errno;
	return proc_locks_find(st.st_dev, st.st_ino, pid);
}

bool o1_metrics_owner_alive(dev_t dev, ino_t ino, uint64_t info_pid)
{
	pid_t pid;
	int ret = proc_locks_find(dev, ino, &pid);

	if (ret >= 0)
		return ret == 1;
	if (!info_pid || info_pid > INT32_MAX)
		return false;
	return kill((pid_t)info_pid, 0) == 0 || errno == EPERM;
}
