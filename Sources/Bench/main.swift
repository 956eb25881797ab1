import Foundation
import Gateway
import Glibc

// make bench: realistic 1 MB native bodies (~4,800 samples each) posted from several
// connections for a fixed time into `healthgate serve` with the file sink (fsync on).
// Prints samples/s, MB/s, p50/p99 time to 2xx, and the server's RSS idle and at peak.

struct BenchOptions {
    var binary = ".build/release/healthgate"
    var connections = 8
    var seconds = 10.0
    /// Samples per second for all connections together; 0 sends as fast as answers come back.
    var rate = 0.0
    var samplesPerBody = 4_800
    var micro = false
    /// `--only WORD`: the micro stages whose name holds WORD, run a few times (for callgrind).
    var only: String?
    var influx = false
    var mqtt = false
    var postgres = false
    var http = false
    var transforms = false
    /// `--copies N`: N more file sinks on the same route (the fan-out's cost; end to end is
    /// still the first sink's).
    var copies = 0
    /// `--soak SECONDS`: `make soak` (Soak.swift).
    var soak: Double?
    /// `--suite`: `make bench` (Suite.swift), narrowed by `--sinks`, `--bodies`, `--senders`.
    var suite: Suite.Plan?

    init(_ args: [String]) {
        var plan = Suite.Plan()
        var inSuite = false
        var i = 1
        while i < args.count {
            let v = i + 1 < args.count ? args[i + 1] : ""
            switch args[i] {
            case "--healthgate": binary = v
            case "--connections": connections = Int(v) ?? connections
            case "--seconds": seconds = Double(v) ?? seconds
            case "--rate": rate = Double(v) ?? rate
            case "--samples": samplesPerBody = Int(v) ?? samplesPerBody
            case "--micro": micro = true; i -= 1
            case "--only": only = v
            case "--influx": influx = true; i -= 1
            case "--mqtt": mqtt = true; i -= 1
            case "--postgres": postgres = true; i -= 1
            case "--http": http = true; i -= 1
            case "--transforms": transforms = true; i -= 1
            case "--copies": copies = Int(v) ?? copies
            case "--soak": soak = Double(v)
            case "--suite": inSuite = true; i -= 1
            case "--no-fleet": plan.fleet = false; inSuite = true; i -= 1
            case "--sinks": plan.sinks = Self.list(v, args[i], BenchSink.init(rawValue:))
            case "--bodies": plan.bodies = Self.list(v, args[i], Self.bytes)
            case "--senders": plan.senders = Self.list(v, args[i]) { Int($0) }
            case "--table": plan.table = v
            case "--readme": plan.readme = v
            case "--fluent-bit": plan.fluentBit = v
            case "--pairs": plan.pairs = Self.number(v, args[i])
            case "--help", "-h":
                print(Self.usage)
                exit(0)
            default:
                Self.fail("unknown option \(args[i])")
            }
            // Any of the suite's own options asks for the suite.
            if ["--sinks", "--bodies", "--senders", "--table", "--readme", "--fluent-bit", "--pairs"].contains(args[i]) { inSuite = true }
            i += 2
        }
        // The runs start `healthgate serve` from this path: say so now if nothing is there
        // (`--micro` runs in this process and needs none).
        if !micro && !FileManager.default.isExecutableFile(atPath: binary) {
            Self.fail(
                "no healthgate to run at \(binary) (build it: swift build -c release --product healthgate, or give --healthgate PATH)")
        }
        plan.binary = binary
        if args.contains("--seconds") { plan.seconds = seconds }
        suite = inSuite ? plan : nil
    }

    static let usage = """
        usage: healthgate-bench [--healthgate PATH] [options]
          one run (file sink unless said): --connections N  --seconds N  --samples N  --rate SAMPLES_PER_S
                                           --influx | --mqtt | --postgres | --http   --transforms   --copies N
          the hot path's stages on one core: --micro [--only WORD]   (MICRO_RUNS=N repeats each)
          the suite (make bench): --suite  --sinks file,influxdb,postgres,mqtt,http  --bodies 10KB,100KB,1MB
                                  --senders 1,8,64  --pairs N  --table FILE  --readme FILE  --fluent-bit PATH  --no-fleet
          make soak: --soak SECONDS
        """

    static func fail(_ why: String) -> Never {
        FileHandle.standardError.write(Data("healthgate-bench: \(why)\n\n\(usage)\n".utf8))
        exit(2)
    }

    static func number(_ v: String, _ option: String) -> Int {
        guard let n = Int(v), n >= 0 else { fail("\(option) wants a whole number, not \"\(v)\"") }
        return n
    }

    /// A comma-separated list, every item understood.
    static func list<T>(_ v: String, _ option: String, _ parse: (String) -> T?) -> [T] {
        v.split(separator: ",").map { item in
            guard let value = parse(String(item)) else { fail("\(option) does not know \"\(item)\"") }
            return value
        }
    }

    /// `10KB`, `100KB`, `1MB` (decimal, as the table says them).
    static func bytes(_ s: String) -> Int? {
        let u = s.uppercased()
        if u.hasSuffix("MB") { return Int(u.dropLast(2)).map { $0 * 1_000_000 } }
        if u.hasSuffix("KB") { return Int(u.dropLast(2)).map { $0 * 1_000 } }
        return Int(u)
    }
}

let benchOptions = BenchOptions(CommandLine.arguments)
if let plan = benchOptions.suite {
    Suite.run(plan)
} else if let seconds = benchOptions.soak {
    Soak.run(binary: benchOptions.binary, plan: Soak.Plan(seconds: seconds))
} else if benchOptions.micro {
    Micro.run(samples: benchOptions.samplesPerBody, only: benchOptions.only)
} else {
    BenchMain.run(benchOptions)
}
