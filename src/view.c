/* The view options (view.h). */
#include <stddef.h>
#include <stdlib.h>

#include "builtin.h"
#include "dnt-profile.h"
#include "util.h"
#include "view.h"

#define V(f) offsetof(struct dnt_view_opts, f)
const struct dnt_option dnt_options_view[] = {
    DNT_OPT_LIST(0, "thread", "TID|NAME", V(threads), "only this thread's samples (its id, or its name when the\n"
                                                       "trace names it; may be repeated)"),
    DNT_OPT_STRING(0, "focus", "FRAME", V(focus), "only the samples with a frame whose name holds FRAME"),
    DNT_OPT_STRING(0, "exclude", "FRAME", V(exclude), "leave out the samples with a frame whose name holds FRAME"),
    DNT_OPT_FLAG(0, "hide-idle", V(hide_idle), "leave out the threads with no sample in managed code (idle\n"
                                               "pool threads, waits, the epoll loop)"),
    DNT_OPT_END(),
};
#undef V

int dnt_view_given(const struct dnt_view_opts *o) { return o->threads.n || o->focus || o->exclude || o->hide_idle; }

void dnt_view_apply(struct dnt_profile *prof, const struct dnt_view_opts *o) {
  if (!dnt_view_given(o)) return;
  struct dnt_profile_view v = {.threads = o->threads.v, .nthreads = o->threads.n, .focus = o->focus,
                               .exclude = o->exclude, .hide_idle = o->hide_idle};
  if (dnt_profile_set_view(prof, &v) != 0) dnt_die(DNT_EXIT_FAILURE, "out of memory");
}

void dnt_view_release(struct dnt_view_opts *o) {
  free(o->threads.v);
  o->threads.v = NULL;
  o->threads.n = 0;
}
