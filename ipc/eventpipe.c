/* CollectTracing 1..6: the session request. Each version adds or replaces fields; the layouts
 * follow ds-eventpipe-protocol.c (the runtime's parser), which is what has to accept them. */
#include <string.h>

#include "dsipc-int.h"

#define MAX_PROVIDERS 1000 /* the runtime refuses more */

static void write_provider(struct dsipc__writer *w, int version, const dsipc_provider *p) {
  dsipc__w_u64(w, p->keywords);
  dsipc__w_u32(w, p->level);
  dsipc__w_string(w, p->name);
  dsipc__w_string(w, p->args);
  if (version >= 5) {
    dsipc__w_u8(w, p->n_event_ids ? (uint8_t)(p->filter_enable != 0) : 0);
    dsipc__w_u32(w, p->n_event_ids);
    for (uint32_t i = 0; i < p->n_event_ids; i++) dsipc__w_u32(w, p->event_ids[i]);
  }
}

int dsipc_encode_collect_tracing(dsipc_buf *b, int version, const dsipc_session_config *cfg) {
  static const uint8_t ids[] = {0,
                                DSIPC_EP_COLLECT,
                                DSIPC_EP_COLLECT2,
                                DSIPC_EP_COLLECT3,
                                DSIPC_EP_COLLECT4,
                                DSIPC_EP_COLLECT5,
                                DSIPC_EP_COLLECT6};
  if (version < 1 || version > 6 || !cfg || cfg->buffer_mb == 0 ||
      cfg->n_providers == 0 || cfg->n_providers > MAX_PROVIDERS || !cfg->providers)
    return DSIPC_EINVAL;
  for (size_t i = 0; i < cfg->n_providers; i++) {
    const dsipc_provider *p = &cfg->providers[i];
    if (!p->name || !*p->name || p->level > 5) return DSIPC_EINVAL;
    if (p->n_event_ids && (version < 5 || !p->event_ids)) return DSIPC_EINVAL;
  }

  struct dsipc__writer w;
  dsipc__w_begin(&w, b, DSIPC_SET_EVENTPIPE, ids[version]);
  if (version >= 5) dsipc__w_u32(&w, 0); /* session type: streaming */
  dsipc__w_u32(&w, cfg->buffer_mb);
  dsipc__w_u32(&w, cfg->format);
  if (version == 2 || version == 3) dsipc__w_u8(&w, cfg->request_rundown != 0);
  if (version >= 4) dsipc__w_u64(&w, cfg->rundown_keyword);
  if (version >= 3) dsipc__w_u8(&w, cfg->request_stackwalk != 0);
  dsipc__w_u32(&w, (uint32_t)cfg->n_providers);
  for (size_t i = 0; i < cfg->n_providers; i++) write_provider(&w, version, &cfg->providers[i]);
  if (version >= 6) dsipc__w_u32(&w, cfg->buffering_mode);
  return dsipc__w_end(&w);
}
