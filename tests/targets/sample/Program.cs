// The sample .NET target: a process with known hot paths, waits, allocations, exceptions,
// counters and metrics, so every dntrace test and the demo know what they should find.
using System;
using System.Threading;

namespace Sample
{
    public static class Program
    {
        public static int Main(string[] args)
        {
            Options opts;
            try
            {
                opts = Options.Parse(args);
            }
            catch (ArgumentException e)
            {
                Console.Error.WriteLine("Sample: " + e.Message);
                return 2;
            }
            if (opts.Help)
            {
                Console.WriteLine(Options.Usage);
                return 0;
            }

            // first: a session may attach as soon as the runtime runs (serve follows a restart by name)
            EventSourcesFirst();
            Console.WriteLine("pid " + Environment.ProcessId);
            Console.Out.Flush();

            // never disposed: ProcessExit may still cancel it while Main returns
            var stop = new CancellationTokenSource();
            AppDomain.CurrentDomain.ProcessExit += (_, _) => stop.Cancel();
            Console.CancelKeyPress += (_, e) => { e.Cancel = true; stop.Cancel(); };

            var workers = new Workers(opts, stop.Token, stop.Cancel);
            workers.Start();
            for (int i = 0; i < opts.Gen2; i++) GC.Collect(2, GCCollectionMode.Forced, blocking: true);
            Console.WriteLine("ready");
            Console.Out.Flush();
            if (opts.Gen2 >= 0) workers.Spawn("gc-report", () => GcReport(stop.Token));
            if (opts.GcInduce > 0) workers.Spawn("gc-induce", () => GcInduce(opts.GcInduce, opts.GcBackground, stop.Token));

            if (opts.Seconds > 0)
                stop.Token.WaitHandle.WaitOne(TimeSpan.FromSeconds(opts.Seconds));
            else
                stop.Token.WaitHandle.WaitOne();
            stop.Cancel();
            workers.Join();
            if (opts.AllocType != null) RatedAlloc.Report(opts.AllocType);
            return opts.ExitCode;
        }

        // "ready" promises that a session can start. A session's enable callbacks run on the runtime's
        // diagnostic server thread while it holds EventListenersLock; an EventSource that one of them
        // (or the counter poller they start) creates for the first time waits for that lock in its
        // static constructor, and the callback waits for the constructor: the runtime never answers
        // the session (.NET 10.0.12 and ArrayPoolEventSource, dotnet/runtime#119014, fixed upstream by
        // creating it at startup, #131501; about 1 in 100 counters sessions on a loaded machine).
        // So those EventSources are made here, first thing in Main, before the workers run (a tool that
        // follows the process by name, as `serve -n` does, attaches without waiting for "ready").
        private static void EventSourcesFirst()
        {
            System.Buffers.ArrayPool<char>.Shared.Return(System.Buffers.ArrayPool<char>.Shared.Rent(1));
            System.Threading.Tasks.Task.Run(() => { }).Wait();
            System.Threading.Tasks.Task.Delay(1).Wait();
            GC.KeepAlive(SampleCounters.Log);
            System.Runtime.CompilerServices.RuntimeHelpers.RunClassConstructor(typeof(Telemetry).TypeHandle);
        }

        // Induced collections at a steady rate, each followed by its number (GC.CollectionCount(0)
        // counts every GC, so right after GC.Collect it is the number of that collection): the
        // known answer of `dntrace gc` on this process.
        // With background, every other one is a background gen2 GC (not blocking): the kind whose
        // pause is not its length; and the number of the latest background GC that has ended, so that a
        // test knows one did while it recorded.
        private static void GcInduce(double perSecond, bool background, CancellationToken stop)
        {
            var period = TimeSpan.FromSeconds(1 / perSecond);
            long n = 0;
            do
            {
                if (background && n++ % 2 == 1)
                    GC.Collect(2, GCCollectionMode.Forced, blocking: false);
                else
                    GC.Collect();
                Console.WriteLine("induced " + GC.CollectionCount(0));
                if (background) Console.WriteLine("bgc " + GC.GetGCMemoryInfo(GCKind.Background).Index);
                Console.Out.Flush();
            } while (!stop.WaitHandle.WaitOne(period));
        }

        // The runtime's own gen2 count, read here in the process, beside what the metrics report.
        private static void GcReport(CancellationToken stop)
        {
            do
            {
                Console.WriteLine("gen2 " + GC.CollectionCount(2));
                Console.Out.Flush();
            } while (!stop.WaitHandle.WaitOne(TimeSpan.FromMilliseconds(250)));
        }
    }
}
