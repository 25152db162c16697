/* The thread block cluster of cooperative_groups, for the CPU emulation
 * (emu.h): a barrier over the cluster's threads and the mapping of a
 * shared-memory address to another block's. */
#ifndef O1_EMU_COOPERATIVE_GROUPS_H
#define O1_EMU_COOPERATIVE_GROUPS_H

#include "emu.h"

namespace cooperative_groups
{
struct cluster_group {
	void sync() const
	{
		emu_cluster_sync();
	}
	unsigned block_rank() const
	{
		return emu_block_rank();
	}
	template <class T> T *map_shared_rank(T *p, unsigned rank) const
	{
		return (T *)emu_map_rank((void *)p, rank);
	}
};

static inline cluster_group this_cluster()
{
	return cluster_group();
}
} // namespace cooperative_groups

#endif
