#include <libxml/xmlwriter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph.h"
#include "util.h"

#define WIDTH 1200.0
#define FRAME_H 16
#define PAD_TOP 40
#define PAD_SIDE 10
#define MIN_WIDTH_PX 0.1 /* narrower frames are left out, as flamegraph.pl does */

/* The merged call tree: children share a name id per parent. */
struct node {
  uint32_t name;     /* function id, or UINT32_MAX for a "Thread N" level */
  uint64_t thread;
  uint64_t value;    /* samples at or under this node */
  struct node *child, *next;
};

struct builder {
  struct node root;
  size_t depth;
};

static struct node *child_of(struct node *parent, uint32_t name, uint64_t thread) {
  for (struct node *c = parent->child; c; c = c->next)
    if (c->name == name && c->thread == thread) return c;
  struct node *c = calloc(1, sizeof *c);
  if (!c) dnt_die(1, "out of memory");
  c->name = name;
  c->thread = thread;
  c->next = parent->child;
  parent->child = c;
  return c;
}

static void add_stack(void *ud, uint64_t thread, const uint32_t *frames, size_t n, uint64_t samples) {
  struct builder *b = ud;
  struct node *cur = &b->root;
  cur->value += samples;
  cur = child_of(cur, UINT32_MAX, thread);
  cur->value += samples;
  for (size_t i = 0; i < n; i++) {
    cur = child_of(cur, frames[i], 0);
    cur->value += samples;
  }
  if (n + 1 > b->depth) b->depth = n + 1;
}

static void free_tree(struct node *n) {
  struct node *c = n->child;
  while (c) {
    struct node *next = c->next;
    free_tree(c);
    free(c);
    c = next;
  }
}

/* Colours tell kinds of code apart, as flamegraph.pl's palettes do: managed code warm (red to
 * yellow), native code green, the kernel blue, time in native code that EventPipe cannot see
 * (UNMANAGED_CODE_TIME) grey, unnamed frames bright red. Within a kind, a shade from the module
 * name's hash, so one library's frames look alike. */
static void colour_of(const char *name, char *out, size_t cap) {
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

struct emit {
  xmlTextWriterPtr w;
  const struct dnt_profile *prof;
  uint64_t total;
  double ms;
  size_t depth;
  int failed;
};

static void emit_node(struct emit *e, const struct node *n, double x, size_t level) {
  double width = (WIDTH - 2 * PAD_SIDE) * (double)n->value / (double)e->total;
  if (width < MIN_WIDTH_PX) return;
  char label[1200], colour[32], num[64];
  if (n->name == UINT32_MAX)
    snprintf(label, sizeof label, "Thread %llu", (unsigned long long)n->thread);
  else
    snprintf(label, sizeof label, "%s", dnt_profile_name(e->prof, n->name));
  colour_of(label, colour, sizeof colour);
  double y = PAD_TOP + (double)(e->depth - level) * FRAME_H;
  xmlTextWriterPtr w = e->w;
  int rc = 0;
  rc |= xmlTextWriterStartElement(w, BAD_CAST "g") < 0;
  rc |= xmlTextWriterWriteAttribute(w, BAD_CAST "class", BAD_CAST "f") < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "data-x", "%.3f", x) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "data-w", "%.3f", width) < 0;
  rc |= xmlTextWriterWriteFormatAttribute(w, BAD_CAST "data-l", "%zu", level) < 0;
  snprintf(num, sizeof num, " (%llu samples, %.0f ms, %.2f%%)", (unsigned long long)n->value, (double)n->value * e->ms,
           100.0 * (double)n->value / (double)e->total);
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
  rc |= xmlTextWriterWriteString(w, BAD_CAST "") < 0; /* the script fits the label to the width */
  rc |= xmlTextWriterEndElement(w) < 0;
  rc |= xmlTextWriterEndElement(w) < 0;
  if (rc) e->failed = 1;
  double cx = x;
  for (const struct node *c = n->child; c; c = c->next) {
    emit_node(e, c, cx, level + 1);
    cx += (WIDTH - 2 * PAD_SIDE) * (double)c->value / (double)e->total;
  }
}

/* Zoom on click, reset on the background, search with Ctrl+F or the button, labels fitted to the
 * frames' widths. Kept small and dependency-free so the file works offline. */
static const char script[] =
    "var W=" "1180" ",X0=10,frames=[].slice.call(document.querySelectorAll('g.f'));\n"
    "function label(g,w){var t=g.querySelector('title').textContent;t=t.replace(/ \\(\\d+ samples.*$/,'');"
    "var n=Math.floor((w-6)/7);var s=n<3?'':(t.length<=n?t:t.slice(0,n-2)+'..');g.querySelector('text').textContent=s;}\n"
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
    "zoom(null);\n";

int dnt_flamegraph_write(const struct dnt_profile *prof, const char *title, const char *path) {
  struct builder b;
  memset(&b, 0, sizeof b);
  dnt_profile_each_stack(prof, add_stack, &b);
  int rc = -1;
  xmlTextWriterPtr w = xmlNewTextWriterFilename(path, 0);
  if (!w) {
    dnt_error("cannot write '%s'", path);
    goto out;
  }
  double height = PAD_TOP + (double)(b.depth + 1) * FRAME_H + 30;
  struct emit e = {w, prof, b.root.value, dnt_profile_sample_ms(prof), b.depth, 0};
  int bad = 0;
  bad |= xmlTextWriterStartDocument(w, NULL, "UTF-8", NULL) < 0;
  bad |= xmlTextWriterStartElement(w, BAD_CAST "svg") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "xmlns", BAD_CAST "http://www.w3.org/2000/svg") < 0;
  bad |= xmlTextWriterWriteAttribute(w, BAD_CAST "version", BAD_CAST "1.1") < 0;
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
  bad |= xmlTextWriterWriteFormatString(w, "%s: %llu samples of thread time", title,
                                        (unsigned long long)b.root.value) < 0;
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
  xmlFreeTextWriter(w);
  if (bad || e.failed) {
    dnt_error("cannot write '%s'", path);
    remove(path);
    goto out;
  }
  rc = 0;
out:
  free_tree(&b.root);
  return rc;
}
