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

// CPUs allowed by a cgroup v2 quota ("max 100000" = none, "150000 100000" = 2).
int cgroup_cpu_limit() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  std::ifstream in("/sys/fs/cgroup" + path + "/cpu.max");
  if (!in) in.open("/sys/fs/cgroup/cpu.max");
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  const long long q = std::atoll(quota.c_str());
  if (q <= 0) return 0;
  return int((q + period - 1) / period);
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
