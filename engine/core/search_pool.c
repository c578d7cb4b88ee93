/*
** search_pool.c -- the search's pool: chunks of the walk (slots) priced on threads and
** delivered in the order they were filled.
**
** The calling thread walks and fills slots (search.c); at -j 2 and up, jobs - 1 workers and
** the calling thread, when it would wait, price them, each taking the oldest slot no thread
** has taken (with an admit hook, the oldest the hook has passed first: see SLOT_*). Slots
** are delivered strictly in the order they were filled, and the hook runs over them in that
** order, so the rows a caller sees, the hook's calls and every count are the same at any -j.
** (Searches of a model that routes experts walk in lanes instead: search_lanes.c.)
*/
#define _GNU_SOURCE  /* pthreads; sched_getaffinity */
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search_walk.h"

/* Walks a chunk's entries (phase 0: each node's sub-tree or candidate, checked, bounded,
   priced or, with an admit hook, kept for it) or prices what the hook admitted of them
   (phase 1); uses only the thread's own scratch, so the threads run it concurrently. */
static void price_slot (walker *w, slot *s, worker_scratch *ws) {
  int i;
  if (s->phase == 1) {
    nd_walk_price_pending(w, s, ws);
    return;
  }
  nd_pool_slot_empty(w, s);  /* (delivery left it no rows; an empty slot costs one read) */
  for (i = 0; i < s->n; i++)
    if (nd_walk_price_entry(w, s, ws, i)) break;
}

/* The slot with sequence number k. */
static slot *slot_at (walker *w, unsigned long long k) {
  return &w->slots[k % (unsigned long long)w->nslots];
}

/*
** Without a lock. The walk publishes a chunk by raising filled (or admitted) with release
** order, after writing it; a thread takes one by raising taken (or priced) from what it
** read; a thread done with a phase stores the slot's state with release order, after its
** rows and counts, and the walk reads that state with acquire order before it reads them.
** A thread with nothing to do first looks again for a while (SPIN_LOOKS), then sleeps: it
** says so (idle, waiting), looks once more under the pool's lock, and waits; whoever makes
** work for it reads that word after publishing and, if set, signals under the same lock,
** so no wake-up is lost (the word and the publishing are sequentially consistent). Chunks
** take microseconds, a sleep and wake-up tens of them in a VM; the pool's lock taken some
** six times a chunk made -j 2 slower than its two threads' work by about a tenth
** (DeepSeek-V3 on 2,048 devices, 12,000 chunks).
*/
#define SPIN_LOOKS 2000

int nd_search_processors (void) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
#endif
  return online > 0 ? (int)online : 1;
}

/* Looks before a sleep: none when there are more threads than processors to run them (a
   thread that looks keeps the one that would give it work off the processor: -j 4 on 2 took
   0.14 s where sleeping at once took 0.10). */
static int looks_before_sleep (const walker *w) {
  return w->threads + 1 <= nd_search_processors() ? SPIN_LOOKS : 0;
}


/* The walk made work (published) for a worker: one woken if any sleeps. */
static void wake_worker (walker *w) {
  if (atomic_load(&w->pc.idle) == 0) return;
  pthread_mutex_lock(&w->mu);
  pthread_cond_signal(&w->work_cv);
  pthread_mutex_unlock(&w->mu);
}

/* A thread done with a chunk's phase: done, or, phase 0 with an admit hook, checked; the
   walk woken if it sleeps. */
static void mark_done (walker *w, slot *s) {
  atomic_store(&s->state, w->admits && s->phase == 0 ? SLOT_CHECKED : SLOT_DONE);
  if (atomic_load(&w->pc.waiting) == 0) return;
  pthread_mutex_lock(&w->mu);
  pthread_cond_signal(&w->done_cv);
  pthread_mutex_unlock(&w->mu);
}

/* The oldest chunk the hook admitted that no thread has taken to price, else the oldest
   chunk no thread has taken, now taken, or NULL. */
static slot *take (walker *w) {
  for (;;) {
    unsigned long long k = nd_pool_count(&w->pc.priced);
    slot *s;
    if (k < nd_pool_count(&w->pc.admitted)) {
      if (!atomic_compare_exchange_weak(&w->pc.priced.v, &k, k + 1)) continue;
      s = slot_at(w, k);
      s->phase = 1;
    }
    else {
      k = nd_pool_count(&w->pc.taken);
      if (k >= nd_pool_count(&w->pc.filled)) return NULL;
      if (!atomic_compare_exchange_weak(&w->pc.taken.v, &k, k + 1)) continue;
      s = slot_at(w, k);
      s->phase = 0;
    }
    atomic_store_explicit(&s->state, SLOT_TAKEN, memory_order_relaxed);
    return s;
  }
}

/* Whether a worker has something to take or should stop. */
static int work_for_worker (walker *w) {
  return atomic_load(&w->pc.quit)
      || nd_pool_count(&w->pc.priced) < nd_pool_count(&w->pc.admitted)
      || nd_pool_count(&w->pc.taken) < nd_pool_count(&w->pc.filled);
}

static void *worker_main (void *arg) {
  walker *w = (walker *)arg;
  worker_scratch *ws = nd_walk_new_scratch(w);
  for (;;) {
    slot *s = take(w);
    int looks;
    if (s) {
      if (ws) price_slot(w, s, ws);
      else {  /* out of memory: nothing priced; the walk reports it (nd_walk_deliver) */
        s->priced = s->npend = 0;
        memset(s->late, 0, sizeof s->late);
        s->late[ND_REFUSE_NO_MEMORY] = 1;
      }
      mark_done(w, s);
      continue;
    }
    for (looks = 0; looks < w->spin && !work_for_worker(w); looks++) nd_pool_pause();
    if (looks < w->spin) {
      if (atomic_load(&w->pc.quit)) break;
      continue;
    }
    pthread_mutex_lock(&w->mu);
    atomic_fetch_add(&w->pc.idle, 1);
    while (!work_for_worker(w)) pthread_cond_wait(&w->work_cv, &w->mu);
    atomic_fetch_sub(&w->pc.idle, 1);
    pthread_mutex_unlock(&w->mu);
    if (atomic_load(&w->pc.quit)) break;
  }
  nd_walk_free_scratch(ws);
  return NULL;
}

/* The state of the slot with sequence number k (what its thread wrote before it seen). */
static int state_of (walker *w, unsigned long long k) {
  return atomic_load(&slot_at(w, k)->state);
}

/* Delivers the oldest chunk in flight if it is done. 1 if delivered. */
static int deliver_oldest (walker *w) {
  slot *s;
  if (w->delivered == nd_pool_count(&w->pc.filled)) return 0;
  if (w->threads > 0 && state_of(w, w->delivered) != SLOT_DONE) return 0;
  s = slot_at(w, w->delivered++);
  nd_walk_deliver(w, s);
  return 1;
}

/* Whether the walk's hook has a checked chunk to run over. */
static int next_checked (walker *w) {
  unsigned long long k = nd_pool_count(&w->pc.admitted);
  return w->admits && k < nd_pool_count(&w->pc.filled) && state_of(w, k) == SLOT_CHECKED;
}

/*
** With an admit hook: the hook over the next chunk in fill order if its candidates are
** checked (on this thread: the hook is the caller's Lua), which then waits to be priced
** (or, stopping, is done with nothing to price). 1 if it ran.
*/
static int admit_next (walker *w) {
  slot *s;
  if (!next_checked(w)) return 0;
  s = slot_at(w, nd_pool_count(&w->pc.admitted));
  if (w->status == ND_SEARCH_OK) nd_walk_admit(w, s);
  else s->npend = 0;
  atomic_store_explicit(&s->state, SLOT_ADMITTED, memory_order_relaxed);
  atomic_fetch_add(&w->pc.admitted.v, 1);
  wake_worker(w);
  return 1;
}

/* Whether the oldest chunk in flight is done or the next one for the hook is checked. */
static int walk_can_go (walker *w) {
  return state_of(w, w->delivered) == SLOT_DONE || next_checked(w);
}

/* Waits until the oldest chunk in flight is done or the next one for the hook is checked. */
static void wait_for_walk (walker *w) {
  int looks;
  for (looks = 0; looks < w->spin; looks++) {
    if (walk_can_go(w)) return;
    nd_pool_pause();
  }
  pthread_mutex_lock(&w->mu);
  atomic_store(&w->pc.waiting, 1);
  while (!walk_can_go(w)) pthread_cond_wait(&w->done_cv, &w->mu);
  atomic_store(&w->pc.waiting, 0);
  pthread_mutex_unlock(&w->mu);
}

/*
** The walking thread is one of the -j threads: when it would wait, it prices the next
** chunk no worker has taken yet. Returns 1 if it priced one.
*/
static int help (walker *w) {
  slot *s = w->inline_scratch ? take(w) : NULL;
  if (!s) return 0;
  price_slot(w, s, w->inline_scratch);
  mark_done(w, s);
  return 1;
}

/* Delivers the oldest chunk if it is done, else runs the hook over a checked one, else
   prices one, else waits for one of those. */
static void make_progress (walker *w) {
  if (!deliver_oldest(w) && !admit_next(w) && !help(w)) wait_for_walk(w);
}

nd_search_row *nd_pool_row (walker *w, slot *s) {
  int at = s->priced % ROW_BLOCK;
  if (s->priced > 0 && at == 0) {
    row_block *b;
    if (w->pool) pthread_mutex_lock(&w->mu);  /* (the pool's threads share the spares) */
    if ((b = w->spare) != NULL) w->spare = b->next;
    if (w->pool) pthread_mutex_unlock(&w->mu);
    if (!b && !(b = (row_block *)malloc(sizeof *b))) return NULL;
    b->next = NULL;
    s->last->next = b;
    s->last = b;
  }
  s->priced++;
  return &s->last->rows[at];
}

void nd_pool_slot_empty (walker *w, slot *s) {
  nd_pool_rows_done(w, s);
  s->npend = 0;
  memset(s->late, 0, sizeof s->late);
  s->equivalent = s->pruned_time = s->pruned_memory = 0;
  s->skipped_time = s->skipped_memory = 0;
}

void nd_pool_rows_done (walker *w, slot *s) {
  row_block *first = s->rows->next, *end = s->last;
  s->rows->next = NULL;
  s->last = s->rows;
  s->priced = 0;
  if (!first) return;
  if (w->pool) pthread_mutex_lock(&w->mu);
  end->next = w->spare;
  w->spare = first;
  if (w->pool) pthread_mutex_unlock(&w->mu);
}

slot *nd_pool_current (walker *w) {
  return slot_at(w, nd_pool_count(&w->pc.filled));
}

/* The cuts for the chunk the walk fills next: those after chunk filled - CUT_LAG, which is
   delivered by now at any -j (at most nslots <= CUT_LAG chunks are in flight). */
static void next_cuts (walker *w) {
  unsigned long long f = nd_pool_count(&w->pc.filled);
  w->time_cut = w->first_time_cut;  /* (before any chunk's: the caller's at the start) */
  w->over_cut = w->first_over_cut;
  if (f >= CUT_LAG) {
    w->time_cut = w->cut_time[(f - CUT_LAG) % CUT_LAG];
    w->over_cut = w->cut_over[(f - CUT_LAG) % CUT_LAG];
  }
}

/* The walk's count raised by one (it alone writes it): release, and sequentially
   consistent with the idle word wake_worker reads after it. */
static void publish (pool_counter *c) {
  atomic_fetch_add(&c->v, 1);
}

void nd_pool_submit (walker *w) {
  slot *s = nd_pool_current(w);
  if (s->n == 0) return;
  if (w->threads == 0) {  /* -j 1: price inline (the hook between), deliver at once */
    worker_scratch *ws = w->inline_scratch;
    if (!ws) { w->status = ND_SEARCH_NO_MEMORY; s->n = 0; return; }
    s->phase = 0;
    price_slot(w, s, ws);
    if (w->admits) {
      if (w->status == ND_SEARCH_OK) nd_walk_admit(w, s);
      else s->npend = 0;
      s->phase = 1;
      price_slot(w, s, ws);
    }
    publish(&w->pc.filled);
    atomic_store(&w->pc.admitted.v, nd_pool_count(&w->pc.filled));
    atomic_store(&w->pc.priced.v, nd_pool_count(&w->pc.filled));
    w->delivered++;
    nd_walk_deliver(w, s);
    next_cuts(w);
    return;
  }
  atomic_store_explicit(&s->state, SLOT_FILLED, memory_order_relaxed);
  publish(&w->pc.filled);
  wake_worker(w);
  while (deliver_oldest(w) || admit_next(w)) {}  /* keep the caller's view current */
  /* the next slot must be free before the walk fills it: price rather than wait */
  while (nd_pool_count(&w->pc.filled) - w->delivered >= (unsigned long long)w->nslots)
    make_progress(w);
  next_cuts(w);
}

void nd_pool_drain (walker *w) {
  if (w->status == ND_SEARCH_OK) nd_pool_submit(w);
  while (w->delivered < nd_pool_count(&w->pc.filled)) {
    if (w->status == ND_SEARCH_OK) make_progress(w);
    else if (w->threads > 0) {  /* stopping: what is in flight finishes, undelivered */
      if (admit_next(w)) continue;  /* (with nothing left to price) */
      if (state_of(w, w->delivered) == SLOT_DONE) w->delivered++;
      else wait_for_walk(w);
    }
    else w->delivered++;
  }
  next_cuts(w);
}

void nd_pool_free_rows (row_block *b) {
  while (b) {
    row_block *next = b->next;
    free(b);
    b = next;
  }
}

static void free_slots (walker *w) {
  int i;
  nd_pool_free_rows(w->spare);
  w->spare = NULL;
  if (!w->slots) return;
  for (i = 0; i < w->nslots; i++) {
    free(w->slots[i].cand);
    free(w->slots[i].index);
    free(w->slots[i].flag);
    nd_pool_free_rows(w->slots[i].rows);  /* (blocks a stopped search left it) */
    free(w->slots[i].pend);
    free(w->slots[i].pend_index);
  }
  free(w->slots);
}

int nd_pool_open (walker *w) {
  int i;
  w->slots = (slot *)calloc((size_t)w->nslots, sizeof *w->slots);
  if (!w->slots) return ND_SEARCH_NO_MEMORY;
  for (i = 0; i < w->nslots; i++) {
    slot *s = &w->slots[i];
    s->cand = (nd_candidate *)malloc((size_t)w->chunk * sizeof *s->cand);
    s->index = (unsigned long long *)malloc((size_t)w->chunk * sizeof *s->index);
    s->flag = (unsigned char *)malloc((size_t)w->chunk);
    s->rows = s->last = (row_block *)malloc(sizeof *s->rows);
    if (s->rows) s->rows->next = NULL;
    if (!s->cand || !s->index || !s->flag || !s->rows) {
      free_slots(w);
      w->slots = NULL;
      return ND_SEARCH_NO_MEMORY;
    }
  }
  if (w->threads > 0) {
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    w->pool = 1;
    w->spin = looks_before_sleep(w);
    w->tids = (pthread_t *)calloc((size_t)w->threads, sizeof *w->tids);
    for (i = 0; w->tids && i < w->threads; i++)
      if (pthread_create(&w->tids[i], NULL, worker_main, w) == 0) w->started++;
    if (w->started == 0) w->threads = 0;  /* no thread: price inline */
  }
  return ND_SEARCH_OK;
}

void nd_pool_close (walker *w) {
  int i;
  if (w->pool) {
    atomic_store(&w->pc.quit, 1);
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    for (i = 0; i < w->started; i++) pthread_join(w->tids[i], NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work_cv);
    pthread_cond_destroy(&w->done_cv);
    w->pool = 0;
  }
  free(w->tids);
  w->tids = NULL;
  free_slots(w);
  w->slots = NULL;
}
