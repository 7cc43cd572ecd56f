/* The thread-pool analysis written out: a text report (the summary with starvation and blocking
 * called out, the adjustments, the pool per second) or one JSON object with the same data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-analyze.h"

/* The line a user looks for; "" when there was no starvation. Writes it with its newline. */
static void starvation_line(FILE *fp, const dnt_tp_summary *s) {
  if (!s->starvation) return;
  fprintf(fp, "thread pool starvation: %zu adjustment%s for Starvation, the thread goal grew from %u to %u over %.1f s "
              "(from %.3f s to %.3f s of the trace)\n",
          s->starvation, s->starvation == 1 ? "" : "s", s->starvation_from, s->starvation_to,
          (s->starvation_last_ms - s->starvation_first_ms) / 1000.0, s->starvation_first_ms / 1000.0,
          s->starvation_last_ms / 1000.0);
}

void dnt_tp_write_text(FILE *fp, const struct dnt_tp_analysis *a, size_t top) {
  const dnt_tp_summary *s = dnt_tp_get_summary(a);
  size_t n;
  const dnt_tp_adjustment *adj = dnt_tp_adjustments(a, &n);
  char buf[24];
  fprintf(fp, "Thread pool: %zu events in %.3f s of trace\n", s->events, s->trace_ms / 1000.0);
  starvation_line(fp, s);
  if (s->blocking)
    fprintf(fp, "blocked threads: %zu adjustment%s for CooperativeBlocking (threads added because work items block "
                "synchronously on other work)\n",
            s->blocking, s->blocking == 1 ? "" : "s");
  if (s->has_workers)
    fprintf(fp, "Worker threads: %u at first, %u at last, %u to %u (%zu started, %zu stopped, %zu waits)\n",
            s->workers_first, s->workers_last, s->workers_min, s->workers_max, s->worker_starts, s->worker_stops,
            s->worker_waits);
  else
    fprintf(fp, "Worker threads: no worker thread event\n");
  if (s->min_threads || s->max_threads)
    fprintf(fp, "Configured workers: min %u, max %u\n", s->min_threads, s->max_threads);
  if (s->has_io)
    fprintf(fp, "IO threads: up to %u (%zu created, %zu retired)\n", s->io_max, s->io_creates, s->io_retires);
  if (s->working_max) fprintf(fp, "Working threads: up to %u running work items\n", s->working_max);
  if (s->has_queue_length)
    fprintf(fp, "Queue: up to %.1f work items waiting, %.1f at last (System.Runtime's threadpool-queue-length)\n",
            s->queue_length_max, s->queue_length_last);
  if (s->has_completed)
    fprintf(fp, "Work items completed: %llu (threadpool-completed-items-count)\n", (unsigned long long)s->completed);
  if (s->enqueued || s->dequeued)
    fprintf(fp, "Work items: %llu enqueued, %llu dequeued\n", (unsigned long long)s->enqueued,
            (unsigned long long)s->dequeued);
  if (s->adjustments) {
    fprintf(fp, "Hill climbing: %zu adjustments, thread goal %u at first, %u at last, %u at most\n", s->adjustments,
            s->goal_first, s->goal_last, s->goal_max);
    for (uint32_t r = 0; r <= DNT_TP_REASONS; r++)
      if (s->by_reason[r])
        fprintf(fp, "  %-20s %zu\n", r < DNT_TP_REASONS ? dnt_tp_reason_name(r, buf) : "(other reasons)",
                s->by_reason[r]);
    size_t from = top < n ? n - top : 0;
    if (top) {
      fprintf(fp, "Adjustments%s:\n", from ? " (the last ones; --top for more)" : "");
      fprintf(fp, "  %10s %8s %-20s %14s\n", "At s", "Goal", "Reason", "Throughput/s");
      for (size_t i = from; i < n; i++)
        fprintf(fp, "  %10.3f %8u %-20s %14.1f\n", adj[i].ms / 1000.0, adj[i].new_count,
                dnt_tp_reason_name(adj[i].reason, buf), adj[i].throughput);
    }
  } else {
    fprintf(fp, "Hill climbing: no adjustment\n");
  }
  if (s->n_seconds) {
    /* columns only for what the trace recorded: the counter's, the verbose events' */
    int completed = s->has_completed, queued = s->enqueued || s->dequeued;
    fprintf(fp, "Per second:\n  %10s %8s %8s %8s %8s %10s", "At s", "Workers", "Most", "Goal", "IO", "Queue");
    if (completed) fprintf(fp, " %10s", "Completed");
    if (queued) fprintf(fp, " %10s %10s", "Enqueued", "Dequeued");
    fprintf(fp, " %6s\n", "Adj");
    for (size_t i = 0; i < s->n_seconds; i++) {
      const dnt_tp_second *c = &s->seconds[i];
      char queue[32];
      if (c->queue_length < 0)
        snprintf(queue, sizeof queue, "-");
      else
        snprintf(queue, sizeof queue, "%.1f", c->queue_length);
      fprintf(fp, "  %10.1f %8u %8u %8u %8u %10s", c->start_ms / 1000.0, c->workers, c->workers_max, c->goal,
              c->io_threads, queue);
      if (completed) fprintf(fp, " %10.0f", c->completed);
      if (queued) fprintf(fp, " %10llu %10llu", (unsigned long long)c->enqueued, (unsigned long long)c->dequeued);
      fprintf(fp, " %6u\n", c->adjustments);
    }
    if (!queued)
      fprintf(fp, "(no ThreadPoolEnqueue/Dequeue events in the trace: they are the ThreadPool keyword's at the "
                  "verbose level)\n");
  }
}

static void jnum(FILE *fp, double v) { fprintf(fp, "%.10g", isfinite(v) ? v : 0.0); }

void dnt_tp_write_json(FILE *fp, const struct dnt_tp_analysis *a, size_t top) {
  (void)top; /* JSON holds every adjustment */
  const dnt_tp_summary *s = dnt_tp_get_summary(a);
  size_t n;
  const dnt_tp_adjustment *adj = dnt_tp_adjustments(a, &n);
  char buf[24];
  fprintf(fp, "{\"summary\":{\"events\":%zu,\"traceMSec\":", s->events);
  jnum(fp, s->trace_ms);
  fprintf(fp, ",\"workerThreads\":");
  if (s->has_workers)
    fprintf(fp, "{\"first\":%u,\"last\":%u,\"min\":%u,\"max\":%u,\"starts\":%zu,\"stops\":%zu,\"waits\":%zu}",
            s->workers_first, s->workers_last, s->workers_min, s->workers_max, s->worker_starts, s->worker_stops,
            s->worker_waits);
  else
    fputs("null", fp);
  fprintf(fp, ",\"ioThreads\":");
  if (s->has_io)
    fprintf(fp, "{\"max\":%u,\"created\":%zu,\"retired\":%zu}", s->io_max, s->io_creates, s->io_retires);
  else
    fputs("null", fp);
  fprintf(fp, ",\"minWorkerThreads\":%u,\"maxWorkerThreads\":%u,\"workingThreadsMax\":%u,\"enqueued\":%llu,"
              "\"dequeued\":%llu,\"adjustments\":%zu,\"byReason\":{",
          s->min_threads, s->max_threads, s->working_max, (unsigned long long)s->enqueued,
          (unsigned long long)s->dequeued, s->adjustments);
  int first = 1;
  for (uint32_t r = 0; r <= DNT_TP_REASONS; r++) {
    if (!s->by_reason[r]) continue;
    fprintf(fp, "%s\"%s\":%zu", first ? "" : ",", r < DNT_TP_REASONS ? dnt_tp_reason_name(r, buf) : "other",
            s->by_reason[r]);
    first = 0;
  }
  fprintf(fp, "},\"goalFirst\":%u,\"goalLast\":%u,\"goalMax\":%u,\"starvation\":", s->goal_first, s->goal_last,
          s->goal_max);
  if (s->starvation) {
    fprintf(fp, "{\"adjustments\":%zu,\"threadsFrom\":%u,\"threadsTo\":%u,\"firstMSec\":", s->starvation,
            s->starvation_from, s->starvation_to);
    jnum(fp, s->starvation_first_ms);
    fputs(",\"lastMSec\":", fp);
    jnum(fp, s->starvation_last_ms);
    fputc('}', fp);
  } else {
    fputs("null", fp);
  }
  fprintf(fp, ",\"cooperativeBlocking\":%zu,\"queueLength\":", s->blocking);
  if (s->has_queue_length) {
    fputs("{\"max\":", fp);
    jnum(fp, s->queue_length_max);
    fputs(",\"last\":", fp);
    jnum(fp, s->queue_length_last);
    fputc('}', fp);
  } else {
    fputs("null", fp);
  }
  fputs(",\"completedItems\":", fp);
  if (s->has_completed)
    fprintf(fp, "%llu", (unsigned long long)s->completed);
  else
    fputs("null", fp);
  fputs("},\"adjustments\":[", fp);
  for (size_t i = 0; i < n; i++) {
    fprintf(fp, "%s{\"atMSec\":", i ? "," : "");
    jnum(fp, adj[i].ms);
    fprintf(fp, ",\"newWorkerThreadCount\":%u,\"reason\":", adj[i].new_count);
    dnt_json_string(fp, dnt_tp_reason_name(adj[i].reason, buf));
    fputs(",\"averageThroughput\":", fp);
    jnum(fp, adj[i].throughput);
    fputc('}', fp);
  }
  fputs("],\"seconds\":[", fp);
  for (size_t i = 0; i < s->n_seconds; i++) {
    const dnt_tp_second *c = &s->seconds[i];
    fprintf(fp, "%s{\"startMSec\":", i ? "," : "");
    jnum(fp, c->start_ms);
    fprintf(fp, ",\"workers\":%u,\"workersMax\":%u,\"goal\":%u,\"ioThreads\":%u,\"enqueued\":%llu,\"dequeued\":%llu,"
                "\"adjustments\":%u,\"completed\":%.3f,\"queueLength\":",
            c->workers, c->workers_max, c->goal, c->io_threads, (unsigned long long)c->enqueued,
            (unsigned long long)c->dequeued, c->adjustments, c->completed);
    if (c->queue_length < 0)
      fputs("null", fp);
    else
      jnum(fp, c->queue_length);
    fputc('}', fp);
  }
  fputs("]}\n", fp);
}
