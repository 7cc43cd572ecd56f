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
        private readonly Action _finish;
        private readonly List<Thread> _threads = new();

        // finish: ends the process's run (Main's wait), for a workload that has done all it was asked
        public Workers(Options opts, CancellationToken stop, Action finish)
        {
            _opts = opts;
            _stop = stop;
            _finish = finish;
        }

        public void Start()
        {
            if (_opts.Cpu) Spawn("cpu-work", () => CpuWork.Run(_stop));
            if (_opts.Blocking) Spawn("blocking-work", () => BlockingWork.Run(_stop));
            if (_opts.AllocType != null)
                Spawn("alloc-work", () =>
                {
                    RatedAlloc.Run(_opts.AllocType, _opts.AllocRate, _opts.AllocTotal, _stop);
                    if (_opts.AllocTotal > 0) _finish();
                });
            else if (_opts.Alloc) Spawn("alloc-work", () => AllocWork.Run(_stop));
            if (_opts.Exceptions) Spawn("exception-work", () => Faults.Run(_stop));
            if (_opts.Counters) Spawn("metrics-work", () => Telemetry.Run(_stop));
            if (_opts.EventRate > 0)
                Spawn("load-work", () =>
                {
                    if (StartFile.Wait(_opts.StartFile, _stop)) LoadWork.Run(_opts.EventRate, _stop);
                });
            if (_opts.Handoff) Handoff.Start(this, _stop);
            if (_opts.Async) Spawn("async-driver", () => AsyncWork.Run(_stop));
            if (_opts.HeapEntries >= 0)
            {
                HeapWork.Build(_opts.HeapEntries, _opts.HeapBytes);
                if (_opts.HeapGrowth > 0) Spawn("heap-growth", () => HeapWork.Grow(_opts.HeapGrowth, _stop));
            }
            if (_opts.StuckFinalizer > 0) FinalizerWork.Stick(_opts.StuckFinalizer);
            if (_opts.CatchPark) Spawn("catch-park", () => CatchPark.Run(_stop));
            for (int i = 1; i <= _opts.IdleThreads; i++) Spawn("idle-" + i, () => IdleWork.Park(_stop));
            if (_opts.GenericPark) Spawn("generic-park", () => GenericPark<long>.Wait(42L, "parked", _stop));
            if (_opts.PoolStarve) Spawn("pool-starve", () => PoolStarve.Run(_stop));
            if (_opts.ThrowRate > 0)
                Spawn("throw-work", () =>
                {
                    if (StartFile.Wait(_opts.StartFile, _stop))
                        ThrowWork.Run(_opts.ThrowRate, _opts.ThrowCount, _opts.ThrowDelay, _stop);
                });
            if (_opts.CrashAfter >= 0)
                Spawn("crash-work", () =>
                {
                    if (StartFile.Wait(_opts.StartFile, _stop)) ThrowWork.Crash(_opts.CrashAfter, _stop);
                });
            if (_opts.SpikeAt >= 0)
                Spawn("spike-burn", () =>
                {
                    if (StartFile.Wait(_opts.StartFile, _stop)) SpikeWork.Run(_opts.SpikeAt, _opts.SpikeFor, _opts.SpikeThreads, _opts.SpikeEvery, this, _stop);
                });
            if (_opts.Contend)
            {
                Spawn("contend-a", () => ContendWork.Run(_stop));
                Spawn("contend-b", () => ContendWork.Run(_stop));
                Spawn("contend-report", () => ContendWork.Report(_stop));
            }
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

    // --start-file: a workload that begins when a test says so (once its session runs), not at a
    // time the test would have to guess.
    public static class StartFile
    {
        // Waits for the file at path (none: at once); false when the process stops first.
        public static bool Wait(string? path, CancellationToken stop)
        {
            if (path == null) return true;
            while (!System.IO.File.Exists(path))
                if (stop.WaitHandle.WaitOne(10)) return false;
            return true;
        }
    }

    // --spike-at: an incident at a known time, for rules and the flight recorder: CPU, allocations
    // and a burst of exceptions in the middle.
    public static class SpikeWork
    {
        public static void Run(double delay, double length, int more, double every, Workers workers,
                               CancellationToken stop)
        {
            if (stop.WaitHandle.WaitOne(TimeSpan.FromSeconds(delay))) return;
            for (;;)
            {
                var began = DateTime.UtcNow;
                Once(length, more, workers, stop);
                if (every <= 0) return;
                var rest = began.AddSeconds(every) - DateTime.UtcNow;
                if (stop.WaitHandle.WaitOne(rest > TimeSpan.Zero ? rest : TimeSpan.Zero)) return;
            }
        }

        static void Once(double length, int more, Workers workers, CancellationToken stop)
        {
            Console.WriteLine("spike");
            Console.Out.Flush();
            var until = DateTime.UtcNow.AddSeconds(length);
            workers.Spawn("spike-alloc", () =>
            {
                while (DateTime.UtcNow < until && !stop.IsCancellationRequested) Churn();
            });
            for (int k = 0; k < more; k++)
                workers.Spawn("spike-burn-" + (k + 2), () =>
                {
                    long sum = 0;
                    while (DateTime.UtcNow < until && !stop.IsCancellationRequested) sum += Burn(5000);
                    GC.KeepAlive(sum);
                });
            var burst = DateTime.UtcNow.AddSeconds(1.5);
            bool thrown = false;
            long total = 0;
            while (DateTime.UtcNow < until && !stop.IsCancellationRequested)
            {
                total += Burn(5000);
                if (!thrown && DateTime.UtcNow >= burst)
                {
                    for (int i = 0; i < 10; i++) ThrowWork.Catch();
                    thrown = true;
                }
            }
            GC.KeepAlive(total);
            Console.WriteLine("spike over");
            Console.Out.Flush();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Burn(int n)
        {
            long x = 0;
            for (int i = 1; i < n; i++)
                for (int j = 1; j < 200; j++) x += (i * j) % 7;
            return x;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Churn()
        {
            int sum = 0;
            for (int i = 0; i < 100; i++) sum += new byte[1024].Length;
            return sum;
        }
    }

    // Threads that only wait: many of them, for tools that list every thread's stack.
    // --generic-park: a thread that waits inside a generic method of a generic class, so that a
    // core of the sample has a frame whose name carries both instantiations
    public static class GenericPark<T>
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Wait<U>(T value, U tag, CancellationToken stop)
        {
            GC.KeepAlive(value);
            GC.KeepAlive(tag);
            stop.WaitHandle.WaitOne();
        }
    }

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

    public static partial class AllocWork
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

    // Thread-pool starvation with a known cause: work items that block synchronously (Thread.Sleep
    // tells the pool nothing, unlike Task.Wait) for 5 s, arriving 10 a second: the few threads the
    // pool starts with dequeue nothing for longer than its gate thread tolerates, so it adds threads
    // (hill climbing's "Starvation" adjustments) until dequeues come often enough again (about 10
    // threads). ThreadPool.ThreadCount and PendingWorkItemCount are printed for a test to compare
    // with what the trace says.
    public static class PoolStarve
    {
        public static void Run(CancellationToken stop)
        {
            long n = 0;
            do
            {
                if (n % 2 == 0) ThreadPool.QueueUserWorkItem(_ => Block(), null);
                if (n++ % 5 == 0)
                {
                    Console.WriteLine("pool " + ThreadPool.ThreadCount + " queue " + ThreadPool.PendingWorkItemCount);
                    Console.Out.Flush();
                }
            } while (!stop.WaitHandle.WaitOne(TimeSpan.FromMilliseconds(50)));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Block() => Thread.Sleep(5000);
    }

    // The known answer of `dntrace exceptions`: exceptions of one type and message, thrown from one
    // method and caught in another, at a steady rate; with a count, exactly that many, then their
    // number printed.
    public sealed class SampleException : Exception
    {
        public const string Text = "thrown on purpose by Sample.ThrowWork.Fail";
        public SampleException() : base(Text) { }
    }

    public static class ThrowWork
    {
        public static void Run(double perSecond, long count, double delay, CancellationToken stop)
        {
            if (delay > 0 && stop.WaitHandle.WaitOne(TimeSpan.FromSeconds(delay))) return;
            var clock = System.Diagnostics.Stopwatch.StartNew();
            long thrown = 0;
            while (!stop.IsCancellationRequested && (count <= 0 || thrown < count))
            {
                long due = (long)(clock.Elapsed.TotalSeconds * perSecond) + 1;
                if (thrown >= due)
                {
                    Thread.Sleep(1);
                    continue;
                }
                if (Catch()) thrown++;
            }
            if (count > 0)
            {
                Console.WriteLine("thrown " + thrown);
                Console.Out.Flush();
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static bool Catch()
        {
            try
            {
                Fail();
                return false;
            }
            catch (SampleException)
            {
                return true;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Fail() => throw new SampleException();

        // The known answer of an unhandled exception: thrown from Fail, caught nowhere. The runtime
        // ends the process without flushing its tracing sessions: the handler gives a session the
        // time to receive the last events first.
        public static void Crash(double delay, CancellationToken stop)
        {
            if (stop.WaitHandle.WaitOne(TimeSpan.FromSeconds(delay))) return;
            AppDomain.CurrentDomain.UnhandledException += (_, _) => Thread.Sleep(1000);
            Fail();
        }
    }

    // The known answer of `dntrace locks`: two threads taking turns at one lock, each holding it
    // about 5 ms, so that each mostly waits for the other in HoldLock.
    public static class ContendWork
    {
        private static readonly object Gate = new();

        public static void Run(CancellationToken stop)
        {
            while (!stop.IsCancellationRequested) HoldLock();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void HoldLock()
        {
            lock (Gate)
            {
                Thread.Sleep(5);
            }
        }

        // The runtime's own count of contended waits (on any lock), for a test to know that some
        // happened while it recorded.
        public static void Report(CancellationToken stop)
        {
            do
            {
                Console.WriteLine("contention " + Monitor.LockContentionCount);
                Console.Out.Flush();
            } while (!stop.WaitHandle.WaitOne(TimeSpan.FromMilliseconds(250)));
        }
    }
}
