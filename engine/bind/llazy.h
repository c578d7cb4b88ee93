/*
** llazy.h -- result tables whose nested fields are built on first read: nd.estimate's
** results (lestimate.c) and the rows a search hands a policy's objective (lsearch.c). A
** table's state, a userdata that begins with an nd_lazy, is kept by the table (in a table
** weak in its keys); the tables of one kind share a metatable whose __index builds a field
** not built yet and stores it in the table, __pairs builds them all first, and an assigned
** field is the caller's from then on. Include lua.h first.
*/
#ifndef NDPLAN_BIND_LLAZY_H
#define NDPLAN_BIND_LLAZY_H

/* Pushes lazy field i's value (nil: the table has none) of the table at index 1, whose
   state is the userdata at index s. */
typedef void (*nd_lazy_build) (lua_State *L, int s, int i);

typedef struct nd_lazy {
  const char *const *names;  /* the lazy fields, NULL-terminated, at most 32 */
  nd_lazy_build build;
  unsigned built;            /* bit i: names[i] built or assigned */
} nd_lazy;

/* The table below the state on top (a userdata beginning with an nd_lazy, filled) takes the
   lazy tables' metatable of `name` (its __metatable; one per address of name); the state
   is popped. */
void nd_lazy_attach (lua_State *L, const char *name);

/* The state of the lazy table at index t, pushed; NULL (nothing pushed) when it has none. */
nd_lazy *nd_lazy_state (lua_State *L, int t);

/* The strings of a NULL-terminated list of names, as an array kept per list and state (in
   the registry, by the list's address), pushed; returns its index. A binding that sets the
   same fields on every result pushes them from there (lua_rawgeti) and sets them raw,
   instead of finding each name's string again. */
int nd_push_interned (lua_State *L, const char *const *names);

/* The registry's table at key id, weak in its keys, pushed (created on first use). */
void nd_push_weak_keyed (lua_State *L, const void *id);

#endif
