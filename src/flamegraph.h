/* A self-contained interactive flame graph (one SVG, with search, click-to-zoom and tooltips),
 * written with libxml2, in the spirit of flamegraph.pl. */
#ifndef DNT_FLAMEGRAPH_H
#define DNT_FLAMEGRAPH_H

#include "profile.h"

/* Writes the profile's stacks (all threads, one level per thread at the root) to path.
 * 0, or -1 with an error printed. */
int dnt_flamegraph_write(const struct dnt_profile *prof, const char *title, const char *path);

#endif
