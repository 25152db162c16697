/* Test helper: a directory on a bpf filesystem for the BPF-map tests,
 * under /sys/fs/bpf when it is mounted there, else on a private mount. */
#ifndef O1_TEST_BPFFS_H
#define O1_TEST_BPFFS_H

#include <stddef.h>

/* Fills base with a fresh directory on bpffs; 0, or -errno when there is
 * none we can use (not root, no CAP_SYS_ADMIN, no BPF maps allowed): the
 * caller then skips. */
int bpffs_setup(char *base, size_t sz);
/* Removes the directory (or unmounts the private mount). */
void bpffs_cleanup(void);

#endif
