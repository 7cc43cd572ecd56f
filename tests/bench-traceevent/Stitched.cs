// --mode stitched FILE...: the oracle of dntrace's async stacks, for tests/cli/test-oracle-stacks.c.
// What `dotnet-trace convert` files under each thread: the TraceLog, a stack source of managed
// frames only, SampleProfilerThreadTimeComputer over every event without EventSource events (its
// activity computer stitching a task's samples under the stack that made it, on that stack's
// thread, and adding AWAIT_TIME samples). For each trace, "trace PATH", then one line per distinct
// (thread, stack) of the computer's samples, in no particular order, after a line "activities N
// threads T" (N the events the activity computer makes or starts activities with, T the threads
// with events the computer logs as samples):
//   k TID COUNT MS<TAB>frame<TAB>frame...<TAB>LEAF
// TID: the thread of the stack's "Thread (TID)" frame (the one it is filed under); COUNT the
// samples, MS the sum of their Metrics; the frames root to leaf under that frame, as
// TraceEventStackSource names them with unknown addresses shown (as --mode samplestacks), LEAF
// the computer's pseudo-frame (CPU_TIME, UNMANAGED_CODE_TIME, AWAIT_TIME). Samples without a
// thread frame (none on EventPipe traces) are left out, as the speedscope writer leaves them.
using System.Globalization;
using Microsoft.Diagnostics.Symbols;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.Stacks;

static class Stitched
{
    public static int Run(IEnumerable<string> paths)
    {
        return OracleTrace.Each(paths, Print);
    }

    static void Print(string path)
    {
        string tmp = Path.Combine(Path.GetTempPath(), $"oracle-te-stitched-{Environment.ProcessId}");
        Directory.CreateDirectory(tmp);
        try
        {
            string etlx = OracleTrace.Etlx(path, tmp);
            using var symbols = new SymbolReader(TextWriter.Null, "");
            using var log = new TraceLog(etlx);
            var stacks = new MutableTraceEventStackSource(log) { OnlyManagedCodeStacks = true, ShowUnknownAddresses = true };
            var computer = new SampleProfilerThreadTimeComputer(log, symbols) { IncludeEventSourceEvents = false };
            computer.GenerateThreadTimeStacks(stacks);
            /* the threads whose events the computer logs as samples (the sampler's, the GC's
             * allocation events, the task library's scheduling, starts and waits): each one's
             * last is weighed by no later one, so it is not emitted */
            var logging = new HashSet<int>();
            long activities = 0;
            foreach (TraceEvent e in log.Events)
            {
                if (OracleTrace.IsLogged(e)) logging.Add(e.ThreadID);
                if (OracleTrace.IsActivity(e)) activities++;
            }
            Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"activities {activities} threads {logging.Count}"));
            var sums = new Dictionary<string, (long count, double ms)>();
            stacks.ForEach(sample =>
            {
                var leafFirst = new List<string>();
                for (var s = sample.StackIndex; s != StackSourceCallStackIndex.Invalid; s = stacks.GetCallerIndex(s))
                {
                    string name = stacks.GetFrameName(stacks.GetFrameIndex(s), false);
                    if (!name.StartsWith("Thread (", StringComparison.Ordinal))
                    {
                        leafFirst.Add(name);
                        continue;
                    }
                    int end = name.IndexOf(')');
                    leafFirst.Reverse();
                    string key = name.Substring(8, end - 8) + "\t" + string.Join("\t", leafFirst);
                    sums.TryGetValue(key, out var t);
                    sums[key] = (t.count + 1, t.ms + sample.Metric);
                    return;
                }
            });
            foreach (var (key, t) in sums)
            {
                int tab = key.IndexOf('\t');
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
                    $"k {key.Substring(0, tab)} {t.count} {t.ms:R}{key.Substring(tab)}"));
            }
        }
        finally
        {
            Directory.Delete(tmp, true);
        }
    }
}
