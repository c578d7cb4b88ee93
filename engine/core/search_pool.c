/*
** search_pool.c -- the search's pool: chunks of the walk (slots) priced on threads and
** delivered in the order they were filled.
**
** The calling thread walks and fills slots (search.c); at -j 2 and up, jobs - 1 workers and
** the calling thread, when it would wait, price them, each taking the oldest slot no thread
** has taken. Slots are delivered strictly in the order they were filled, so the rows a
** caller sees and every count are the same at any -j.
*/
#define _POSIX_C_SOURCE 200809L  /* pthreads */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_walk.h"

/* Rows a slot holds at first; a chunk that prices more grows its own (nd_walk_price_entry):
   most chunks price a row or two (DeepSeek-V3 on 2,048 devices: 17,150 rows in 11,987
   chunks), and rows for every entry of 16 slots in flight held 2 MB the search never used. */
#define SLOT_FIRST_ROWS 64

/* Prices one chunk; uses only the thread's own scratch, so the threads run it concurrently. */
static void price_slot (walker *w, slot *s, worker_scratch *ws) {
  int i;
  s->priced = 0;
  memset(s->late, 0, sizeof s->late);
  s->equivalent = s->pruned_time = s->pruned_memory = 0;
  s->skipped_time = s->skipped_memory = 0;
  for (i = 0; i < s->n; i++)
    if (nd_walk_price_entry(w, s, ws, i)) break;
}

/* A priced chunk done (w->mu held): the walk, waiting for the oldest chunk in flight
   alone (deliver_oldest), is woken when it is that one. */
static void mark_done (walker *w, slot *s) {
  s->state = SLOT_DONE;
  if (s == &w->slots[w->delivered % (unsigned long long)w->nslots])
    pthread_cond_signal(&w->done_cv);
}

/* The oldest chunk no thread has taken, now taken (w->mu held), or NULL. */
static slot *take (walker *w) {
  slot *s;
  if (w->taken == w->filled) return NULL;
  s = &w->slots[w->taken % (unsigned long long)w->nslots];
  w->taken++;
  s->state = SLOT_TAKEN;
  return s;
}

static void *worker_main (void *arg) {
  walker *w = (walker *)arg;
  worker_scratch *ws = nd_walk_new_scratch(w);
  pthread_mutex_lock(&w->mu);
  for (;;) {
    slot *s = take(w);
    if (!s) {
      if (w->quit) break;
      pthread_cond_wait(&w->work_cv, &w->mu);
      continue;
    }
    pthread_mutex_unlock(&w->mu);
    if (ws) price_slot(w, s, ws);
    else s->priced = 0;  /* out of memory: nothing priced; the walk reports it */
    pthread_mutex_lock(&w->mu);
    if (!ws) w->status = ND_SEARCH_NO_MEMORY;
    mark_done(w, s);
  }
  pthread_mutex_unlock(&w->mu);
  nd_walk_free_scratch(ws);
  return NULL;
}

/* Delivers the oldest chunk in flight, waiting for it if block is set. 1 if delivered. */
static int deliver_oldest (walker *w, int block) {
  slot *s;
  if (w->delivered == w->filled) return 0;
  s = &w->slots[w->delivered % (unsigned long long)w->nslots];
  if (w->threads > 0) {
    int done;
    pthread_mutex_lock(&w->mu);
    while (s->state != SLOT_DONE && block) pthread_cond_wait(&w->done_cv, &w->mu);
    done = s->state == SLOT_DONE;
    if (done) w->delivered++;  /* under the lock: a worker reads it (mark_done) */
    pthread_mutex_unlock(&w->mu);
    if (!done) return 0;
  }
  else w->delivered++;
  nd_walk_deliver(w, s);
  return 1;
}

/*
** The walking thread is one of the -j threads: when it would wait, it prices the next
** chunk no worker has taken yet. Returns 1 if it priced one.
*/
static int help (walker *w) {
  slot *s;
  pthread_mutex_lock(&w->mu);
  s = w->inline_scratch ? take(w) : NULL;
  pthread_mutex_unlock(&w->mu);
  if (!s) return 0;
  price_slot(w, s, w->inline_scratch);
  pthread_mutex_lock(&w->mu);
  mark_done(w, s);
  pthread_mutex_unlock(&w->mu);
  return 1;
}

/* Delivers the oldest chunk if it is done, else prices one, else waits for the oldest. */
static void make_progress (walker *w) {
  if (!deliver_oldest(w, 0) && !help(w)) deliver_oldest(w, 1);
}

slot *nd_pool_current (walker *w) {
  return &w->slots[w->filled % (unsigned long long)w->nslots];
}

/* The cuts for the chunk the walk fills next: those after chunk filled - CUT_LAG, which is
   delivered by now at any -j (at most nslots <= CUT_LAG chunks are in flight). */
static void next_cuts (walker *w) {
  unsigned long long f = w->filled;
  w->time_cut = w->over_cut = HUGE_VAL;
  if (f >= CUT_LAG) {
    w->time_cut = w->cut_time[(f - CUT_LAG) % CUT_LAG];
    w->over_cut = w->cut_over[(f - CUT_LAG) % CUT_LAG];
  }
}

void nd_pool_submit (walker *w) {
  slot *s = nd_pool_current(w);
  if (s->n == 0) return;
  if (w->threads == 0) {  /* -j 1: price inline, deliver at once */
    worker_scratch *ws = w->inline_scratch;
    if (!ws) { w->status = ND_SEARCH_NO_MEMORY; s->n = 0; return; }
    price_slot(w, s, ws);
    w->filled++;
    w->delivered++;
    nd_walk_deliver(w, s);
    next_cuts(w);
    return;
  }
  pthread_mutex_lock(&w->mu);
  s->state = SLOT_FILLED;
  w->filled++;
  pthread_cond_signal(&w->work_cv);
  pthread_mutex_unlock(&w->mu);
  while (deliver_oldest(w, 0)) {}  /* keep the caller's view current */
  /* the next slot must be free before the walk fills it: price rather than wait */
  while (w->filled - w->delivered >= (unsigned long long)w->nslots) make_progress(w);
  next_cuts(w);
}

void nd_pool_drain (walker *w) {
  if (w->status == ND_SEARCH_OK) nd_pool_submit(w);
  while (w->delivered < w->filled) {
    if (w->status == ND_SEARCH_OK) make_progress(w);
    else {
      slot *s = &w->slots[w->delivered % (unsigned long long)w->nslots];
      if (w->threads > 0) {
        pthread_mutex_lock(&w->mu);
        while (s->state != SLOT_DONE) pthread_cond_wait(&w->done_cv, &w->mu);
        w->delivered++;
        pthread_mutex_unlock(&w->mu);
      }
      else w->delivered++;
    }
  }
  next_cuts(w);
}

static void free_slots (walker *w) {
  int i;
  if (!w->slots) return;
  for (i = 0; i < w->nslots; i++) {
    free(w->slots[i].cand);
    free(w->slots[i].index);
    free(w->slots[i].flag);
    free(w->slots[i].rows);
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
    s->rows_cap = w->chunk < SLOT_FIRST_ROWS ? w->chunk : SLOT_FIRST_ROWS;
    s->rows = (nd_search_row *)malloc((size_t)s->rows_cap * sizeof *s->rows);
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
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
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
