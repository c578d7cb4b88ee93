/*
** search_pool.c -- the search's pool: chunks of the walk (slots) priced on threads and
** delivered in the order they were filled.
**
** The calling thread walks and fills slots (search.c); at -j 2 and up, jobs - 1 workers and
** the calling thread, when it would wait, price them, each taking the oldest slot no thread
** has taken (with an admit hook, the oldest the hook has passed first: see SLOT_*). Slots
** are delivered strictly in the order they were filled, and the hook runs over them in that
** order, so the rows a caller sees, the hook's calls and every count are the same at any -j.
*/
#define _POSIX_C_SOURCE 200809L  /* pthreads */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
  nd_pool_rows_done(w, s);  /* (none left but a stopped search's) */
  s->npend = 0;
  memset(s->late, 0, sizeof s->late);
  s->equivalent = s->pruned_time = s->pruned_memory = 0;
  s->skipped_time = s->skipped_memory = 0;
  for (i = 0; i < s->n; i++)
    if (nd_walk_price_entry(w, s, ws, i)) break;
}

/* The slot with sequence number k. */
static slot *slot_at (walker *w, unsigned long long k) {
  return &w->slots[k % (unsigned long long)w->nslots];
}

/* A thread done with a chunk's phase (w->mu held): done, or, phase 0 with an admit hook,
   checked. The walk, waiting for the oldest chunk in flight or for the next one its hook
   runs over (wait_for_walk), is woken when it is that one. */
static void mark_done (walker *w, slot *s) {
  if (w->admits && s->phase == 0) {
    s->state = SLOT_CHECKED;
    if (w->admitted < w->filled && s == slot_at(w, w->admitted))
      pthread_cond_signal(&w->done_cv);
    return;
  }
  s->state = SLOT_DONE;
  if (s == slot_at(w, w->delivered)) pthread_cond_signal(&w->done_cv);
}

/* The oldest chunk the hook admitted that no thread has taken to price, else the oldest
   chunk no thread has taken, now taken (w->mu held), or NULL. */
static slot *take (walker *w) {
  slot *s;
  if (w->priced < w->admitted) {
    s = slot_at(w, w->priced++);
    s->phase = 1;
  }
  else if (w->taken < w->filled) {
    s = slot_at(w, w->taken++);
    s->phase = 0;
  }
  else return NULL;
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
    else s->priced = s->npend = 0;  /* out of memory: nothing priced; the walk reports it */
    pthread_mutex_lock(&w->mu);
    if (!ws) w->status = ND_SEARCH_NO_MEMORY;
    mark_done(w, s);
  }
  pthread_mutex_unlock(&w->mu);
  nd_walk_free_scratch(ws);
  return NULL;
}

/* Delivers the oldest chunk in flight if it is done. 1 if delivered. */
static int deliver_oldest (walker *w) {
  slot *s;
  if (w->delivered == w->filled) return 0;
  s = slot_at(w, w->delivered);
  if (w->threads > 0) {
    int done;
    pthread_mutex_lock(&w->mu);
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
** With an admit hook: the hook over the next chunk in fill order if its candidates are
** checked (on this thread, the pool's lock free: the hook is the caller's Lua), which then
** waits to be priced (or, stopping, is done with nothing to price). 1 if it ran.
*/
static int admit_next (walker *w) {
  slot *s;
  int checked;
  if (!w->admits || w->admitted == w->filled) return 0;
  s = slot_at(w, w->admitted);
  pthread_mutex_lock(&w->mu);
  checked = s->state == SLOT_CHECKED;
  pthread_mutex_unlock(&w->mu);
  if (!checked) return 0;
  if (w->status == ND_SEARCH_OK) nd_walk_admit(w, s);
  else s->npend = 0;
  pthread_mutex_lock(&w->mu);
  s->state = SLOT_ADMITTED;
  w->admitted++;
  pthread_cond_signal(&w->work_cv);
  pthread_mutex_unlock(&w->mu);
  return 1;
}

/* Waits until the oldest chunk in flight is done or the next one for the hook is checked. */
static void wait_for_walk (walker *w) {
  slot *oldest = slot_at(w, w->delivered), *next = slot_at(w, w->admitted);
  pthread_mutex_lock(&w->mu);
  while (oldest->state != SLOT_DONE
         && !(w->admits && w->admitted < w->filled && next->state == SLOT_CHECKED))
    pthread_cond_wait(&w->done_cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
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

/* Delivers the oldest chunk if it is done, else runs the hook over a checked one, else
   prices one, else waits for one of those. */
static void make_progress (walker *w) {
  if (!deliver_oldest(w) && !admit_next(w) && !help(w)) wait_for_walk(w);
}

nd_search_row *nd_pool_row (walker *w, slot *s) {
  int at = s->priced % ROW_BLOCK;
  if (s->priced > 0 && at == 0) {
    row_block *b;
    if (w->threads > 0) pthread_mutex_lock(&w->mu);
    if ((b = w->spare) != NULL) w->spare = b->next;
    if (w->threads > 0) pthread_mutex_unlock(&w->mu);
    if (!b && !(b = (row_block *)malloc(sizeof *b))) return NULL;
    b->next = NULL;
    s->last->next = b;
    s->last = b;
  }
  s->priced++;
  return &s->last->rows[at];
}

void nd_pool_rows_done (walker *w, slot *s) {
  row_block *first = s->rows->next, *end = s->last;
  s->rows->next = NULL;
  s->last = s->rows;
  s->priced = 0;
  if (!first) return;
  if (w->threads > 0) pthread_mutex_lock(&w->mu);
  end->next = w->spare;
  w->spare = first;
  if (w->threads > 0) pthread_mutex_unlock(&w->mu);
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
    w->filled++;
    w->admitted = w->priced = w->filled;
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
  while (deliver_oldest(w) || admit_next(w)) {}  /* keep the caller's view current */
  /* the next slot must be free before the walk fills it: price rather than wait */
  while (w->filled - w->delivered >= (unsigned long long)w->nslots) make_progress(w);
  next_cuts(w);
}

void nd_pool_drain (walker *w) {
  if (w->status == ND_SEARCH_OK) nd_pool_submit(w);
  while (w->delivered < w->filled) {
    if (w->status == ND_SEARCH_OK) make_progress(w);
    else if (w->threads > 0) {  /* stopping: what is in flight finishes, undelivered */
      slot *s = slot_at(w, w->delivered);
      int done;
      if (admit_next(w)) continue;  /* (with nothing left to price) */
      pthread_mutex_lock(&w->mu);
      done = s->state == SLOT_DONE;
      if (done) w->delivered++;
      pthread_mutex_unlock(&w->mu);
      if (!done) wait_for_walk(w);
    }
    else w->delivered++;
  }
  next_cuts(w);
}

static void free_blocks (row_block *b) {
  while (b) {
    row_block *next = b->next;
    free(b);
    b = next;
  }
}

static void free_slots (walker *w) {
  int i;
  free_blocks(w->spare);
  w->spare = NULL;
  if (!w->slots) return;
  for (i = 0; i < w->nslots; i++) {
    free(w->slots[i].cand);
    free(w->slots[i].index);
    free(w->slots[i].flag);
    free_blocks(w->slots[i].rows);  /* (blocks a stopped search left it) */
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
