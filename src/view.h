/* The options that narrow a profile's view (dnt-profile.h's dnt_profile_view): --thread, --focus,
 * --exclude, --hide-idle, one group of rows for report, convert and the analyses' flame graphs. */
#ifndef DNT_VIEW_H
#define DNT_VIEW_H

#include "options.h"

struct dnt_profile;

struct dnt_view_opts {
  struct dnt_strlist threads; /* --thread, repeatable (its .v is freed by dnt_view_release) */
  const char *focus, *exclude;
  int hide_idle;
};

/* report's and convert's --no-async: an int of the options at off */
#define DNT_OPT_NO_ASYNC(off)                                                                                     \
  DNT_OPT_FLAG(0, "no-async", off,                                                                                \
               "a task's samples stay on the thread that ran them, under the\n"                                    \
               "thread pool's dispatch (by default, with the task library's\n"                                     \
               "events in the trace (collect --profile async-tasks), they are\n"                                   \
               "put under the code that awaited or started the task, on its\n"                                     \
               "thread, after a STARTING TASK frame, as dotnet-trace and\n"                                        \
               "PerfView show them; AWAIT_TIME is the time it waited)")

/* The rows, relative to a struct dnt_view_opts (include with DNT_OPT_GROUP). */
extern const struct dnt_option dnt_options_view[];

/* Whether any of them was given. */
int dnt_view_given(const struct dnt_view_opts *o);
/* Narrows prof (finished) to the view o gives; dies when out of memory. */
void dnt_view_apply(struct dnt_profile *prof, const struct dnt_view_opts *o);
void dnt_view_release(struct dnt_view_opts *o);

#endif
