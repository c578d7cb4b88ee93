/*
** ldevice.h -- for bindings that take a device argument: a device userdata's block is
** exactly one nd_device, under the metatable ND_DEVICE_MT. Include lua.h and lauxlib.h first.
*/
#ifndef NDPLAN_BIND_LDEVICE_H
#define NDPLAN_BIND_LDEVICE_H

#include "ndplan/device.h"

#define ND_DEVICE_MT "ndplan.device"

/* The device at stack index i; raises a type error if it is not one. */
static inline const nd_device *nd_checkdevice (lua_State *L, int i) {
  return (const nd_device *)luaL_checkudata(L, i, ND_DEVICE_MT);
}

/* The device at stack index i, or NULL (never raises). */
static inline const nd_device *nd_testdevice (lua_State *L, int i) {
  return (const nd_device *)luaL_testudata(L, i, ND_DEVICE_MT);
}

#endif
