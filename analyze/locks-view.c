/* The contention analysis written out: a text report (the summary, each lock with its waiting
 * stacks, then the waiting stacks of all locks) or one JSON object with the same data. */
#include "analyze-int.h"

#define INDENT "                                                    " /* under the lock */

static void owner_text(FILE *fp, const dnt_lock *l) {
  if (!l->owner_thread)
    fputs("owner not named", fp);
  else if (l->owner_name) {
    fprintf(fp, "owner thread %llu (", (unsigned long long)l->owner_thread);
    dnt_text_put(fp, l->owner_name); /* the target named its thread */
    fputc(')', fp);
  }
  else
    fprintf(fp, "owner thread %llu", (unsigned long long)l->owner_thread);
}

void dnt_locks_write_text(FILE *fp, const struct dnt_locks_analysis *a, size_t top) {
  size_t n, ns;
  const dnt_lock *l = dnt_locks_list(a, &n);
  const dnt_locks_summary *s = dnt_locks_get_summary(a);
  const dnt_analysis_stack *st = dnt_locks_stacks(a, &ns);
  fprintf(fp, "Contention: %llu waits for %zu %s by %zu %s in %.3f s: %.3f ms waited, the longest %.3f ms\n",
          (unsigned long long)s->waits, s->locks, s->locks == 1 ? "lock" : "locks", s->threads,
          s->threads == 1 ? "thread" : "threads", s->trace_ms / 1000.0, s->wait_ms, s->max_wait_ms);
  if (s->with_duration)
    fprintf(fp, "Wait lengths: the runtime's DurationNs (%llu waits); from the events' timestamps: %.3f ms\n",
            (unsigned long long)s->with_duration, s->ts_wait_ms);
  else if (s->waits)
    fprintf(fp, "Wait lengths: from the events' timestamps (the runtime measures them itself from .NET 8)\n");
  if (s->unpaired) fprintf(fp, "Unpaired: %llu (a wait begun or ended outside the trace)\n", (unsigned long long)s->unpaired);
  if (s->locks_created) fprintf(fp, "Locks created: %llu\n", (unsigned long long)s->locks_created);
  size_t shown = top && top < n ? top : n;
  if (shown) fprintf(fp, "\n%10s %14s %12s %12s  %s\n", "Waits", "Wait ms", "Mean ms", "Max ms", "Lock");
  for (size_t i = 0; i < shown; i++) {
    fprintf(fp, "%10llu %14.3f %12.3f %12.3f  ", (unsigned long long)l[i].waits, l[i].wait_ms,
            l[i].waits ? l[i].wait_ms / (double)l[i].waits : 0.0, l[i].max_wait_ms);
    if (l[i].lock_id) {
      fprintf(fp, "0x%llx", (unsigned long long)l[i].lock_id);
      if (l[i].object_id) fprintf(fp, " (object 0x%llx)", (unsigned long long)l[i].object_id);
      fputs(", ", fp);
      owner_text(fp, &l[i]);
    } else {
      fputs("not named (before .NET 8)", fp);
    }
    if (l[i].native) fprintf(fp, ", %llu in native locks", (unsigned long long)l[i].native);
    fputc('\n', fp);
    for (size_t k = 0; k < l[i].nstacks; k++)
      dnt__write_stack_text(fp, &l[i].stacks[k], INDENT, "", 1);
    if (l[i].other_stacks)
      fprintf(fp, "%s(%llu more waits from other stacks)\n", INDENT, (unsigned long long)l[i].other_stacks);
  }
  if (shown < n) fprintf(fp, "\n(%zu more locks: --top shows more)\n", n - shown);
  if (ns) fprintf(fp, "\nWaiting stacks, all locks:\n");
  for (size_t k = 0; k < ns; k++) dnt__write_stack_text(fp, &st[k], "  ", "", 1);
}

void dnt_locks_write_json(FILE *fp, const struct dnt_locks_analysis *a, size_t top) {
  size_t n, ns;
  const dnt_lock *l = dnt_locks_list(a, &n);
  const dnt_locks_summary *s = dnt_locks_get_summary(a);
  const dnt_analysis_stack *st = dnt_locks_stacks(a, &ns);
  fprintf(fp,
          "{\"summary\":{\"waits\":%llu,\"waitMSec\":%.6f,\"maxWaitMSec\":%.6f,\"timestampWaitMSec\":%.6f,"
          "\"withDuration\":%llu,\"unpaired\":%llu,\"locksCreated\":%llu,\"locks\":%zu,\"threads\":%zu,"
          "\"traceMSec\":%.6f},\"locks\":[",
          (unsigned long long)s->waits, s->wait_ms, s->max_wait_ms, s->ts_wait_ms,
          (unsigned long long)s->with_duration, (unsigned long long)s->unpaired,
          (unsigned long long)s->locks_created, s->locks, s->threads, s->trace_ms);
  size_t shown = top && top < n ? top : n;
  for (size_t i = 0; i < shown; i++) {
    fprintf(fp,
            "%s{\"lockId\":%llu,\"objectId\":%llu,\"ownerThread\":%llu,\"ownerName\":", i ? "," : "",
            (unsigned long long)l[i].lock_id, (unsigned long long)l[i].object_id,
            (unsigned long long)l[i].owner_thread);
    if (l[i].owner_name)
      dnt_json_string(fp, l[i].owner_name);
    else
      fputs("null", fp);
    fprintf(fp,
            ",\"waits\":%llu,\"waitMSec\":%.6f,\"maxWaitMSec\":%.6f,\"timestampWaitMSec\":%.6f,\"native\":%llu,"
            "\"stacks\":[",
            (unsigned long long)l[i].waits, l[i].wait_ms, l[i].max_wait_ms, l[i].ts_wait_ms,
            (unsigned long long)l[i].native);
    for (size_t k = 0; k < l[i].nstacks; k++) {
      if (k) fputc(',', fp);
      dnt__write_stack_json(fp, &l[i].stacks[k], 1);
    }
    fprintf(fp, "],\"otherStacks\":%llu}", (unsigned long long)l[i].other_stacks);
  }
  fprintf(fp, "],\"moreLocks\":%zu,\"stacks\":[", n - shown);
  for (size_t k = 0; k < ns; k++) {
    if (k) fputc(',', fp);
    dnt__write_stack_json(fp, &st[k], 1);
  }
  fputs("]}\n", fp);
}
