using System;
using System.Diagnostics.Metrics;
using System.Diagnostics.Tracing;
using System.Threading;

namespace Sample
{
    // EventSource "Sample-Counters" with the EventCounter "work-items".
    [EventSource(Name = "Sample-Counters")]
    public sealed class SampleCounters : EventSource
    {
        public static readonly SampleCounters Log = new();
        private EventCounter? _workItems;

        protected override void OnEventCommand(EventCommandEventArgs command)
        {
            if (command.Command == EventCommand.Enable && _workItems == null)
                _workItems = new EventCounter("work-items", this) { DisplayName = "Work Items", DisplayUnits = "items" };
        }

        public void WorkItems(double count) => _workItems?.WriteMetric(count);
    }

    // EventSource "Sample-Load": a small event for high-rate load tests.
    [EventSource(Name = "Sample-Load")]
    public sealed class LoadEventSource : EventSource
    {
        public static readonly LoadEventSource Log = new();

        [Event(1, Level = EventLevel.Informational)]
        public void Tick(int n, string s) => WriteEvent(1, n, s);
    }

    // The Meter "Sample.Meter": counter sample.requests and histogram sample.latency (ms).
    public static class Telemetry
    {
        private static readonly Meter Meter = new("Sample.Meter", "1.0");
        private static readonly Counter<long> Requests = Meter.CreateCounter<long>("sample.requests", "{request}", "Requests handled by the sample");
        private static readonly Histogram<double> Latency = Meter.CreateHistogram<double>("sample.latency", "ms", "Latency of the sample's requests");
        private static long _workItems;
        private static long _failures;

        public static void WorkItem() => Interlocked.Increment(ref _workItems);
        public static void Failure() => Interlocked.Increment(ref _failures);

        public static void Run(CancellationToken stop)
        {
            var rng = new Random(42);
            long lastWork = 0;
            while (!stop.WaitHandle.WaitOne(TimeSpan.FromMilliseconds(100)))
            {
                Requests.Add(rng.Next(1, 20), new System.Collections.Generic.KeyValuePair<string, object?>("route", rng.Next(2) == 0 ? "/a" : "/b"));
                for (int i = 0; i < 5; i++) Latency.Record(5 + rng.NextDouble() * 45);
                long work = Interlocked.Read(ref _workItems);
                SampleCounters.Log.WorkItems(work - lastWork + 1);
                lastWork = work;
            }
        }
    }
}
