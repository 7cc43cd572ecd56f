// --mode gc: TraceEvent's own GC analysis of a trace (TraceLoadedDotNetRuntime.GC.GCs, the numbers
// PerfView's GCStats shows), one line per complete GC, for tests/runtime/test-gc.c to hold `dntrace gc`
// to. Invariant culture, space-separated:
//   gc NUMBER GENERATION TYPE REASON PAUSE_MS SUSPEND_MS HEAP_BEFORE_MB HEAP_AFTER_MB PROMOTED_MB
using System.Globalization;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Analysis;

static class GcStats
{
    public static string Print(string path)
    {
        using var source = new EventPipeEventSource(path);
        source.NeedLoadedDotNetRuntimes();
        source.Process();
        int gcs = 0;
        foreach (var process in source.Processes())
        {
            var runtime = process.LoadedDotNetRuntime();
            if (runtime == null) continue;
            foreach (var gc in runtime.GC.GCs)
            {
                if (!gc.IsComplete) continue;
                gcs++;
#pragma warning disable CS0618 // HeapSizeBeforeMB and friends are marked experimental
                Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
                    "gc {0} {1} {2} {3} {4:F4} {5:F4} {6:F4} {7:F4} {8:F4}", gc.Number, gc.Generation, gc.Type,
                    gc.Reason, gc.PauseDurationMSec, gc.SuspendDurationMSec, gc.HeapSizeBeforeMB, gc.HeapSizeAfterMB,
                    gc.PromotedMB));
#pragma warning restore CS0618
            }
        }
        return $"{gcs} complete GCs";
    }
}
