// How many compute threads to use by default: the physical cores this process
// may run on.
#pragma once

namespace pc {

// Cores the process may use, counting SMT siblings once: the CPUs of the
// scheduler affinity mask (taskset, cpusets), one per physical core
// (/sys/devices/system/cpu/cpuN/topology/thread_siblings_list), capped by a
// cgroup CPU quota (v2 cpu.max or v1 cpu.cfs_quota_us: docker --cpus) rounded up. Matmul and
// attention keep both FMA units of a core busy from one thread, so a sibling
// adds contention, not speed. In [1, 256]; computed once.
int default_thread_count();

}  // namespace pc
