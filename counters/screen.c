/* The terminal of `counters monitor` (dnt-counters.h). */
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "dnt-counters.h"

#define ENTER "\033[?1049h\033[?25l\033[H\033[2J" /* alternate screen, cursor hidden, cleared */
#define LEAVE "\033[?25h\033[?1049l"

/* The one screen open, for the exit hook: a dnt_die or an exit() elsewhere must not leave the
 * user's terminal without echo on the alternate screen. */
static struct dnt_screen *open_screen;

static void write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void restore_terminal(struct dnt_screen *s) {
  if (!s->active) return;
  s->active = 0;
  write_all(s->out_fd, LEAVE, sizeof LEAVE - 1);
  if (s->raw) tcsetattr(s->in_fd, TCSAFLUSH, &s->saved);
}

static void at_exit(void) {
  if (open_screen) restore_terminal(open_screen);
}

static void read_size(struct dnt_screen *s) {
  struct winsize ws;
  if (ioctl(s->out_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    s->width = ws.ws_col;
    s->height = ws.ws_row;
  } else {
    s->width = 80;
    s->height = 24;
  }
}

static void on_keys(uv_poll_t *p, int status, int events) {
  struct dnt_screen *s = p->data;
  (void)events;
  char buf[64];
  ssize_t n = status < 0 ? 0 : read(s->in_fd, buf, sizeof buf);
  if (n <= 0) { /* no more input: the keys are gone, Ctrl+C still works */
    uv_poll_stop(p);
    return;
  }
  for (ssize_t i = 0; i < n; i++)
    if (s->on_key) s->on_key(s->ud, (unsigned char)buf[i]);
}

static void on_winch(uv_signal_t *h, int sig) {
  struct dnt_screen *s = h->data;
  (void)sig;
  read_size(s);
  if (s->on_resize) s->on_resize(s->ud);
}

int dnt_screen_open(struct dnt_screen *s, uv_loop_t *loop, int in_fd, int out_fd, dnt_screen_key_fn on_key,
                    dnt_screen_resize_fn on_resize, void *ud) {
  *s = (struct dnt_screen){.in_fd = in_fd, .out_fd = out_fd, .on_key = on_key, .on_resize = on_resize, .ud = ud};
  if (!isatty(out_fd)) return -1;
  read_size(s);
  if (isatty(in_fd) && tcgetattr(in_fd, &s->saved) == 0) {
    struct termios raw = s->saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG stays: Ctrl+C is still SIGINT */
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    s->raw = tcsetattr(in_fd, TCSAFLUSH, &raw) == 0;
    if (s->raw && uv_poll_init(loop, &s->keys, in_fd) == 0) {
      s->keys_active = 1;
      s->keys.data = s;
      uv_poll_start(&s->keys, UV_READABLE, on_keys);
    }
  }
  uv_signal_init(loop, &s->winch);
  s->winch.data = s;
  uv_signal_start(&s->winch, on_winch, SIGWINCH);
  s->active = 1;
  write_all(out_fd, ENTER, sizeof ENTER - 1);
  if (!open_screen) {
    static int hooked;
    if (!hooked) atexit(at_exit);
    hooked = 1;
  }
  open_screen = s;
  return 0;
}

void dnt_screen_close(struct dnt_screen *s) {
  if (!s->active) return;
  restore_terminal(s);
  if (s->keys_active) uv_close((uv_handle_t *)&s->keys, NULL);
  uv_close((uv_handle_t *)&s->winch, NULL);
  if (open_screen == s) open_screen = NULL;
}
