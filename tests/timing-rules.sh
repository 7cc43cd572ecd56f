#!/bin/sh
# No wall-clock bound decides a test (issue 23): the Criterion tests assert what dntrace did, and
# wait for the thing itself under a ceiling only a hang reaches. This reads the tests' sources and
# fails on
#   clock:   a clock read (clock_gettime, gettimeofday, time(NULL), clock(), the helpers now_ms,
#            dnt_now_ms, ms_since, a run's .seconds, a scraper's .max_ms) with no `timing:` comment
#            on its line or the line above saying why it may (a ceiling, a lower bound, a figure
#            that is printed and not asserted);
#   bound:   an assertion that holds a time-named value (took, elapsed, secs, seconds, *_ms, ms,
#            latency, gap) under a bound below 30 s (30000 when the name says ms), unless a
#            `timing:` comment says why it is not the machine's clock (a trace's own timestamps);
#   timeout: a Criterion .timeout below 60 s.
# TAP output: first that it catches each of those in a planted file, then one line per source.
#
#   tests/timing-rules.sh [SRCDIR]     (default: $DNT_SRCDIR, else .)

srcdir=${1:-${DNT_SRCDIR:-.}}

python3 - "$srcdir" <<'EOF'
import os, re, sys, tempfile

srcdir = sys.argv[1]

RAW_CLOCK = r'\bclock_gettime\s*\(|\bgettimeofday\s*\(|\btime\s*\(\s*(NULL|0)?\s*\)|\bclock\s*\(\s*\)'
# in the tests themselves the helpers' clocks count too; tests/lib's waits use them under
# dnt_ceiling_ms (run.h), so there only the raw reads (the helpers' own) need their comment
HELPER_CLOCK = r'|\b(dnt_)?now_ms\s*\(|\bms_since\s*\('
CLOCK_IN_TESTS = re.compile(RAW_CLOCK + HELPER_CLOCK)
CLOCK_IN_LIB = re.compile(RAW_CLOCK)
# a run's wall time (dnt_run's .seconds) or a scraper's slowest answer: a clock too, unless it is
# only printed (an argument after the message's format string); seconds[i] is a row of seconds
MEASURED = re.compile(r'(\.|->)(seconds|max_ms)\b(?!\s*\[)')

def measured_clock(code):
    fmt = code.find('""')
    return any(fmt < 0 or m.start() < fmt for m in MEASURED.finditer(code))
TIMEOUT = re.compile(r'\.timeout\s*=\s*([0-9.]+)')
ASSERT_START = re.compile(r'\bcr_(assert|expect)\w*\s*\(')
TIME_NAME = r'[A-Za-z_][\w.>-]*'
# a name is about time when one of its words is one of these
TIME_WORDS = {'took', 'elapsed', 'secs', 'sec', 'seconds', 'ms', 'latency', 'gap', 'wall'}
NUM = r'([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)'

def words(name):
    return set(w for w in re.split(r'[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])', name) if w)

def is_time_name(name):
    return bool(words(name.lower()) & TIME_WORDS)

def in_ms(name):
    return 'ms' in words(name.lower())

def too_tight(name, bound):
    return float(bound) < (30000 if in_ms(name) else 30)

def statements(lines, start):
    """The assertion starting at line index start, joined up to its closing parenthesis."""
    text, depth, i = '', 0, start
    while i < len(lines) and i < start + 12:
        text += lines[i] + ' '
        depth = text.count('(') - text.count(')')
        if depth <= 0 and '(' in text:
            break
        i += 1
    return text

def upper_bounds(stmt):
    """(name, bound) of each `name < N`, `name <= N`, `N > name`, `N >= name`, cr_*_lt/leq(name, N)."""
    found = []
    for m in re.finditer(r'(' + TIME_NAME + r')\s*<=?\s*' + NUM + r'\b', stmt):
        found.append((m.group(1), m.group(2)))
    for m in re.finditer(NUM + r'\s*>=?\s*(' + TIME_NAME + r')', stmt):
        found.append((m.group(2), m.group(1)))
    m = re.match(r'\s*cr_(?:assert|expect)_(?:lt|leq)\s*\(\s*(' + TIME_NAME + r')\s*,\s*' + NUM + r'\s*[,)]', stmt)
    if m:
        found.append((m.group(1), m.group(2)))
    return [(n, b) for n, b in found if is_time_name(n) and too_tight(n, b)]

def marked(lines, i):
    return 'timing:' in lines[i] or (i > 0 and 'timing:' in lines[i - 1])

def findings(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = f.read().split('\n')
    except OSError as e:
        return ['cannot read: %s' % e]
    out = []
    clock = CLOCK_IN_LIB if os.sep + 'lib' + os.sep in path else CLOCK_IN_TESTS
    for i, line in enumerate(lines):
        if re.match(r'\s*(\*|/\*|//)', line):
            continue  # a comment's line
        # string literals and // comments are not code ("pause.time.seconds" is a name)
        code = re.sub(r'"(\\.|[^"\\])*"', '""', line).split('//')[0]
        in_tests = clock is CLOCK_IN_TESTS
        if (clock.search(code) or (in_tests and measured_clock(code))) and not marked(lines, i):
            out.append('%s:%d: clock read with no `timing:` comment saying why: %s' % (path, i + 1, line.strip()))
        for m in TIMEOUT.finditer(code):
            if float(m.group(1)) < 60:
                out.append('%s:%d: Criterion .timeout = %s (a ceiling under 60 s)' % (path, i + 1, m.group(1)))
        if ASSERT_START.search(code) and not marked(lines, i):
            for name, bound in upper_bounds(statements(lines, i)):
                out.append('%s:%d: %s held under %s: a wall-clock bound under 30 s decides this test'
                           % (path, i + 1, name, bound))
    return out

def sources(top):
    for sub in ('tests/cli', 'tests/unit', 'tests/runtime', 'tests/lib'):
        for root, dirs, files in os.walk(os.path.join(top, sub)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(('.c', '.h')):
                    yield os.path.join(root, f)

files = list(sources(srcdir))
print('1..%d' % (3 + len(files)))

# the rules catch what they are for, in a planted source
planted = {
    'clock': 'static void f(void) {\n  struct timespec ts;\n  clock_gettime(CLOCK_MONOTONIC, &ts);\n}\n',
    'bound': 'Test(s, t) {\n  double took_ms = run();\n  cr_expect_lt(took_ms, 500, "fast enough");\n'
             '  cr_assert(r.seconds >= 1 &&\n            r.seconds < 15, "stops");\n}\n',
    'timeout': 'Test(s, t, .timeout = 30) {\n}\n',
}
with tempfile.TemporaryDirectory() as tmp:
    for n, (rule, text) in enumerate(planted.items(), 1):
        p = os.path.join(tmp, rule + '.c')
        with open(p, 'w') as f:
            f.write(text)
        got = findings(p)
        want = {'clock': 1, 'bound': 2 + 2, 'timeout': 1}[rule]
        # bound: took_ms < 500 and r.seconds < 15 as bounds, and the two .seconds reads as clocks
        if len(got) == want:
            print('ok %d - a planted %s rule breach is caught (%d findings)' % (n, rule, len(got)))
        else:
            print('not ok %d - the planted %s breach gave %d findings, not %d' % (n, rule, len(got), want))
            for g in got:
                print('# ' + g)

failed = 0
for n, path in enumerate(files, 4):
    got = findings(path)
    rel = os.path.relpath(path, srcdir)
    if got:
        failed += 1
        print('not ok %d - %s' % (n, rel))
        for g in got:
            print('# ' + os.path.relpath(g.split(':', 1)[0], srcdir) + ':' + g.split(':', 1)[1])
    else:
        print('ok %d - %s: no unexplained clock, no bound under 30 s, no timeout under 60 s' % (n, rel))
EOF
