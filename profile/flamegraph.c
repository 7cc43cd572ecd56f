#include <errno.h>
#include <fcntl.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlwriter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dnt-profile.h"
#include "dnt-trace.h"

#define WIDTH 1200.0
#define FRAME_H 16
#define PAD_TOP 40
#define PAD_SIDE 10
#define MIN_WIDTH_PX 0.1 /* narrower frames are left out, as flamegraph.pl does */

/* The merged call tree: children share a name id per parent. */
struct node {
  uint32_t name;     /* function id, or UINT32_MAX for a "Thread N" level */
  uint64_t thread;
  const char *tname;  /* a thread level: the threads' name (the profile's), NULL: one unnamed thread */
  uint64_t *tids;     /* the threads of that name drawn here, and how many */
  size_t ntids;
  uint64_t samples;  /* samples at or under this node */
  double value;      /* their weight: time (ms), or samples (dnt_profile_set_weight) */
  struct node *child, *next;
};

struct builder {
  const struct dnt_profile *prof;
  struct node root;
  size_t depth;
  int by_thread; /* a "Thread N" level under the root: one tower per thread */
  int by_time;   /* widths by time, else by samples */
  int oom;
  uint64_t samples; /* every sample, drawn or not: the title's count, as report's */
};

static struct node *child_of(struct node *parent, uint32_t name, uint64_t thread) {
  for (struct node *c = parent->child; c; c = c->next)
    if (c->name == name && c->thread == thread) return c;
  struct node *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->name = name;
  c->thread = thread;
  c->next = parent->child;
  parent->child = c;
  return c;
}

/* The thread level of thread: threads of one name share a tower (40 idle pool workers are one,
 * "×40"), an unnamed thread has its own. NULL when out of memory. */
static struct node *thread_node(struct builder *b, uint64_t thread) {
  const char *name = dnt_profile_thread_name(b->prof, thread);
  struct node *c = b->root.child;
  for (; c; c = c->next)
    if (name && *name ? c->tname && strcmp(c->tname, name) == 0 : !c->tname && c->thread == thread) break;
  if (!c) {
    if (!(c = calloc(1, sizeof *c))) return NULL;
    c->name = UINT32_MAX;
    c->thread = thread;
    c->tname = name && *name ? name : NULL;
    c->next = b->root.child;
    b->root.child = c;
  }
  for (size_t k = 0; k < c->ntids; k++)
    if (c->tids[k] == thread) return c;
  uint64_t *t = realloc(c->tids, (c->ntids + 1) * sizeof *t);
  if (!t) return NULL;
  c->tids = t;
  c->tids[c->ntids++] = thread;
  return c;
}

static void add_stack(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples, double ms) {
  struct builder *b = ud;
  struct node *cur = &b->root;
  double value = b->by_time ? ms : (double)samples;
  b->samples += samples;
  if (b->oom || value <= 0) return; /* no time (threads' last samples): nothing to draw */
  cur->samples += samples;
  cur->value += value;
  size_t i = 0;
  if (b->by_thread)
    cur = thread_node(b, thread);
  else if (n) /* merged across threads: the stacks' own roots under the root */
    cur = child_of(cur, frames[i++], 0);
  for (; cur; i++) {
    cur->samples += samples;
    cur->value += value;
    if (i == n) break;
    cur = child_of(cur, frames[i], 0);
  }
  if (!cur) {
    b->oom = 1;
    return;
  }
  if (n + (size_t)b->by_thread > b->depth) b->depth = n + (size_t)b->by_thread;
}

static void free_tree(struct node *n) {
  struct node *c = n->child;
  while (c) {
    struct node *next = c->next;
    free_tree(c);
    free(c->tids);
    free(c);
    c = next;
  }
}

/* Colours tell kinds of code apart, as flamegraph.pl's palettes do: managed code warm (red to
 * yellow), native code green, the kernel blue, time in native code that EventPipe cannot see
 * (UNMANAGED_CODE_TIME) grey, unnamed frames bright red. Within a kind, a shade from the module
 * name's hash, so one library's frames look alike. */
static void colour_of(const char *name, int thread_row, char *out, size_t cap) {
  if (thread_row) { /* a pseudo-frame: neutral, never mistaken for an unnamed frame */
    snprintf(out, cap, "rgb(205,205,220)");
    return;
  }
  if (strcmp(name, DNT_UNMANAGED_FRAME) == 0) {
    snprintf(out, cap, "rgb(180,180,180)");
    return;
  }
  int kind = dnt_frame_kind(name);
  if (kind == '?') {
    snprintf(out, cap, "rgb(230,60,60)");
    return;
  }
  const char *bang = strchr(name, '!');
  size_t len = bang ? (size_t)(bang - name) : strlen(name);
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)name[i]) * 16777619u;
  int a = (int)(h % 50), b = (int)((h >> 8) % 120), c = (int)((h >> 16) % 50);
  if (kind == 'K')
    snprintf(out, cap, "rgb(%d,%d,%d)", 90 + a, 140 + b / 3, 215 + c / 2);
  else if (kind == 'N')
    snprintf(out, cap, "rgb(%d,%d,%d)", 70 + a, 180 + b / 2, 70 + c);
  else
    snprintf(out, cap, "rgb(%d,%d,%d)", 205 + a, 80 + b, 40 + c);
}

/* What a label shows first when the frame is narrow: the method and its type, not the module and
 * namespace every frame starts with (`System.Private.CoreLib!System.Threading.Thread.StartCallback`
 * -> `Thread.StartCallback`, `libc.so.6!__futex_wait` -> `__futex_wait`), and not a symbol's
 * version (`pthread_cond_signal@@GLIBC_2.3.2` -> `pthread_cond_signal`, not `3.2`). Into out. */
static const char *short_name(const char *name, char *out, size_t cap) {
  const char *bang = strchr(name, '!');
  const char *s = bang ? bang + 1 : name;
  /* the last two dot-separated parts, dots inside <...> or (...) not counted */
  const char *cut[2] = {s, s}, *end = s + strlen(s);
  int depth = 0;
  for (const char *p = s; *p; p++) {
    if (*p == '<' || *p == '(' || *p == '[') depth++;
    else if ((*p == '>' || *p == ')' || *p == ']') && depth) depth--;
    else if (*p == '@' && !depth && p > s) { /* an ELF symbol's version: the name ends here */
      end = p;
      break;
    } else if (*p == '.' && !depth && p[1]) {
      cut[0] = cut[1];
      cut[1] = p + 1;
    }
  }
  snprintf(out, cap, "%.*s", (int)(end - cut[0]), cut[0]);
  return out;
}

/* Characters (not bytes) of UTF-8 text. */
static size_t chars_of(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

/* The label a frame w pixels wide shows, as the script's label() makes it on zoom (keep the two
 * alike): the whole name when it fits at 7 px a character, else the short one, else the short one
 * cut with "..", nothing under 3 characters. Written into the file, so that a viewer without
 * JavaScript (an <img>, a preview) shows the names too. */
static void fit_label(const char *whole, const char *shortn, double w, char *out, size_t cap) {
  long n = (long)((w - 6) / 7);
  out[0] = '\0';
  if (n < 3) return;
  if ((long)chars_of(whole) <= n) {
    snprintf(out, cap, "%s", whole);
    return;
  }
  if ((long)chars_of(shortn) <= n) {
    snprintf(out, cap, "%s", shortn);
    return;
  }
  size_t o = 0;
  long kept = 0;
  for (const char *p = shortn; *p && o + 8 < cap; p++) { /* n - 2 characters, then ".." */
    if (((unsigned char)*p & 0xC0) != 0x80 && kept++ == n - 2) break;
    out[o++] = *p;
  }
  memcpy(out + o, "..", 3);
}

struct emit {
  xmlTextWriterPtr w;
  const struct dnt_profile *prof;
  double total;
  size_t depth;
  int by_time;
  int failed;
  const char *unit; /* of the weights: "ms" or "bytes" */
};

static void emit_node(struct emit *e, const struct node *n, double x, size_t level) {
  if (!(e->total > 0)) return; /* nothing weighed: an empty graph */
  double width = (WIDTH - 2 * PAD_SIDE) * n->value / e->total;
  if (width < MIN_WIDTH_PX) return;
  char label[2400], colour[32], num[64];
  if (n->name == UINT32_MAX && n->tname && n->ntids > 1) {
    char safe[1024];
    dnt_text_escape(safe, sizeof safe, n->tname);
    snprintf(label, sizeof label, "%s \xc3\x97%zu", safe, n->ntids); /* "idle ×40" */
  } else if (n->name == UINT32_MAX && n->tname) {
    char safe[1024];
    dnt_text_escape(safe, sizeof safe, n->tname);
    snprintf(label, sizeof label, "%s (%llu)", safe, (unsigned long long)n->thread);
  } else if (n->name == UINT32_MAX)
    snprintf(label, sizeof label, "Thread %llu", (unsigned long long)n->thread);
  else
    dnt_text_escape(label, sizeof label, dnt_profile_name(e->prof, n->name)); /* XML has no controls */
  colour_of(label, n->name == UINT32_MAX, colour, sizeof colour);
  double y = PAD_TOP + (double)(e->depth - level) * FRAME_H;
  xmlTextWriterPtr w = e->w;
  int rc = 0;
  rc |= xmlTextWriterStartElement(w, BAD_CAST "g") < 0;
  rc |= xmlTextWriterWriteAttribute(w, BAD_CAST "class", BAD_CAST "f") < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "data-x", "%.3f", x) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "data-w", "%.3f", width) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "data-l", "%zu", level) < 0;
  char shown[sizeof label];
  rc |= xmlTextWriterWriteAttribute(w, BAD_CAST "data-s", BAD_CAST short_name(label, shown, sizeof shown)) < 0;
  if (e->by_time)
    snprintf(num, sizeof num, " (%llu samples, %.0f %s, %.2f%%)", (unsigned long long)n->samples, n->value,
             e->unit, 100.0 * n->value / e->total);
  else
    snprintf(num, sizeof num, " (%llu samples, %.2f%%)", (unsigned long long)n->samples, 100.0 * n->value / e->total);
  rc |= xmlTextWriterStartElement(w, BAD_CAST "title") < 0;
  rc |= xmlTextWriterWriteFormatString(w, "%s%s", label, num) < 0;
  rc |= xmlTextWriterEndElement(w) < 0;
  rc |= xmlTextWriterStartElement(w, BAD_CAST "rect") < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "x", "%.3f", x) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "y", "%.1f", y) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "width", "%.3f", width) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "height", "%d", FRAME_H - 1) < 0;
  rc |= xmlTextWriterWriteAttribute(w, BAD_CAST "fill", BAD_CAST colour) < 0;
  rc |= xmlTextWriterWriteAttribute(w, BAD_CAST "rx", BAD_CAST "2") < 0;
  rc |= xmlTextWriterEndElement(w) < 0;
  rc |= xmlTextWriterStartElement(w, BAD_CAST "text") < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "x", "%.3f", x + 3) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "y", "%.1f", y + FRAME_H - 4) < 0;
  char fitted[sizeof label];
  fit_label(label, shown, width, fitted, sizeof fitted);
  rc |= xmlTextWriterWriteString(w, BAD_CAST fitted) < 0; /* the script refits it on zoom */
  rc |= xmlTextWriterEndElement(w) < 0;
  rc |= xmlTextWriterEndElement(w) < 0;
  if (rc) e->failed = 1;
  double cx = x;
  for (const struct node *c = n->child; c; c = c->next) {
    emit_node(e, c, cx, level + 1);
    cx += (WIDTH - 2 * PAD_SIDE) * c->value / e->total;
  }
}

/* Zoom on click, reset on the background, search with Ctrl+F or the button, labels fitted to the
 * frames' widths. Kept small and dependency-free so the file works offline. */
static const char script[] =
    "var W=" "1180" ",X0=10,frames=[].slice.call(document.querySelectorAll('g.f'));\n"
    "function label(g,w){var t=g.querySelector('title').textContent;t=t.replace(/ \\(\\d+ samples.*$/,'');"
    "var n=Math.floor((w-6)/7),k=g.dataset.s||t;"
    "var s=n<3?'':(t.length<=n?t:k.length<=n?k:k.slice(0,n-2)+'..');g.querySelector('text').textContent=s;}\n"
    "function zoom(z){var zx=z?+z.dataset.x:X0,zw=z?+z.dataset.w:W,zl=z?+z.dataset.l:0;frames.forEach(function(g){"
    "var x=+g.dataset.x,w=+g.dataset.w,l=+g.dataset.l,r=g.querySelector('rect'),t=g.querySelector('text');"
    "var inside=x>=zx-1e-6&&x+w<=zx+zw+1e-6,above=z&&l<zl&&x<=zx+1e-6&&x+w>=zx+zw-1e-6;"
    "if(!z||inside||above){var nx=inside?X0+(x-zx)*W/zw:X0,nw=inside?w*W/zw:W;g.style.display='';"
    "r.setAttribute('x',nx);r.setAttribute('width',nw);t.setAttribute('x',nx+3);label(g,nw);}"
    "else g.style.display='none';});}\n"
    "function search(){var q=prompt('Search (a regular expression):');if(q===null)return;var re;try{re=new RegExp(q);}"
    "catch(e){alert(e);return;}var hit=0;frames.forEach(function(g){var m=q!==''&&re.test(g.querySelector('title').textContent);"
    "g.querySelector('rect').style.fill=m?'rgb(230,0,230)':'';if(m)hit++;});"
    "document.getElementById('matched').textContent=q===''?'':hit+' frames match '+q;}\n"
    "frames.forEach(function(g){g.addEventListener('click',function(ev){zoom(g);ev.stopPropagation();});});\n"
    "document.getElementById('reset').addEventListener('click',function(){zoom(null);});\n"
    "document.getElementById('search').addEventListener('click',search);\n"
    "window.addEventListener('keydown',function(e){if((e.ctrlKey||e.metaKey)&&e.key==='f'){e.preventDefault();search();}});\n"
    "zoom(null);\n"
    "window.scrollTo(0,document.documentElement.scrollHeight);\n"; /* the roots, at the bottom, in view */

/* The SVG's bytes go to our own descriptor, so a failed write keeps its errno (libxml2 would
 * only print it); its first failure is the one reported. */
struct sink {
  int fd;
  int own;   /* fd is ours to close */
  int err;   /* errno of the first failed write or close; 0 if none */
};

static int sink_write(void *ctx, const char *buf, int len) {
  struct sink *k = ctx;
  if (k->err) return -1;
  for (int done = 0; done < len;) {
    ssize_t n = write(k->fd, buf + done, (size_t)(len - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      k->err = n < 0 ? errno : EIO;
      return -1;
    }
    done += (int)n;
  }
  return len;
}

static int sink_close(void *ctx) {
  struct sink *k = ctx;
  if (k->own && k->fd >= 0 && close(k->fd) != 0 && !k->err) k->err = errno;
  k->fd = -1;
  return k->err ? -1 : 0;
}

/* libxml2 prints its I/O errors ("I/O error : No space left on device") through its generic
 * handler; while we write, they are ours to report, in one line. */
static void quiet(void *ctx, const char *fmt, ...) {
  (void)ctx;
  (void)fmt;
}

int dnt_flamegraph_write(const struct dnt_profile *prof, const struct dnt_flamegraph_opts *o, const char *path,
                         char *msg, size_t cap) {
  struct builder b;
  memset(&b, 0, sizeof b);
  b.prof = prof;
  b.by_thread = o->by_thread;
  b.by_time = dnt_profile_weight(prof) != DNT_WEIGHT_SAMPLES;
  const char *unit = dnt_profile_weight(prof) == DNT_WEIGHT_BYTES ? "bytes" : "ms";
  int rc = -1;
  struct sink sink = {-1, 0, 0};
  xmlGenericErrorFunc old_generic = xmlGenericError;
  void *old_generic_ctx = xmlGenericErrorContext;
  xmlStructuredErrorFunc old_structured = xmlStructuredError;
  void *old_structured_ctx = xmlStructuredErrorContext;
  if (dnt_profile_each_stack(prof, add_stack, &b) != 0 || b.oom) {
    snprintf(msg, cap, "out of memory building the flame graph");
    goto out;
  }
  int to_stdout = strcmp(path, "-") == 0;
  sink.fd = to_stdout ? STDOUT_FILENO : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  sink.own = !to_stdout;
  if (sink.fd < 0) {
    snprintf(msg, cap, "cannot write '%s': %s", path, strerror(errno));
    goto out;
  }
  struct stat st;
  int regular = !to_stdout && fstat(sink.fd, &st) == 0 && S_ISREG(st.st_mode);
  xmlSetGenericErrorFunc(NULL, quiet);
  xmlSetStructuredErrorFunc(NULL, NULL);
  xmlOutputBufferPtr ob = xmlOutputBufferCreateIO(sink_write, sink_close, &sink, NULL);
  xmlTextWriterPtr w = ob ? xmlNewTextWriter(ob) : NULL;
  if (!w) {
    if (ob) xmlOutputBufferClose(ob);
    else sink_close(&sink);
    snprintf(msg, cap, "out of memory writing '%s'", path);
    if (regular) unlink(path);
    goto out;
  }
  double height = PAD_TOP + (double)(b.depth + 1) * FRAME_H + 30;
  struct emit e = {w, prof, b.root.value, b.depth, b.by_time, 0, unit};
  int bad = 0;
  bad |= xmlTextWriterStartDocument(w, NULL, "UTF-8", NULL) < 0;
  bad |= xmlTextWriterStartElement(w, BAD_CAST "svg") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "xmlns", BAD_CAST "http://www.w3.org/2000/svg") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "version", BAD_CAST "1.1") < 0;
  /* drawn at its own size, a frame FRAME_H pixels high, as flamegraph.pl and inferno do: a deep
   * stack makes the page scroll rather than every label shrink to nothing in the window */
  bad |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "width", "%.0f", WIDTH) < 0;
  bad |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "height", "%.0f", height) < 0;
  bad |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "viewBox", "0 0 %.0f %.0f", WIDTH, height) < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "font-family", BAD_CAST "Verdana, sans-serif") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "font-size", BAD_CAST "12") < 0;
  bad |= xmlTextWriterStartElement(w, BAD_CAST "style") < 0;
  bad |= xmlTextWriterWriteString(w, BAD_CAST "g.f:hover rect{stroke:black;stroke-width:0.5} g.f{cursor:pointer} "
                                              "#reset,#search{cursor:pointer;fill:#336}") < 0;
  bad |= xmlTextWriterEndElement(w) < 0;
  bad |= xmlTextWriterStartElement(w, BAD_CAST "rect") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "width", BAD_CAST "100%") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "height", BAD_CAST "100%") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "fill", BAD_CAST "rgb(250,250,240)") < 0;
  bad |= xmlTextWriterEndElement(w) < 0;
  bad |= xmlTextWriterStartElement(w, BAD_CAST "text") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "x", BAD_CAST "600") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "y", BAD_CAST "20") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "text-anchor", BAD_CAST "middle") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "font-size", BAD_CAST "16") < 0;
  if (b.by_time)
    bad |= xmlTextWriterWriteFormatString(w, "%s: %s, %.0f %s in %llu samples%s", o->title,
                                          o->measure ? o->measure : "thread time", b.root.value, unit,
                                          (unsigned long long)b.samples, o->by_thread ? ", by thread" : "") < 0;
  else
    bad |= xmlTextWriterWriteFormatString(w, "%s: %s, %llu samples%s", o->title, o->measure ? o->measure : "thread time",
                                          (unsigned long long)b.samples, o->by_thread ? ", by thread" : "") < 0;
  bad |= xmlTextWriterEndElement(w) < 0;
  static const struct {
    const char *id, *x, *text;
  } buttons[] = {{"reset", "10", "Reset zoom"}, {"search", "1100", "Search"}};
  for (int i = 0; i < 2; i++) {
    bad |= xmlTextWriterStartElement(w, BAD_CAST "text") < 0;
    bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "id", BAD_CAST buttons[i].id) < 0;
    bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "x", BAD_CAST buttons[i].x) < 0;
    bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "y", BAD_CAST "20") < 0;
    bad |= xmlTextWriterWriteString(w, BAD_CAST buttons[i].text) < 0;
    bad |= xmlTextWriterEndElement(w) < 0;
  }
  bad |= xmlTextWriterStartElement(w, BAD_CAST "text") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "id", BAD_CAST "matched") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "x", BAD_CAST "10") < 0;
  bad |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "y", "%.0f", height - 10) < 0;
  bad |= xmlTextWriterWriteString(w, BAD_CAST "") < 0;
  bad |= xmlTextWriterEndElement(w) < 0;
  double x = PAD_SIDE;
  for (const struct node *c = b.root.child; c && !e.failed; c = c->next) {
    emit_node(&e, c, x, 1);
    x += (WIDTH - 2 * PAD_SIDE) * (double)c->value / (double)e.total;
  }
  bad |= xmlTextWriterStartElement(w, BAD_CAST "script") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "type", BAD_CAST "text/ecmascript") < 0;
  bad |= xmlTextWriterWriteCDATA(w, BAD_CAST script) < 0;
  bad |= xmlTextWriterEndElement(w) < 0;
  bad |= xmlTextWriterEndDocument(w) < 0;
  xmlFreeTextWriter(w); /* flushes, then closes the sink: a late ENOSPC lands in sink.err */
  if (bad || e.failed || sink.err) {
    if (sink.err)
      snprintf(msg, cap, "cannot write '%s': %s", path, strerror(sink.err));
    else
      snprintf(msg, cap, "cannot write '%s': the XML writer failed (out of memory?)", path);
    if (regular) unlink(path);
    goto out;
  }
  rc = 0;
out:
  xmlSetGenericErrorFunc(old_generic_ctx, old_generic);
  xmlSetStructuredErrorFunc(old_structured_ctx, old_structured);
  free_tree(&b.root);
  return rc;
}
