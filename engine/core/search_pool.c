/*
** search_pool.c -- the search's pool: chunks of the walk (slots) priced on threads and
** delivered in the order they were filled.
**
** The calling thread walks and fills slots (search.c); at -j 2 and up, jobs - 1 workers and
** the calling thread, when it would wait, price them. A thread takes the oldest slot no
** thread has taken and prices its entries from the front; a thread that finds none joins
** the oldest slot with entries left, from the back, so a chunk of costly plans is shared
** instead of holding up every chunk after it. Each thread's rows and counts go into its own
** part, added to the slot under the pool's lock and put back in walk order. Slots are
** delivered strictly in the order they were filled, so the rows a caller sees and every
** count are the same at any -j.
*/
#define _POSIX_C_SOURCE 200809L  /* pthreads */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_walk.h"

/* Zeroes a slot's (or a part's) rows and counts. */
static void clear_counts (slot *s) {
  s->priced = 0;
  memset(s->late, 0, sizeof s->late);
  s->equivalent = s->pruned_time = s->pruned_memory = 0;
  s->skipped_time = s->skipped_memory = 0;
}

/* Prices one chunk on the walking thread alone (-j 1). */
static void price_slot (walker *w, slot *s, worker_scratch *ws) {
  int i;
  clear_counts(s);
  for (i = 0; i < s->n; i++)
    if (nd_walk_price_entry(w, s, ws, i)) break;
}

/* qsort's order of rows: their walk index. */
static int row_order (const void *a, const void *b) {
  unsigned long long x = ((const nd_search_row *)a)->index, y = ((const nd_search_row *)b)->index;
  return x < y ? -1 : x > y;
}

/* Whether a slot's rows are in walk order (parts taken from the back are not). */
static int in_walk_order (const slot *s) {
  int i;
  for (i = 1; i < s->priced; i++) if (s->rows[i - 1].index > s->rows[i].index) return 0;
  return 1;
}

/* Adds a thread's part to its slot (w->mu held): the counts, and its rows after the slot's
   (handed over whole when the slot has none), put in walk order when the last is in. */
static void merge_part (slot *s, slot *part) {
  int r;
  for (r = 0; r < ND_REFUSE_COUNT; r++) s->late[r] += part->late[r];
  s->equivalent += part->equivalent;
  s->pruned_time += part->pruned_time;
  s->pruned_memory += part->pruned_memory;
  s->skipped_time += part->skipped_time;
  s->skipped_memory += part->skipped_memory;
  if (part->priced == 0) return;
  if (s->priced == 0) {  /* the buffers swapped: no copy */
    nd_search_row *rows = s->rows;
    int cap = s->rows_cap;
    s->rows = part->rows; s->rows_cap = part->rows_cap; s->priced = part->priced;
    part->rows = rows; part->rows_cap = cap;
    return;
  }
  if (s->priced + part->priced > s->rows_cap) {
    int cap = s->priced + part->priced;
    nd_search_row *rows = (nd_search_row *)realloc(s->rows, (size_t)cap * sizeof *rows);
    if (!rows) { s->late[ND_REFUSE_NO_MEMORY] += (unsigned long long)part->priced; return; }
    s->rows = rows;
    s->rows_cap = cap;
  }
  memcpy(s->rows + s->priced, part->rows, (size_t)part->priced * sizeof *part->rows);
  s->priced += part->priced;
}

/* The next entry of s to price, from the front or the back of those left, or -1. */
static int next_entry (slot *s, int back) {
  unsigned long long r = atomic_load(&s->left), next;
  unsigned lo, hi;
  do {
    lo = (unsigned)(r & 0xffffffffu);
    hi = (unsigned)(r >> 32);
    if (lo >= hi) return -1;
    next = back ? (unsigned long long)(hi - 1) << 32 | lo : (unsigned long long)hi << 32 | (lo + 1);
  } while (!atomic_compare_exchange_weak(&s->left, &r, next));
  return (int)(back ? hi - 1 : lo);
}

static int entries_left (slot *s) {
  unsigned long long r = atomic_load(&s->left);
  return (unsigned)(r & 0xffffffffu) < (unsigned)(r >> 32);
}

/*
** Prices entries of slot s on this thread (w->mu held, the thread counted in s->active),
** from the front or the back of those left, into the thread's part, then adds the part to
** the slot; the last thread out marks the chunk done. Returns with w->mu held.
*/
static void price_part (walker *w, slot *s, worker_scratch *ws, int back) {
  slot *part = &ws->part;
  int i;
  part->cand = s->cand; part->index = s->index; part->flag = s->flag; part->n = s->n;
  part->time_cut = s->time_cut; part->over_cut = s->over_cut;
  clear_counts(part);
  pthread_mutex_unlock(&w->mu);
  while ((i = next_entry(s, back)) >= 0)
    if (nd_walk_price_entry(w, part, ws, i)) { atomic_store(&s->left, 0); break; }  /* stop */
  pthread_mutex_lock(&w->mu);
  merge_part(s, part);
  if (--s->active > 0) return;
  if (!in_walk_order(s)) qsort(s->rows, (size_t)s->priced, sizeof *s->rows, row_order);
  s->state = SLOT_DONE;
  /* the walk waits for the oldest chunk in flight alone (deliver_oldest) */
  if (s == &w->slots[w->delivered % (unsigned long long)w->nslots])
    pthread_cond_signal(&w->done_cv);
}

/*
** A chunk for a thread to price (w->mu held), the thread counted in its active ones, or
** NULL: the oldest in flight while some of its entries are left (delivery waits for it),
** else the oldest no thread has taken, else the oldest with entries left. *back: whether
** the thread joins it (from the back of its entries). A chunk of costly plans is so shared
** by the threads instead of holding up the ones after it.
*/
static slot *work_for (walker *w, int *back) {
  unsigned long long k;
  slot *s;
  for (k = w->delivered; k < w->filled; k++) {
    s = &w->slots[k % (unsigned long long)w->nslots];
    if (s->state == SLOT_TAKEN && k == w->delivered && entries_left(s)) break;
    if (s->state == SLOT_FILLED) {
      s->state = SLOT_TAKEN;
      clear_counts(s);
      atomic_store(&s->left, (unsigned long long)s->n << 32);
      s->active = 1;
      *back = 0;
      return s;
    }
  }
  for (k = w->delivered; k < w->filled; k++) {
    s = &w->slots[k % (unsigned long long)w->nslots];
    if (s->state == SLOT_TAKEN && entries_left(s)) {
      s->active++;
      *back = 1;
      return s;
    }
  }
  return NULL;
}

static void *worker_main (void *arg) {
  walker *w = (walker *)arg;
  worker_scratch *ws = nd_walk_new_scratch(w);
  pthread_mutex_lock(&w->mu);
  if (!ws) w->status = ND_SEARCH_NO_MEMORY;  /* it prices nothing; the walk reports it */
  while (ws) {
    int back;
    slot *s = work_for(w, &back);
    if (s) price_part(w, s, ws, back);
    else if (w->quit) break;
    else pthread_cond_wait(&w->work_cv, &w->mu);
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
    if (done) w->delivered++;  /* under the lock: the workers read it (work_for) */
    pthread_mutex_unlock(&w->mu);
    if (!done) return 0;
  }
  else w->delivered++;
  nd_walk_deliver(w, s);
  return 1;
}

/*
** The walking thread is one of the -j threads: when it would wait, it prices what a worker
** would (work_for), the oldest chunk's entries left first. Returns 1 if it priced any.
*/
static int help (walker *w) {
  slot *s;
  int back;
  pthread_mutex_lock(&w->mu);
  if (!w->inline_scratch || !(s = work_for(w, &back))) { pthread_mutex_unlock(&w->mu); return 0; }
  pthread_cond_signal(&w->work_cv);  /* a waiting worker may join it */
  price_part(w, s, w->inline_scratch, back);
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
    s->rows = (nd_search_row *)malloc((size_t)w->chunk * sizeof *s->rows);
    s->rows_cap = w->chunk;
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
