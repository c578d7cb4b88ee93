/*
** lmodel.h -- for bindings that take a model argument: a model userdata's block is
** exactly one nd_model_spec, under the metatable ND_MODEL_MT. Include lua.h and lauxlib.h first.
*/
#ifndef NDPLAN_BIND_LMODEL_H
#define NDPLAN_BIND_LMODEL_H

#include "ndplan/model.h"

#define ND_MODEL_MT "ndplan.model"

/* The model at stack index i; raises a type error if it is not one. */
static inline const nd_model_spec *nd_checkmodel (lua_State *L, int i) {
  return (const nd_model_spec *)luaL_checkudata(L, i, ND_MODEL_MT);
}

#endif
