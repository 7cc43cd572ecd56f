/* fuzz-cli.c: libFuzzer target for the command-line grammars that take free text: --providers,
 * --profile, --clrevents, --counters, --duration, levels, quantile lists and watch's rules (a rule
 * read must say itself back, and a failure points inside the text). The first byte picks
 * the grammar, the rest is the argument. Seeds: tests/fuzz/seeds/cli (values from the manuals). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-agent.h"
#include "dnt-counters.h"
#include "providers.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  char *arg = malloc(size);
  if (!arg) return 0;
  memcpy(arg, data + 1, size - 1);
  arg[size - 1] = '\0';
  char err[512];
  switch (data[0] % 8) {
  case 0:
  case 1:
  case 2: {
    struct dnt_providers l;
    memset(&l, 0, sizeof l);
    int ignored = 0, rc;
    if (data[0] % 8 == 0) rc = dnt_providers_parse(&l, arg, err, sizeof err);
    else if (data[0] % 8 == 1) rc = dnt_providers_add_profiles(&l, arg, err, sizeof err);
    else rc = dnt_providers_add_clrevents(&l, arg, 4, &ignored, err, sizeof err);
    if (rc == 0)
      for (size_t i = 0; i < l.n; i++)
        if (!l.v[i].name || l.v[i].level > 5) abort();
    dnt_providers_release(&l);
    break;
  }
  case 3: {
    struct dnt_counter_specs l;
    memset(&l, 0, sizeof l);
    if (dnt_counter_specs_parse(&l, arg, err, sizeof err) == 0)
      for (size_t i = 0; i < l.n; i++) {
        if (!l.v[i].provider || !dnt_counter_specs_match(&l, l.v[i].provider, l.v[i].nnames ? l.v[i].names[0] : "x"))
          abort();
      }
    dnt_counter_specs_release(&l);
    break;
  }
  case 4:
    (void)dnt_parse_duration(arg);
    break;
  case 5: {
    int level = dnt_parse_level(arg);
    if (level > 5) abort();
    if (level >= 0) (void)dnt_level_text((uint32_t)level);
    break;
  }
  case 6: {
    struct dnt_rule r;
    size_t column;
    char text[300];
    if (dnt_rule_parse(arg, &r, err, sizeof err, &column) == 0) {
      if (!r.nactions || r.nactions > DNT_RULE_MAX_ACTIONS) abort();
      if (r.kind == DNT_TRIGGER_EVENT && (!r.provider || !*r.provider || !r.count || (r.event && !*r.event) ||
                                          (r.filter && !strchr(r.filter, ':'))))
        abort();
      (void)dnt_rule_trigger_text(&r, text, sizeof text);
      for (size_t i = 0; i < r.nactions; i++) (void)dnt_action_text(&r.actions[i], text, sizeof text);
    } else if (column < 1 || column > strlen(arg) + 1) {
      abort();
    }
    dnt_rule_release(&r);
    break;
  }
  default: {
    double q[8], v[8];
    if (dnt_parse_quantiles(arg, q, v, 8) > 8) abort();
    break;
  }
  }
  free(arg);
  return 0;
}
