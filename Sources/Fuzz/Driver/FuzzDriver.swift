import FuzzTargets
import Glibc

// Built with `--sanitize fuzzer -Xswiftc -DFUZZING` (`make fuzz`), libFuzzer drives the target
// named by HEALTHGATE_FUZZ. Built plainly, it runs files through a target: `healthgate-fuzz
// TARGET FILE|DIR...` (a finding's reproducer, or a whole corpus), and `healthgate-fuzz list`.

#if FUZZING
    let selected: FuzzTargets.Target = {
        let name = getenv("HEALTHGATE_FUZZ").map { String(cString: $0) } ?? ""
        guard let t = FuzzTargets.named(name) else {
            fatalError("HEALTHGATE_FUZZ must name a target: \(FuzzTargets.all.map(\.name).joined(separator: ", "))")
        }
        return t
    }()

    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        selected(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
        return 0
    }
#else
    @main
    struct FuzzDriver {
        static func main() {
            let args = Array(CommandLine.arguments.dropFirst())
            if args.first == "list" || args.isEmpty {
                for t in FuzzTargets.all { print("\(t.name)\t\(t.summary)") }
                exit(args.isEmpty ? 2 : 0)
            }
            guard let target = FuzzTargets.named(args[0]) else {
                print("no fuzz target \(args[0]); `healthgate-fuzz list` lists them")
                exit(2)
            }
            var count = 0
            for path in args.dropFirst() {
                for file in files(path) {
                    guard let bytes = read(file) else { print("cannot read \(file)"); exit(1) }
                    target(bytes)
                    count += 1
                }
            }
            print("\(target.name): \(count) inputs, no finding")
        }

        static func files(_ path: String) -> [String] {
            guard let dir = opendir(path) else { return [path] }
            defer { closedir(dir) }
            var out: [String] = []
            while let e = readdir(dir) {
                let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if !name.hasPrefix(".") { out.append(path + "/" + name) }
            }
            return out.sorted()
        }

        static func read(_ path: String) -> [UInt8]? {
            guard let f = fopen(path, "rb") else { return nil }
            defer { fclose(f) }
            var out: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = fread(&buffer, 1, buffer.count, f)
                if n <= 0 { break }
                out += buffer[..<n]
            }
            return out
        }
    }
#endif
