// The web target: `dotnet new web` with the endpoints of a small real service. It listens on
// 127.0.0.1 at the port the kernel gives (or --port N), and prints "pid N", "port N" and "ready"
// (and writes the port to --port-file PATH first, for a test that reads no further than "ready");
// Kestrel's own logging is off, so that stdout carries those lines alone.
using System.Runtime.CompilerServices;
using System.Text;
using Web;

int port = 0;
string? portFile = null;
for (int i = 0; i < args.Length; i++)
{
    if (args[i] == "--port" && i + 1 < args.Length && int.TryParse(args[i + 1], out port)) i++;
    else if (args[i] == "--port-file" && i + 1 < args.Length) portFile = args[++i];
    else
    {
        Console.Error.WriteLine("web: usage: web [--port N] [--port-file PATH]");
        return 2;
    }
}

Console.WriteLine("pid " + Environment.ProcessId);
Console.Out.Flush();

var builder = WebApplication.CreateSlimBuilder();
builder.Logging.ClearProviders();
builder.WebHost.UseKestrelCore();
builder.WebHost.ConfigureKestrel(k => k.Listen(System.Net.IPAddress.Loopback, port));
var app = builder.Build();

app.MapGet("/json", () => Results.Json(new Reply(Environment.TickCount64, "ok", [1, 2, 3]), ReplyJson.Default.Reply));
app.MapGet("/work", async () => Results.Text((await Work.Chain(20000)).ToString()));
app.MapGet("/big", () => Results.Text(Big.Text()));
app.MapGet("/order/{id:long}", (long id) => Orders.Handle(id));

// A thread that only waits for the shutdown, as a service's signal listener does: it runs no
// managed code once it is waiting (before "ready"), so every trace has a thread that only waits
// (the views' test hides it with --hide-idle); the pool's and Kestrel's own waiting threads wake
// now and then, and a busy machine's sampler can catch each of them awake.
using var waiting = new ManualResetEventSlim();
var listener = new Thread(() =>
{
    WaitHandle stopping = app.Lifetime.ApplicationStopping.WaitHandle;
    waiting.Set();
    stopping.WaitOne();
}) { IsBackground = true, Name = "shutdown-listener" };
listener.Start();
waiting.Wait();
await app.StartAsync();
var bound = app.Urls.Select(u => new Uri(u).Port).FirstOrDefault();
if (portFile != null) File.WriteAllText(portFile, bound + "\n");
Console.WriteLine("port " + bound);
Console.WriteLine("ready");
Console.Out.Flush();
await app.WaitForShutdownAsync();
return 0;

namespace Web
{
    public sealed record Reply(long Tick, string Status, int[] Items);

    [System.Text.Json.Serialization.JsonSerializable(typeof(Reply))]
    public sealed partial class ReplyJson : System.Text.Json.Serialization.JsonSerializerContext { }

    public sealed class OrderStateException(string message) : InvalidOperationException(message) { }

    public static class Orders
    {
        // Every order is in the wrong state: one throw site whose messages all differ by the id.
        public static IResult Handle(long id)
        {
            try
            {
                Ship(id);
                return Results.Ok();
            }
            catch (OrderStateException e)
            {
                return Results.Conflict(e.Message);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Ship(long id) => throw new OrderStateException($"order {id} is not in a state to ship");
    }

    public static class Work
    {
        // CPU work between awaits: the continuations run on whichever pool thread is free.
        public static async Task<int> Chain(int limit)
        {
            await Task.Yield();
            int a = Primes(limit);
            await Task.Delay(1);
            return a + Primes(limit / 2);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Primes(int limit)
        {
            int n = 0;
            for (int i = 2; i < limit; i++)
            {
                bool prime = true;
                for (int d = 2; d * d <= i; d++)
                    if (i % d == 0) { prime = false; break; }
                if (prime) n++;
            }
            return n;
        }
    }

    public static class Big
    {
        // 200,000 characters: a 400 KB string on the large-object heap for every request.
        public static string Text()
        {
            var sb = new StringBuilder(200_000);
            while (sb.Length < 200_000) sb.Append("0123456789abcdef");
            return sb.ToString(0, 200_000);
        }
    }
}
