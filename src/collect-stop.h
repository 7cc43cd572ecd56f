/* collect's stopping event (dotnet-trace's --stopping-event-provider-name, -event-name,
 * -payload-filter): the session stops once an event of that provider (and name, and payload
 * values) has arrived, as the trace streams in. */
#ifndef DNT_COLLECT_STOP_H
#define DNT_COLLECT_STOP_H

#include <stddef.h>

#include "dnt-trace.h"

struct dnt_stop_event {
  struct dnt_event_match match;
  struct dnt_schema *schema;        /* layouts of the runtime's own events (no fields in metadata) */
  uint32_t pointer_size;            /* the trace header's, for the layouts' pointers */
  int fired;
  void (*on_match)(void *ud, const char *provider, const char *event);
  void *ud;
};

/* Checks the three options as dotnet-trace does (an event name needs a provider, a payload filter
 * needs an event name; FIELD:VALUE pairs) and sets up se (caller's storage). 0 when none was
 * given (se unused), 1 when set, or DNT_EXIT_USAGE with the error printed. */
int dnt_stop_event_init(struct dnt_stop_event *se, const char *provider, const char *event, const char *filter,
                        void (*on_match)(void *ud, const char *provider, const char *event), void *ud);
void dnt_stop_event_release(struct dnt_stop_event *se);
/* The parser callbacks that watch for it (ud: se). */
void dnt_stop_event_callbacks(ntr_callbacks *cb);

#endif
