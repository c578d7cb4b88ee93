/*
** pingpong.c -- benchmark helper (not a test): how long a cache line takes to go from one
** processor to another and back on this machine, the cost every datum the search's threads
** share pays once per hand-over (search_bench.lua prints it beside the -j 2 speed-up).
** Two threads, pinned to processors 0 and 1 where the system allows it, pass one atomic
** word back and forth ROUNDS times; prints the best of three runs' mean round trip in
** nanoseconds, or nothing (exit 1) without a second processor or thread.
*/
#define _GNU_SOURCE  /* pthread_setaffinity_np */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 200000

/* The word passed over, alone on its line: 1 the first thread's serve, 0 the return. */
static union { _Atomic int v; char line[64]; } ball;

static void pin (int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);  /* unpinned if refused */
}

static void *returner (void *arg) {
  int i;
  (void)arg;
  pin(1);
  for (i = 0; i < ROUNDS; i++) {
    while (atomic_load_explicit(&ball.v, memory_order_acquire) != 1) {}
    atomic_store_explicit(&ball.v, 0, memory_order_release);
  }
  return NULL;
}

static double seconds (void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One run's mean round trip (s), or a negative number without a second thread. */
static double one_run (void) {
  pthread_t t;
  double t0, t1;
  int i;
  atomic_store(&ball.v, 0);
  if (pthread_create(&t, NULL, returner, NULL) != 0) return -1.0;
  t0 = seconds();
  for (i = 0; i < ROUNDS; i++) {
    atomic_store_explicit(&ball.v, 1, memory_order_release);
    while (atomic_load_explicit(&ball.v, memory_order_acquire) != 0) {}
  }
  t1 = seconds();
  pthread_join(t, NULL);
  return (t1 - t0) / ROUNDS;
}

int main (void) {
  double best = -1.0;
  int k;
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return 1;  /* the threads would take turns */
  pin(0);
  for (k = 0; k < 3; k++) {
    double t = one_run();
    if (t < 0.0) return 1;
    if (best < 0.0 || t < best) best = t;
  }
  printf("%.0f\n", best * 1e9);
  return 0;
}
