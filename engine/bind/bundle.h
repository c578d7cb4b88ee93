/*
** Files bundled into the binary at build time (see engine/tools/embed.c): the Lua library
** (lua/), the bundled scripts (scripts/) and the catalog (examples/models, examples/devices).
*/
#ifndef NDPLAN_BIND_BUNDLE_H
#define NDPLAN_BIND_BUNDLE_H

#include <stddef.h>

typedef struct nd_bundled_file {
  const char *path;            /* path relative to the source tree, e.g. "lua/ndplan/init.lua" */
  const unsigned char *bytes;  /* contents, followed by a NUL byte */
  size_t size;                 /* length without that NUL */
  const unsigned char *chunk;  /* a .lua file compiled at build time (lua_dump, debug info
                                  kept), else NULL */
  size_t chunk_size;
} nd_bundled_file;

extern const nd_bundled_file nd_bundled_files[];  /* ends with an entry of NULL path */

#endif
