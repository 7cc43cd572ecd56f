/* `perf record` started without waiting (dnt-perf.h, dnt_perf_record_start_async): the blocking
 * start polls perf's ack fifo, which a command may do before its loop runs; an agent's loop
 * must go on answering, so here the ack fifo is watched by the loop, with a deadline. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "perf-int.h"

#define ACK_DEADLINE_MS 20000 /* as the blocking start: perf may be slow to set up on a busy machine */

/* The wait is over: its handles go (counted, see dnt__perf_record_closed). */
static void end_wait(struct dnt_perf_record *pr) {
  pr->waiting = 0;
  if (pr->polling) uv_close((uv_handle_t *)&pr->ack_poll, dnt__perf_record_closed);
  pr->polling = 0;
  uv_close((uv_handle_t *)&pr->ack_timer, dnt__perf_record_closed);
}

void dnt__perf_record_unwait(struct dnt_perf_record *pr, const char *why) {
  if (!pr->waiting) return;
  end_wait(pr);
  if (why != pr->msg) snprintf(pr->msg, sizeof pr->msg, "%s", why);
  dnt_perf_record_stop(pr);
  pr->on_started(pr->ud, -1);
}

static void on_ack(uv_poll_t *h, int status, int events) {
  struct dnt_perf_record *pr = h->data;
  (void)events;
  if (!pr->waiting) return;
  if (status < 0) {
    dnt__perf_record_unwait(pr, "cannot read perf's control fifo");
    return;
  }
  ssize_t n = read(pr->ack_fd, pr->ack + pr->ack_len, sizeof pr->ack - 1 - pr->ack_len);
  if (n <= 0) return; /* spurious (O_NONBLOCK), or nothing yet */
  pr->ack_len += (size_t)n;
  pr->ack[pr->ack_len] = '\0';
  if (strstr(pr->ack, "ack")) {
    end_wait(pr);
    pr->on_started(pr->ud, 0);
  } else if (pr->ack_len == sizeof pr->ack - 1) {
    dnt__perf_record_unwait(pr, "perf answered on its control fifo with something else than its ack");
  }
}

/* The deadline, or (at 0 ms, pr->msg set) a start that failed, said from the loop. */
static void on_deadline(uv_timer_t *h) {
  struct dnt_perf_record *pr = h->data;
  if (!pr->msg[0]) snprintf(pr->msg, sizeof pr->msg, "perf did not start recording within %d s", ACK_DEADLINE_MS / 1000);
  dnt__perf_record_unwait(pr, pr->msg);
}

void dnt_perf_record_start_async(struct dnt_perf_record *pr, uv_loop_t *loop, int pid, int hz, const char *out,
                                 void (*on_started)(void *ud, int rc), void (*on_closed)(void *ud), void *ud) {
  memset(pr, 0, sizeof *pr);
  pr->ctl_fd = pr->ack_fd = -1;
  pr->ud = ud;
  pr->on_started = on_started;
  pr->on_closed = on_closed;
  uv_timer_init(loop, &pr->ack_timer);
  pr->ack_timer.data = pr;
  pr->open_handles = 1;
  pr->waiting = 1;
  static const char enable[] = "enable\n";
  if (dnt__perf_record_spawn(pr, loop, pid, hz, 0, 1, out) != 0) {
    uv_timer_start(&pr->ack_timer, on_deadline, 0, 0); /* the failure, from the loop */
    return;
  }
  if (uv_poll_init(loop, &pr->ack_poll, pr->ack_fd) != 0) {
    snprintf(pr->msg, sizeof pr->msg, "cannot watch perf's control fifo");
    uv_timer_start(&pr->ack_timer, on_deadline, 0, 0);
    return;
  }
  pr->ack_poll.data = pr;
  pr->polling = 1;
  pr->open_handles++;
  if (write(pr->ctl_fd, enable, sizeof enable - 1) != (ssize_t)(sizeof enable - 1)) {
    snprintf(pr->msg, sizeof pr->msg, "cannot write perf's control fifo: %s", strerror(errno));
    uv_timer_start(&pr->ack_timer, on_deadline, 0, 0);
    return;
  }
  uv_poll_start(&pr->ack_poll, UV_READABLE, on_ack);
  uv_timer_start(&pr->ack_timer, on_deadline, ACK_DEADLINE_MS, 0);
}
