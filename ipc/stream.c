/* A request whose reply is followed by a stream of unknown length, on the caller's libuv loop:
 * CollectTracing's nettrace stream. Bytes are handed to the caller as libuv reads them, so
 * memory stays constant however long the session runs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "dsipc-int.h"

struct dsipc_stream {
  uv_pipe_t pipe;
  uv_timer_t timer, retry; /* the reply's deadline; the next connect attempt */
  char *path;              /* while connecting again after a refusal */
  int attempts;
  uv_connect_t connect_req;
  uv_write_t write_req;
  dsipc_buf req;
  dsipc_framer framer;
  dsipc_stream_cb cb;
  void *ud;
  int dirfd;
  int replied, ended, closing, open_handles;
  uint64_t timeout_ms;
  dsipc_status st;
  char what[256];
  uint8_t readbuf[64 * 1024];
};

static void end(dsipc_stream *s, int code) {
  if (s->ended || s->closing) return;
  s->ended = 1;
  s->st.code = code;
  uv_read_stop((uv_stream_t *)&s->pipe);
  uv_timer_stop(&s->timer);
  uv_timer_stop(&s->retry);
  if (!s->replied && s->cb.on_reply) {
    s->replied = 1;
    s->cb.on_reply(s->ud, &s->st, NULL, 0);
  }
  if (!s->closing && s->cb.on_end) s->cb.on_end(s->ud, &s->st);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  dsipc_stream *s = h->data;
  (void)suggested;
  *buf = uv_buf_init((char *)s->readbuf, sizeof s->readbuf);
}

static void on_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf) {
  dsipc_stream *s = h->data;
  if (s->ended || s->closing) return;
  if (nread < 0) {
    if (nread == UV_EOF && s->replied) {
      dsipc__ok(&s->st);
      end(s, 0);
    } else if (nread == UV_EOF) {
      end(s, dsipc__fail(&s->st, DSIPC_ECLOSED, 0, "'%s' closed the connection before replying", s->what));
    } else {
      end(s, dsipc__fail(&s->st, -ECONNRESET, 0, "reading from '%s': %s", s->what, uv_strerror((int)nread)));
    }
    return;
  }
  const uint8_t *p = (const uint8_t *)buf->base;
  size_t n = (size_t)nread;
  if (!s->replied) {
    long used = dsipc_framer_feed(&s->framer, p, n);
    if (used < 0) {
      end(s, dsipc__fail(&s->st, (int)used, 0, "bad reply from '%s': %s", s->what, dsipc_strerror((int)used)));
      return;
    }
    p += used;
    n -= (size_t)used;
    if (!s->framer.complete) return;
    uv_timer_stop(&s->timer); /* the deadline covers the reply, not the session */
    s->replied = 1;
    const uint8_t *payload = s->framer.buf + DSIPC_HEADER_SIZE;
    size_t plen = s->framer.header.size - DSIPC_HEADER_SIZE;
    int rc = dsipc_decode_reply(&s->framer.header, payload, plen, &s->st);
    if (s->cb.on_reply) s->cb.on_reply(s->ud, &s->st, payload, plen);
    if (rc) {
      end(s, rc);
      return;
    }
    if (s->closing) return;
  }
  if (n && s->cb.on_data) s->cb.on_data(s->ud, p, n);
}

static void on_write(uv_write_t *w, int status) {
  dsipc_stream *s = w->data;
  if (status < 0 && !s->ended && !s->closing)
    end(s, dsipc__fail(&s->st, -EPIPE, 0, "cannot send the request to '%s': %s", s->what, uv_strerror(status)));
}

static void start_exchange(dsipc_stream *s) {
  uv_buf_t b = uv_buf_init((char *)s->req.data, (unsigned)s->req.len);
  s->write_req.data = s;
  int rc = uv_write(&s->write_req, (uv_stream_t *)&s->pipe, &b, 1, on_write);
  if (!rc) rc = uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);
  if (rc) end(s, dsipc__fail(&s->st, -EPIPE, 0, "cannot talk to '%s': %s", s->what, uv_strerror(rc)));
}

/* A runtime's listener refused for a moment: the next attempt after a pause on the loop (never
 * a sleep: the caller's loop has other work). */
static void on_retry(uv_timer_t *t) {
  dsipc_stream *s = t->data;
  if (s->ended || s->closing) return;
  int fd;
  int rc = dsipc__connect_tries(s->path, &fd, &s->st, 1);
  if (rc == -ECONNREFUSED && ++s->attempts < DSIPC__CONNECT_TRIES) {
    uv_timer_start(&s->retry, on_retry, dsipc__connect_pause_ms(s->attempts), 0);
    return;
  }
  if (rc) {
    end(s, rc);
    return;
  }
  if ((rc = uv_pipe_open(&s->pipe, fd)) != 0) {
    close(fd);
    end(s, dsipc__fail(&s->st, -EBADF, 0, "cannot use the runtime's connection: %s", uv_strerror(rc)));
    return;
  }
  start_exchange(s);
}

static void on_timeout(uv_timer_t *t) {
  dsipc_stream *s = t->data;
  end(s, dsipc__fail(&s->st, DSIPC_ETIMEDOUT, 0, "no reply from '%s' within %llu ms", s->what,
                     (unsigned long long)s->timeout_ms));
}

static void on_closed(uv_handle_t *h) {
  dsipc_stream *s = h->data;
  if (--s->open_handles > 0) return;
  if (s->dirfd >= 0) close(s->dirfd);
  dsipc__free(s->path);
  dsipc_framer_release(&s->framer);
  dsipc_buf_release(&s->req);
  dsipc__free(s);
}

int dsipc_stream_open(struct uv_loop_s *loop, const char *path, int fd, const dsipc_buf *req,
                      uint64_t reply_timeout_ms, const dsipc_stream_cb *cb, void *ud, dsipc_stream **out,
                      dsipc_status *st) {
  *out = NULL;
  dsipc_stream *s = dsipc__calloc(1, sizeof *s);
  if (!s) {
    if (fd >= 0) close(fd);
    return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  }
  s->dirfd = -1;
  s->cb = *cb;
  s->ud = ud;
  s->timeout_ms = reply_timeout_ms;
  dsipc_framer_init(&s->framer);
  dsipc_buf_init(&s->req);
  snprintf(s->what, sizeof s->what, "%s", path ? path : "the runtime's connection");
  int rc = 0, refused = 0;
  if (fd < 0 && (rc = dsipc__connect_tries(path, &fd, st, 1)) != 0) {
    if (rc != -ECONNREFUSED || !(s->path = dsipc__strdup(path))) {
      dsipc__free(s);
      return rc;
    }
    refused = 1; /* tried again from the loop (on_retry) */
  }
  s->req.data = dsipc__malloc(req->len);
  if (!s->req.data) {
    if (s->dirfd >= 0) close(s->dirfd);
    if (fd >= 0) close(fd);
    dsipc__free(s->path);
    dsipc__free(s);
    return dsipc__fail(st, DSIPC_ENOMEM, 0, "out of memory");
  }
  memcpy(s->req.data, req->data, req->len);
  s->req.len = s->req.cap = req->len;

  uv_pipe_init((uv_loop_t *)loop, &s->pipe, 0);
  uv_timer_init((uv_loop_t *)loop, &s->timer);
  uv_timer_init((uv_loop_t *)loop, &s->retry);
  s->pipe.data = s->timer.data = s->retry.data = s->connect_req.data = s;
  s->open_handles = 3;
  /* the loop's clock is as old as its last turn: the deadline counts from now, not from then */
  uv_update_time((uv_loop_t *)loop);
  uv_timer_start(&s->timer, on_timeout, reply_timeout_ms, 0);
  if (refused) {
    s->attempts = 1;
    uv_timer_start(&s->retry, on_retry, dsipc__connect_pause_ms(1), 0);
  } else {
    rc = uv_pipe_open(&s->pipe, fd);
    if (rc) {
      close(fd);
      dsipc__fail(st, -EBADF, 0, "cannot use the runtime's connection: %s", uv_strerror(rc));
      s->closing = 1;
      uv_close((uv_handle_t *)&s->pipe, on_closed);
      uv_close((uv_handle_t *)&s->timer, on_closed);
      uv_close((uv_handle_t *)&s->retry, on_closed);
      return -EBADF;
    }
    start_exchange(s);
  }
  dsipc__ok(st);
  *out = s;
  return 0;
}

void dsipc_stream_close(dsipc_stream *s) {
  if (!s || s->closing) return;
  s->closing = 1;
  uv_read_stop((uv_stream_t *)&s->pipe);
  uv_timer_stop(&s->timer);
  uv_close((uv_handle_t *)&s->pipe, on_closed);
  uv_close((uv_handle_t *)&s->timer, on_closed);
  uv_close((uv_handle_t *)&s->retry, on_closed);
}
