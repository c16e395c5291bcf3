#include "kernels/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

namespace pc {

namespace {

// First CPU of a sysfs list such as "0,32" or "4-5"; -1 if unreadable.
int first_sibling(int cpu) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  int first = -1;
  if (in >> first) return first;
  return -1;
}

// CPUs a quota of q microseconds per period p allows (rounded up); 0: none.
int quota_cpus(long long q, long long p) { return q > 0 && p > 0 ? int((q + p - 1) / p) : 0; }

// CPUs allowed by the process's cgroup CPU quota; 0 when there is none.
//   v2: <cgroup>/cpu.max holds "max 100000" (none) or "150000 100000" (2 CPUs).
//   v1: <cpu controller>/cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us.
int cgroup_cpu_limit() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, v2_path, v1_path;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) v2_path = line.substr(3);
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (controllers.find(",cpu,") != std::string::npos) v1_path = line.substr(b + 1);
  }
  for (const std::string& dir : {"/sys/fs/cgroup" + v2_path, std::string("/sys/fs/cgroup")}) {
    std::ifstream in(dir + "/cpu.max");
    std::string quota;
    long long period = 0;
    if (in >> quota >> period) return quota == "max" ? 0 : quota_cpus(std::atoll(quota.c_str()), period);
  }
  for (const std::string& dir : {"/sys/fs/cgroup/cpu" + v1_path, std::string("/sys/fs/cgroup/cpu")}) {
    std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
    long long quota = 0, period = 0;
    if (q >> quota && p >> period) return quota_cpus(quota, period);
  }
  return 0;
}

int count() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    std::set<int> seen;  // first sibling of each allowed CPU: one per physical core
    int cpus = 0;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      ++cpus;
      const int s = first_sibling(c);
      seen.insert(s >= 0 ? s : c);
    }
    cores = seen.empty() ? cpus : int(seen.size());
  }
  if (cores <= 0) cores = int(std::thread::hardware_concurrency());
  if (const int limit = cgroup_cpu_limit(); limit > 0) cores = std::min(cores, limit);
  return std::clamp(cores, 1, 256);
}

}  // namespace

int default_thread_count() {
  static const int n = count();
  return n;
}

}  // namespace pc
