/* See bpffs.h. Creating a probe map checks that bpf() is allowed at all. */
#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "bpffs.h"

static char mnt[64];
static char made[4096];

static int is_bpffs(const char *p)
{
	struct statfs st;

	return statfs(p, &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

static int mount_private(char *base, size_t sz)
{
	strcpy(mnt, "/tmp/o1-bpffs-XXXXXX");
	if (!mkdtemp(mnt))
		return -errno;
	if (mount("bpf", mnt, "bpf", 0, "mode=0755") < 0) {
		int err = -errno;

		rmdir(mnt);
		mnt[0] = '\0';
		return err;
	}
	snprintf(base, sz, "%s", mnt);
	return 0;
}

int bpffs_setup(char *base, size_t sz)
{
	int fd, err;

	if (geteuid() != 0)
		return -EPERM;
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "o1_probe", 4, 8, 1, NULL);
	if (fd < 0)
		return fd;
	close(fd);
	if (!is_bpffs("/sys/fs/bpf"))
		return mount_private(base, sz);
	snprintf(made, sizeof(made), "/sys/fs/bpf/o1-test-%d", (int)getpid());
	err = mkdir(made, 0755) == 0 ? 0 : -errno;
	snprintf(base, sz, "%s", made);
	return err;
}

void bpffs_cleanup(void)
{
	char cmd[sizeof(made) + 16];

	if (mnt[0]) {
		umount2(mnt, MNT_DETACH);
		rmdir(mnt);
		mnt[0] = '\0';
	} else if (made[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", made);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", made);
		made[0] = '\0';
	}
}
