/*
** lestimate.h -- for bindings that take named costs (ndplan.c.estimate, ndplan.c.search):
** one reader, so the two cannot disagree on which costs exist. Include lua.h first.
*/
#ifndef NDPLAN_BIND_LESTIMATE_H
#define NDPLAN_BIND_LESTIMATE_H

#include "ndplan/estimate.h"

/* Fills c with the defaults, then the table at index t (nil: none); raises on an unknown
   name or a value that is not a number. */
void nd_read_costs (lua_State *L, int t, nd_costs *c);

#endif
