/*
** llazy.h -- result tables whose nested fields are built on first read: nd.estimate's
** results (lestimate.c) and the rows a search hands a policy's objective (lsearch.c). A
** table's metatable keeps its state, a userdata that begins with an nd_lazy; __index builds
** a field not built yet and stores it in the table, __pairs builds them all first, and an
** assigned field is the caller's from then on. Include lua.h first.
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
   lazy tables' metatable, its __metatable `name`; the state is popped. */
void nd_lazy_attach (lua_State *L, const char *name);

/* The state of the lazy table at index t, pushed; NULL (nothing pushed) when it has none. */
nd_lazy *nd_lazy_state (lua_State *L, int t);

#endif
