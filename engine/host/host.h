/*
** host.h -- what the REPL shares with the host's main program.
*/
#ifndef NDPLAN_HOST_H
#define NDPLAN_HOST_H

#include <lua.h>

extern const char *nd_progname;

int nd_report (lua_State *L, int status);           /* prints a failed call's message */
int nd_docall (lua_State *L, int narg, int nres);   /* the one protected call site */
void nd_repl (lua_State *L);                         /* the interactive loop (repl.c) */

#endif
