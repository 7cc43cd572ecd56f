// --mode exclocks: TraceEvent's own decoding of a trace's exception and contention events, for
// tests/runtime/test-exceptions.c and tests/runtime/test-locks.c to hold `dntrace exceptions` and `dntrace locks`
// to. One line per (type, message), tab-separated (tabs and newlines in a message become spaces):
//   exc COUNT TYPE MESSAGE
// then the totals:
//   catches COUNT          ExceptionCatchStart events
//   contention STARTS STOPS DURATION_MS   DURATION_MS: the Stops' DurationNs summed, in ms
using System.Globalization;
using Microsoft.Diagnostics.Tracing;

static class ExcLocks
{
    public static string Print(string path)
    {
        using var source = new EventPipeEventSource(path);
        var groups = new Dictionary<(string, string), long>();
        long thrown = 0, catches = 0, starts = 0, stops = 0;
        double durationNs = 0;
        source.Clr.ExceptionStart += e =>
        {
            var key = (Flat(e.ExceptionType), Flat(e.ExceptionMessage));
            groups[key] = groups.GetValueOrDefault(key) + 1;
            thrown++;
        };
        source.Clr.ExceptionCatchStart += e => catches++;
        source.Clr.ContentionStart += e => starts++;
        source.Clr.ContentionStop += e =>
        {
            stops++;
            durationNs += e.DurationNs;
        };
        source.Process();
        foreach (var g in groups.OrderByDescending(g => g.Value).ThenBy(g => g.Key.Item1, StringComparer.Ordinal))
            Console.WriteLine($"exc\t{g.Value}\t{g.Key.Item1}\t{g.Key.Item2}");
        Console.WriteLine($"catches\t{catches}");
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "contention\t{0}\t{1}\t{2:F6}", starts, stops,
            durationNs / 1e6));
        return $"{thrown} exceptions, {stops} contention stops";
    }

    static string Flat(string? s) => (s ?? "").Replace('\t', ' ').Replace('\n', ' ').Replace('\r', ' ');
}
