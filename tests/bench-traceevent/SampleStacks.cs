// --mode samplestacks FILE...: the oracle of the stack of every sample, for tests/cli/test-oracle-stacks.c.
// For each trace, "trace PATH", then one line per SampleProfiler event (and GC allocation event,
// which the computer counts as a sample of managed code) of the TraceLog, in the TraceLog's order:
//   s TID TIME_MS WEIGHT_MS LEAF<TAB>frame<TAB>frame...   ("a" for an allocation event)
// TIME_MS: the event's TimeStampRelativeMSec ("R", every digit). Frames: root to leaf, the
// thread's own stack as TraceEvent's stack source names it (TraceEventStackSource.GetFrameName),
// managed code only as dotnet-trace asks, an address no method covers as "0x..." after its module
// or "?" (ShowUnknownAddresses): the frames under the "Thread (TID)" pseudo-frame, leaving out
// that frame and the process's above it. WEIGHT_MS and LEAF: what SampleProfilerThreadTimeComputer
// (dotnet-trace convert's computer) made of the event: the Metric of the sample it emitted for
// it and that sample's extra leaf frame (CPU_TIME for a Managed sample, UNMANAGED_CODE_TIME for
// an External one). That sample is checked here to carry the event's own stack under its extra
// leaf, so the C test compares one stack per sample. A sample the computer did not weigh (a
// thread's last) is written "- LEAF", LEAF the one the computer gives its kind (the payload's
// Type: 2, Managed, is on CPU, anything else is not: ClrThreadSampleTraceData's rule).
// A .zip holds the trace as its one entry; a truncated trace is read with ContinueOnError, as
// dotnet-trace does.
using System.Globalization;
using Microsoft.Diagnostics.Symbols;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.Stacks;

static class SampleStacks
{
    public static int Run(IEnumerable<string> paths)
    {
        return OracleTrace.Each(paths, Print);
    }

    /* The frames of a stack source's sample below its "Thread (" frame, root first; null when it
     * has none (not a thread's sample). */
    static List<string>? ThreadFrames(StackSource src, StackSourceCallStackIndex s)
    {
        var leafFirst = new List<string>();
        for (; s != StackSourceCallStackIndex.Invalid; s = src.GetCallerIndex(s))
        {
            string name = src.GetFrameName(src.GetFrameIndex(s), false);
            if (name.StartsWith("Thread (", StringComparison.Ordinal))
            {
                leafFirst.Reverse();
                return leafFirst;
            }
            leafFirst.Add(name);
        }
        return null;
    }

    static long ThreadId(StackSource src, StackSourceCallStackIndex s)
    {
        for (; s != StackSourceCallStackIndex.Invalid; s = src.GetCallerIndex(s))
        {
            string name = src.GetFrameName(src.GetFrameIndex(s), false);
            if (!name.StartsWith("Thread (", StringComparison.Ordinal)) continue;
            int end = name.IndexOf(')');
            return long.Parse(name.AsSpan(8, end - 8), CultureInfo.InvariantCulture);
        }
        return -1;
    }

    static void Print(string path)
    {
        string tmp = Path.Combine(Path.GetTempPath(), $"oracle-te-stacks-{Environment.ProcessId}");
        Directory.CreateDirectory(tmp);
        try
        {
            string etlx = OracleTrace.Etlx(path, tmp);
            using var symbols = new SymbolReader(TextWriter.Null, "");
            using var log = new TraceLog(etlx);
            /* the events the computer counts as samples: the sampler's and the GC's allocation
             * events (GCAllocationTick, GCSampledObjectAllocationHigh/Low), on-CPU on their own
             * stacks (a trace with the task library's or the thread pool's activities would move
             * samples between threads: dntrace does not stitch yet, issue 27) */
            var events = log.Events.Filter(e => e.ProviderGuid == OracleTrace.SamplerGuid || OracleTrace.IsAllocation(e));

            /* the computer's samples, by (thread, time): their weight and extra leaf */
            var computed = new Dictionary<(long, double), (float metric, string leaf, List<string> frames)>();
            var stacks = new MutableTraceEventStackSource(log)
            {
                OnlyManagedCodeStacks = true,
                ShowUnknownAddresses = true,
            };
            var computer = new SampleProfilerThreadTimeComputer(log, symbols) { IncludeEventSourceEvents = false };
            computer.GenerateThreadTimeStacks(stacks, events);
            stacks.ForEach(sample =>
            {
                var frames = ThreadFrames(stacks, sample.StackIndex);
                if (frames == null || frames.Count == 0) return;
                string leaf = frames[^1];
                frames.RemoveAt(frames.Count - 1);
                long tid = ThreadId(stacks, sample.StackIndex);
                computed[(tid, sample.TimeRelativeMSec)] = (sample.Metric, leaf, frames);
            });

            /* each event's kind, by (thread, time) */
            var onCpu = new Dictionary<(long, double), bool>();
            var allocation = new HashSet<(long, double)>();
            foreach (TraceEvent e in events)
            {
                byte[] payload = e.EventData();
                bool managed = OracleTrace.IsAllocation(e) || (payload.Length >= 4 && BitConverter.ToInt32(payload, 0) == 2);
                onCpu[(e.ThreadID, e.TimeStampRelativeMSec)] = managed;
                if (OracleTrace.IsAllocation(e)) allocation.Add((e.ThreadID, e.TimeStampRelativeMSec));
            }

            /* every event, its stack named by the same stack source code (one sample per event) */
            var raw = new TraceEventStackSource(events) { OnlyManagedCodeStacks = true, ShowUnknownAddresses = true };
            raw.ForEach(sample =>
            {
                long tid = ThreadId(raw, sample.StackIndex);
                var frames = ThreadFrames(raw, sample.StackIndex) ?? new List<string>();
                string weight = "-", leaf = onCpu[(tid, sample.TimeRelativeMSec)] ? "CPU_TIME" : "UNMANAGED_CODE_TIME";
                if (computed.TryGetValue((tid, sample.TimeRelativeMSec), out var c))
                {
                    if (!c.frames.SequenceEqual(frames))
                        throw new InvalidOperationException(
                            $"thread {tid} at {sample.TimeRelativeMSec:R} ms: the computer's stack is not the event's");
                    if (c.leaf != leaf)
                        throw new InvalidOperationException(
                            $"thread {tid} at {sample.TimeRelativeMSec:R} ms: the computer's leaf {c.leaf} " +
                            "is not its kind's");
                    weight = c.metric.ToString("R", CultureInfo.InvariantCulture);
                }
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
                    $"{(allocation.Contains((tid, sample.TimeRelativeMSec)) ? "a" : "s")} {tid} {sample.TimeRelativeMSec:R} {weight} {leaf}\t{string.Join('\t', frames)}"));
            });
        }
        finally
        {
            Directory.Delete(tmp, true);
        }
    }
}
