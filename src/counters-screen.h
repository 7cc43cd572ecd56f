/* The terminal of `counters monitor`: the alternate screen (the user's scrollback is left as it
 * was), keys read one at a time without echo (Ctrl+C still raises SIGINT), the size followed
 * through SIGWINCH. Everything is restored on close, and at exit if the program dies first. */
#ifndef DNT_COUNTERS_SCREEN_H
#define DNT_COUNTERS_SCREEN_H

#include <termios.h>
#include <uv.h>

typedef void (*dnt_screen_key_fn)(void *ud, int key);
typedef void (*dnt_screen_resize_fn)(void *ud);

/* Caller-provided storage. */
struct dnt_screen {
  int active, keys_active, raw;
  int in_fd, out_fd;
  struct termios saved;
  int width, height;
  uv_poll_t keys;
  uv_signal_t winch;
  dnt_screen_key_fn on_key;
  dnt_screen_resize_fn on_resize;
  void *ud;
};

/* Enters the alternate screen on out_fd and reads keys from in_fd (when it is a terminal) on
 * loop. Returns 0, or -1 when out_fd is not a terminal (nothing changed). */
int dnt_screen_open(struct dnt_screen *s, uv_loop_t *loop, int in_fd, int out_fd, dnt_screen_key_fn on_key,
                    dnt_screen_resize_fn on_resize, void *ud);

/* Leaves the alternate screen, shows the cursor, restores the terminal mode and closes the
 * handles (their close completes on the loop's next turn). Twice is harmless. */
void dnt_screen_close(struct dnt_screen *s);

#endif
