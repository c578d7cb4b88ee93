/*
** test_fields.c -- the one vocabulary (ndplan/fields.h): every double of nd_costs and
** nd_efficiency has exactly one descriptor row, the defaults are the rows' and validate,
** each row's range is what validation enforces (just inside passes, just outside fails
** naming the field), and the derived gemm_half_size default is 1 us of work at bf16 peak.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ndplan/estimate.h"
#include "ndplan/fields.h"
#include "ndplan/recompute.h"
#include "fixtures.h"


/* Each row names a distinct double slot, and the rows cover the struct. */
static void check_cover (const char *what, const nd_field *f, int n, size_t size) {
  unsigned char seen[512];
  int i;
  CHECK(size == (size_t)n * sizeof(double), "%s: %d rows for %zu doubles", what, n,
        size / sizeof(double));
  memset(seen, 0, sizeof seen);
  for (i = 0; i < n; i++) {
    size_t slot = f[i].offset / sizeof(double);
    CHECK(f[i].offset % sizeof(double) == 0 && f[i].offset < size, "%s.%s: offset", what,
          f[i].name);
    CHECK(slot < sizeof seen && !seen[slot], "%s.%s: slot named twice", what, f[i].name);
    if (slot < sizeof seen) seen[slot] = 1;
    CHECK(f[i].doc && f[i].doc[0] && f[i].unit && f[i].unit[0], "%s.%s: doc and unit", what,
          f[i].name);
    CHECK(nd_field_find(f, n, f[i].name) == &f[i], "%s.%s: found by name", what, f[i].name);
  }
  CHECK(nd_field_find(f, n, "no_such_field") == NULL, "%s: unknown name", what);
}


int main (void) {
  int n, i;
  const nd_field *f;
  char err[256];

  /* costs: defaults from the rows, validation by the rows' ranges */
  {
    nd_costs c;
    f = nd_cost_fields(&n);
    check_cover("costs", f, n, sizeof(nd_costs));
    nd_costs_init(&c);
    for (i = 0; i < n; i++)
      CHECK(nd_field_get(&c, &f[i]) == f[i].dflt, "costs.%s default", f[i].name);
    CHECK(nd_costs_validate(&c, err, sizeof err) == 0, "default costs validate");
    CHECK(c.weight_bytes == 2.0 && c.optimizer_bytes == 8.0 && c.dp_overlap == 1.0,
          "the documented defaults (bf16 weights, Adam, overlapped DP)");
    for (i = 0; i < n; i++) {
      char want[96];
      nd_costs_init(&c);
      *nd_field_slot(&c, &f[i]) = f[i].hi;
      CHECK(nd_costs_validate(&c, err, sizeof err) == 0, "costs.%s = hi passes", f[i].name);
      *nd_field_slot(&c, &f[i]) = f[i].hi * 1.01 + 0.01;
      snprintf(want, sizeof want, "costs.%s:", f[i].name);
      CHECK(nd_costs_validate(&c, err, sizeof err) != 0 && strncmp(err, want, strlen(want)) == 0,
            "costs.%s above hi refused, naming it: %s", f[i].name, err);
      *nd_field_slot(&c, &f[i]) = -0.001;
      CHECK(nd_costs_validate(&c, err, sizeof err) != 0, "costs.%s negative refused", f[i].name);
      *nd_field_slot(&c, &f[i]) = NAN;
      CHECK(nd_costs_validate(&c, err, sizeof err) != 0, "costs.%s NaN refused", f[i].name);
    }
  }

  /* efficiencies: defaults from the rows, validation by the rows' ranges */
  {
    nd_device d;
    f = nd_efficiency_fields(&n);
    check_cover("efficiency", f, n, sizeof(nd_efficiency));
    fixture_h100(&d);
    for (i = 0; i < n; i++)
      CHECK(nd_field_get(&d.efficiency, &f[i]) == f[i].dflt, "efficiency.%s default",
            f[i].name);
    CHECK(nd_device_validate(&d, err, sizeof err) == 0, "defaults validate: %s", err);
    for (i = 0; i < n; i++) {
      double *slot;
      char want[96];
      fixture_h100(&d);
      slot = nd_field_slot(&d.efficiency, &f[i]);
      snprintf(want, sizeof want, "efficiency.%s ", f[i].name);
      *slot = f[i].lo_open ? f[i].hi : 0.0;
      CHECK(nd_device_validate(&d, err, sizeof err) == 0, "efficiency.%s in range", f[i].name);
      *slot = f[i].lo_open ? 0.0 : -0.5;
      CHECK(nd_device_validate(&d, err, sizeof err) != 0 && strncmp(err, want, strlen(want)) == 0,
            "efficiency.%s below range refused, naming it: %s", f[i].name, err);
      *slot = INFINITY;
      CHECK(nd_device_validate(&d, err, sizeof err) != 0, "efficiency.%s infinite refused",
            f[i].name);
    }
    /* fit bounds lie inside the valid range */
    for (i = 0; i < n; i++)
      if (f[i].fit_hi > 0.0)
        CHECK(f[i].fit_lo >= f[i].lo && f[i].fit_hi <= f[i].hi && f[i].fit_lo < f[i].fit_hi
              && f[i].fit_scale > 0.0, "efficiency.%s fit bounds", f[i].name);
  }

  /* stack bounds (what a profile's fit may reach) lie inside the valid range, of both
     tables, and a default within them (where there is one) is one a profile may keep */
  {
    const nd_field *tables[2];
    int counts[2], t, bounded = 0;
    tables[0] = nd_cost_fields(&counts[0]);
    tables[1] = nd_efficiency_fields(&counts[1]);
    for (t = 0; t < 2; t++)
      for (i = 0; i < counts[t]; i++) {
        const nd_field *row = &tables[t][i];
        if (row->stack_hi == 0.0) {
          CHECK(row->stack_lo == 0.0, "%s: stack_lo without stack_hi", row->name);
          continue;
        }
        bounded++;
        CHECK(row->stack_lo >= row->lo && row->stack_hi <= row->hi && row->stack_lo < row->stack_hi
              && (!row->lo_open || row->stack_lo > row->lo), "%s stack bounds", row->name);
      }
    CHECK(bounded == 14, "the profile fits 10 costs and 4 efficiencies, got %d", bounded);
  }

  /* gemm_half_size: derived from the bf16 peak until given */
  {
    nd_device d;
    fixture_h100(&d);
    CHECK(d.efficiency.gemm_half_size == ND_DERIVED, "derived by default");
    CHECK(nd_device_half_size(&d) == 989e12 * ND_HALF_SIZE_SECONDS, "1 us at bf16 peak");
    CHECK(fabs(nd_device_gemm_efficiency(&d, 989e12 * ND_HALF_SIZE_SECONDS) - d.efficiency.gemm / 2) < 1e-12,
          "half of gemm at the derived size, before nd_device_complete");
    nd_device_complete(&d);
    CHECK(d.efficiency.gemm_half_size == 989e12 * ND_HALF_SIZE_SECONDS, "complete writes the derived value");
    d.efficiency.gemm_half_size = 0.0;
    nd_device_complete(&d);
    CHECK(d.efficiency.gemm_half_size == 0.0, "a given 0 (no size effect) stays");
  }

  /* name lists: NULL-terminated, distinct, and the plan modes are the mask bits */
  {
    const char *const *lists[] = {nd_strategy_keys, nd_space_keys, nd_memory_parts, nd_plan_modes};
    int l, j;
    for (l = 0; l < 4; l++)
      for (i = 0; lists[l][i]; i++)
        for (j = 0; j < i; j++)
          CHECK(strcmp(lists[l][i], lists[l][j]) != 0, "list %d: %s twice", l, lists[l][i]);
    for (i = 0; i < ND_RECOMPUTE_COUNT; i++)
      CHECK(strcmp(nd_plan_modes[i], nd_recompute_name((nd_recompute)i)) == 0, "mode %d", i);
    CHECK(strcmp(nd_plan_modes[ND_RECOMPUTE_COUNT], "offload") == 0
          && (1u << ND_RECOMPUTE_COUNT) == ND_PLAN_OFFLOAD, "offload is its bit");
    CHECK(strcmp(nd_plan_modes[ND_RECOMPUTE_COUNT + 1], "variants") == 0
          && (1u << (ND_RECOMPUTE_COUNT + 1)) == ND_PLAN_VARIANTS, "variants is its bit");
    for (i = 0; nd_space_keys[i]; i++) {
      for (j = 0; nd_strategy_keys[j] && strcmp(nd_strategy_keys[j], nd_space_keys[i]); j++) {}
      CHECK(nd_strategy_keys[j] != NULL, "space key %s is a strategy key", nd_space_keys[i]);
    }
  }

  if (failures) fprintf(stderr, "test_fields: %d failure(s)\n", failures);
  else printf("test_fields: all passed\n");
  return failures ? 1 : 0;
}
