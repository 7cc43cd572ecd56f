using System;
using System.Collections.Generic;
using System.Diagnostics.Metrics;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

namespace Sample
{
    // Starts one named thread per part of the workload and joins them at the end.
    public sealed class Workers
    {
        private readonly Options _opts;
        private readonly CancellationToken _stop;
        private readonly List<Thread> _threads = new();

        public Workers(Options opts, CancellationToken stop)
        {
            _opts = opts;
            _stop = stop;
        }

        public void Start()
        {
            if (_opts.Cpu) Spawn("cpu-work", () => CpuWork.Run(_stop));
            if (_opts.Blocking) Spawn("blocking-work", () => BlockingWork.Run(_stop));
            if (_opts.Alloc) Spawn("alloc-work", () => AllocWork.Run(_stop));
            if (_opts.Exceptions) Spawn("exception-work", () => Faults.Run(_stop));
            if (_opts.Counters) Spawn("metrics-work", () => Telemetry.Run(_stop));
            if (_opts.EventRate > 0) Spawn("load-work", () => LoadWork.Run(_opts.EventRate, _stop));
            if (_opts.Handoff) Handoff.Start(this, _stop);
            for (int i = 1; i <= _opts.IdleThreads; i++) Spawn("idle-" + i, () => IdleWork.Park(_stop));
        }

        public void Join()
        {
            foreach (var t in _threads) t.Join();
        }

        public void Spawn(string name, ThreadStart body)
        {
            var t = new Thread(body) { Name = name, IsBackground = true };
            _threads.Add(t);
            t.Start();
        }
    }

    // Threads that only wait: many of them, for tools that list every thread's stack.
    public static class IdleWork
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Park(CancellationToken stop) => stop.WaitHandle.WaitOne();
    }

    public static class CpuWork
    {
        public static void Run(CancellationToken stop)
        {
            long total = 0;
            while (!stop.IsCancellationRequested)
            {
                total += CountPrimes(20000);
                Telemetry.WorkItem();
            }
            GC.KeepAlive(total);
        }

        // Deliberately naive trial division: pure CPU, no allocation, no waiting.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int CountPrimes(int limit)
        {
            int count = 0;
            for (int n = 2; n < limit; n++)
            {
                bool prime = true;
                for (int d = 2; d * d <= n; d++)
                {
                    if (n % d == 0) { prime = false; break; }
                }
                if (prime) count++;
            }
            return count;
        }
    }

    public static class BlockingWork
    {
        public static void Run(CancellationToken stop)
        {
            while (!stop.IsCancellationRequested) WaitLoop(stop);
        }

        // Mostly asleep: a profiler that samples thread time sees this thread as busy as cpu-work,
        // one that samples CPU sees it almost never.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void WaitLoop(CancellationToken stop)
        {
            for (int i = 0; i < 10 && !stop.IsCancellationRequested; i++)
            {
                Task.Delay(100).Wait();
                Thread.Sleep(50);
            }
        }
    }

    public static class AllocWork
    {
        public static void Run(CancellationToken stop)
        {
            var keep = new List<byte[]>();
            while (!stop.IsCancellationRequested)
            {
                Allocate(keep);
                Thread.Sleep(5);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Allocate(List<byte[]> keep)
        {
            for (int i = 0; i < 64; i++) keep.Add(new byte[1024 + i * 16]);
            keep.Add(new byte[100_000]); // a large-object-heap allocation now and then
            if (keep.Count > 4096) keep.Clear();
        }
    }

    public static class Faults
    {
        public static void Run(CancellationToken stop)
        {
            while (!stop.WaitHandle.WaitOne(TimeSpan.FromSeconds(2))) ThrowAndCatch();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void ThrowAndCatch()
        {
            try
            {
                throw new InvalidOperationException("sample exception, thrown on purpose");
            }
            catch (InvalidOperationException)
            {
                Telemetry.Failure();
            }
        }
    }

    public static class LoadWork
    {
        // Emits Sample-Load events at about `rate` per second, in batches so the pacing costs little.
        public static void Run(long rate, CancellationToken stop)
        {
            var clock = System.Diagnostics.Stopwatch.StartNew();
            long sent = 0;
            while (!stop.IsCancellationRequested)
            {
                long due = (long)(clock.Elapsed.TotalSeconds * rate);
                if (sent >= due)
                {
                    Thread.Sleep(1);
                    continue;
                }
                long batch = Math.Min(due - sent, 10_000);
                for (long i = 0; i < batch; i++) LoadEventSource.Log.Tick((int)(sent + i), "tick");
                sent += batch;
            }
        }
    }
}
