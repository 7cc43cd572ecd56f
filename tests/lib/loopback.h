/* HTTP on 127.0.0.1 for the tests of dntrace's servers (`counters serve`, `serve`): a free port,
 * one request with its whole answer read, and a scraper thread that times every /metrics. */
#ifndef DNT_TEST_LOOPBACK_H
#define DNT_TEST_LOOPBACK_H

/* CLOCK_MONOTONIC in ms. */
double dnt_now_ms(void);

/* A port nothing listens on now (the kernel's choice), or -1. */
int dnt_free_port(void);

/* A connection to 127.0.0.1:port, or -1. */
int dnt_connect_loopback(int port);

/* One request (METHOD PATH HTTP/1.1, Connection: close) to 127.0.0.1:port, waiting up to
 * timeout_s for each read: its status (0: no answer); when answer is not NULL, the whole answer
 * there (heap, NUL-terminated, headers included; the caller frees it; NULL without one). */
int dnt_http_request(int port, const char *method, const char *path, int timeout_s, char **answer);

/* A thread (dnt_scrape_loop) that GETs /metrics every every_ms until stop, timing each answer.
 * phase: what the test is doing, set by the test; slowest_in is the phase of the slowest scrape. */
struct dnt_scraper {
  int port, every_ms;
  volatile int stop;
  volatile const char *phase;
  const char *slowest_in;
  int scrapes, answered, unanswered, ok, unavailable; /* unavailable: 503 */
  double max_ms;
};
void *dnt_scrape_loop(void *scraper);

#endif
