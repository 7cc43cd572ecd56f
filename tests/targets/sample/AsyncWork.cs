using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

namespace Sample
{
    // --async: a known chain of awaits for async stacks (issue 27). Thread async-driver starts
    // Outer, which awaits Middle, which awaits Inner; Inner awaits Task.Delay, then counts primes
    // for about 5 ms on whichever pool thread runs its continuation. A raw sample of that work
    // ends in the pool's dispatch loop; stitched, it sits under Outer and Middle. Inner also
    // throws and catches one AsyncWorkException there (InnerCheck), for the analyses that keep
    // events' stacks. Prints 'async N' (chains completed) every 250 ms.
    public static class AsyncWork
    {
        private static long _completed;

        public static void Run(CancellationToken stop)
        {
            var report = new Thread(() => Report(stop)) { Name = "async-report", IsBackground = true };
            report.Start();
            while (!stop.IsCancellationRequested)
            {
                Outer().GetAwaiter().GetResult();
                Interlocked.Increment(ref _completed);
            }
            report.Join();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task Outer()
        {
            await Middle();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task Middle()
        {
            await Inner();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static async Task Inner()
        {
            await Task.Delay(1);
            try
            {
                InnerCheck();
            }
            catch (AsyncWorkException)
            {
            }
            var clock = Stopwatch.StartNew();
            long total = 0;
            while (clock.Elapsed.TotalMilliseconds < 5) total += CpuWork.CountPrimes(2000);
            GC.KeepAlive(total);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        private static void InnerCheck() => throw new AsyncWorkException("the chain's check");

        private sealed class AsyncWorkException : Exception
        {
            public AsyncWorkException(string message) : base(message) { }
        }

        private static void Report(CancellationToken stop)
        {
            do
            {
                Console.WriteLine("async " + Interlocked.Read(ref _completed));
                Console.Out.Flush();
            } while (!stop.WaitHandle.WaitOne(TimeSpan.FromMilliseconds(250)));
        }
    }
}
