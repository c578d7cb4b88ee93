/*
** test_processors.c -- nd_search_processors, the default of -j: the processors the process
** may run on, not those online (a container's cpuset or taskset leaves fewer). Narrowed to
** one processor it says 1; widened back, what it said before, never more than are online.
*/
#define _GNU_SOURCE  /* sched_setaffinity */
#include <sched.h>
#include <unistd.h>

#include "ndplan/search.h"
#include "fixtures.h"

int main (void) {
  int before = nd_search_processors();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t all, one;
  int cpu;
  CHECK(before >= 1, "processors %d: expected at least 1", before);
  CHECK(online < 1 || before <= online, "processors %d: more than the %ld online", before,
        online);
  if (sched_getaffinity(0, sizeof all, &all) != 0) {
    printf("test_processors: no affinity mask here: only the bounds checked\n");
    return failures ? 1 : 0;
  }
  CHECK(before == CPU_COUNT(&all), "processors %d: the mask holds %d", before, CPU_COUNT(&all));
  for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &all); cpu++) {}
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) {
    CHECK(nd_search_processors() == 1, "narrowed to processor %d: said %d, expected 1", cpu,
          nd_search_processors());
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0, "the mask could not be restored");
    CHECK(nd_search_processors() == before, "widened back: said %d, expected %d",
          nd_search_processors(), before);
  }
  if (failures) return 1;
  printf("test_processors: %d processors (%ld online); narrowed to one, 1\n", before, online);
  return 0;
}
