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
    var transforms = false
    /// `--soak SECONDS`: `make soak` (Soak.swift).
    var soak: Double?

    init(_ args: [String]) {
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
            case "--transforms": transforms = true; i -= 1
            case "--soak": soak = Double(v)
            default: break
            }
            i += 2
        }
    }
}

let benchOptions = BenchOptions(CommandLine.arguments)
if let seconds = benchOptions.soak {
    Soak.run(binary: benchOptions.binary, plan: Soak.Plan(seconds: seconds))
} else if benchOptions.micro { Micro.run(samples: benchOptions.samplesPerBody, only: benchOptions.only) } else { BenchMain.run(benchOptions) }
