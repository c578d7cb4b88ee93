/*
** The Lua bindings of ndplan: one opener per binding file (engine/bind/). Not part of the
** installed C API (include/ndplan/): the bindings, module.c and the host include it.
** luaopen_ndplan assembles the `ndplan` module: it registers every binding in
** package.preload as "ndplan.c.<name>", installs the searcher for the bundled Lua library
** and runs lua/ndplan/init.lua. Include lua.h before this header.
*/
#ifndef NDPLAN_LUA_H
#define NDPLAN_LUA_H

#define NDPLAN_ROOT_ENV "NDPLAN_ROOT"  /* load bundled files from this source tree instead */

int luaopen_ndplan(lua_State *L);          /* module.c: the assembled module */
int luaopen_ndplan_bundle(lua_State *L);   /* lbundle.c: bundled files and the searcher */
int luaopen_ndplan_yaml(lua_State *L);     /* lyaml.c: libyaml loader with line/column */
int luaopen_ndplan_units(lua_State *L);    /* lunits.c: byte/time/rate formatting */
int luaopen_ndplan_json(lua_State *L);     /* ljson.c: the JSON writer of ndplan.io.json */
int luaopen_ndplan_model(lua_State *L);    /* lmodel.c: model spec, layer stack, params */
int luaopen_ndplan_device(lua_State *L);   /* ldevice.c: device records */
int luaopen_ndplan_estimate(lua_State *L); /* lestimate.c: memory and step-time estimators */
int luaopen_ndplan_files(lua_State *L);    /* lfiles.c: mkdir, kinds, reads, temporaries */
void nd_files_cleanup(void);  /* lfiles.c: removes the registered temporaries (signal-safe) */
int luaopen_ndplan_search(lua_State *L);   /* lsearch.c: the strategy space, priced on threads */
int luaopen_ndplan_svg(lua_State *L);      /* lsvg.c: the text of chart elements */
int luaopen_ndplan_chart(lua_State *L);    /* lchart.c: the charts' per-point work */

/* ljson.c: Lua's order of two strings (lvm.c's l_strcmp: strcoll, piece by piece across
   embedded zeros), < 0, 0 or > 0 as a < b, a == b or a > b */
int nd_lua_string_order(const char *a, size_t alen, const char *b, size_t blen);

#endif
