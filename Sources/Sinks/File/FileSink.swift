import CanonicalJSON
import Glibc
import HealthgateCore
import HealthgateCrypto
import Posix
import SinkKit
import YAMLConfig

/// Appends canonical records as NDJSON lines to files named by a path template, and fsyncs
/// every file it touched before it reports a batch accepted. A failed batch is cut back out of
/// each file, so a retry leaves no half line or partial copy behind.
public final class FileSink: Sink {
    public let name: String
    let template: PathTemplate
    /// The part of the path before its first placeholder: the directory the probe checks.
    let fixedDirectory: String
    let rotateBytes: Int64
    let logger: Logger
    let clock: any Clock

    private var open: [String: OpenFile] = [:]

    struct OpenFile {
        var fd: Int32
        var size: Int64
    }

    public init(
        name: String, pathTemplate: String, baseDir: String, rotateBytes: Int64, logger: Logger,
        clock: any Clock = SystemClock()
    ) {
        self.name = name
        let full = FileIO.join(baseDir, pathTemplate)
        self.template = PathTemplate(full)
        let fixed = full.firstIndex(of: "{").map { String(full[..<$0]) } ?? full
        self.fixedDirectory = fixed.hasSuffix("/") ? String(fixed.dropLast()) : FileIO.dirname(fixed)
        self.rotateBytes = rotateBytes
        self.logger = logger
        self.clock = clock
    }

    public static func build(name: String, node: YAMLNode, path: String, context: SinkBuildContext) throws(ConfigProblems) -> BuiltSink {
        let c = try YAMLDecoder().decode(FileSinkConfig.self, from: node, path: path)
        if c.path.isEmpty {
            throw ConfigProblems(problems: [
                ConfigProblem(
                    location: node.location, path: path + ".path",
                    message: "the file path must not be empty")
            ])
        }
        let unknown = RecordTemplate(c.path, allowed: PathTemplate.fields).unknown
        if !unknown.isEmpty {
            throw ConfigProblems(problems: [
                ConfigProblem(
                    location: node["path"]?.location ?? node.location, path: path + ".path",
                    message: RecordTemplate.problem(unknown, allowed: PathTemplate.fields))
            ])
        }
        let rotate = c.rotate_bytes?.bytes ?? FileSinkConfig.defaultRotateBytes
        let common = try SinkCommonConfig.checked(
            batch: c.batch, retry: c.retry, queue: c.queue, node: node, path: path,
            defaultMaxItems: 10_000)
        let template = c.path
        // It writes the journal's lines as they are: of a record it reads what names its file.
        return BuiltSink(kind: "file", common: common, summary: "file \(FileIO.join(context.dataDir, c.path))") { ctx in
            FileSink(
                name: ctx.name, pathTemplate: template, baseDir: ctx.dataDir, rotateBytes: rotate,
                logger: ctx.logger, clock: ctx.clock)
        }
    }

    /// A batch's lines by file, in record order within each file: what `write` appends.
    struct Files: Sendable {
        var files: [(path: String, indices: [Int], bytes: [UInt8])] = []
    }

    /// Groups the records by the file they go to and lays out each file's bytes. Consecutive
    /// records mostly share device, receiver and day: the path is rendered and looked up once a run.
    static func files(_ batch: SinkBatch, template: PathTemplate, today: String) -> Files {
        let records = batch.records
        var groups: [String: Int] = [:]
        var out = Files()
        var last: (key: PathTemplate.Key, group: Int)?
        for i in records.indices {
            let key = template.key(records[i])
            if let last, last.key == key {
                out.files[last.group].indices.append(i)
                continue
            }
            let path = template.render(records[i], fallbackDate: today)
            let g: Int
            if let existing = groups[path] {
                g = existing
            } else {
                g = out.files.count
                groups[path] = g
                out.files.append((path, [], []))
            }
            out.files[g].indices.append(i)
            last = (key, g)
        }
        for g in out.files.indices {
            var bytes: [UInt8] = []
            for i in out.files[g].indices { batch.appendLine(i, to: &bytes) }
            out.files[g].bytes = bytes
        }
        return out
    }

    /// The grouping and the bytes are made on the drainer's helper while the batch before is
    /// written: `write` is left with the files' writes and syncs.
    public var prepare: (@Sendable (SinkBatch) -> any Sendable)? {
        let (template, clock) = (template, clock)
        return { FileSink.files($0, template: template, today: clock.now().utcDate()) }
    }

    public func write(_ batch: SinkBatch) -> SinkWriteResult {
        let files = (batch.prepared as? Files) ?? FileSink.files(batch, template: template, today: clock.now().utcDate())
        // Written so far: open files still to fsync, and files already synced and closed (to
        // keep the number of open files bounded); on failure each is cut back to its old size.
        var written: [(path: String, sizeBefore: Int64)] = []
        var closedWritten: [(path: String, sizeBefore: Int64)] = []
        var changedDirs: Set<String> = []
        var rejected: [Int: String] = [:]
        do {
            for (path, indices, bytes) in files.files {
                if open.count >= FileSink.maxOpenFiles {
                    try sync(written.map(\.path))
                    closedWritten += written
                    written.removeAll()
                    closeAll()
                }
                let file: OpenFile
                do {
                    file = try prepare(path, changedDirs: &changedDirs)
                } catch  where error.isPermanent {
                    // This file can never be written (a name too long, say): its records go to
                    // the dead letters instead of blocking the sink forever.
                    for i in indices { rejected[i] = "cannot write \(path): \(error)" }
                    continue
                }
                written.append((path, file.size))
                try FileIO.writeAll(file.fd, bytes, path: path)
                open[path]!.size = file.size + Int64(bytes.count)
            }
            try sync(written.map(\.path))
            // New files and directories are durable only once their directory is.
            for dir in changedDirs { try FileIO.syncDirectory(dir) }
        } catch {
            for t in written {
                if let f = open[t.path] { _ = ftruncate(f.fd, off_t(t.sizeBefore)) }
            }
            for t in closedWritten { _ = truncate(t.path, off_t(t.sizeBefore)) }
            closeAll()
            return .keep(reason: "\(error)", retryAfterSeconds: nil)
        }
        if open.count > FileSink.maxOpenFiles { closeAll() }
        if rejected.isEmpty { return .accepted }
        return .perRecord((0..<batch.count).map { i in rejected[i].map { .rejected(reason: $0) } ?? .accepted })
    }

    /// Files kept open between batches (and within one, before they are synced and closed).
    static let maxOpenFiles = 64

    /// fsyncs the given open files.
    private func sync(_ paths: [String]) throws(IOError) {
        for p in paths {
            guard let f = open[p] else { continue }
            if fdatasync(f.fd) != 0 { throw IOError("fdatasync", p) }
            // Archives are written, not read: their synced pages need not stay cached.
            FileIO.releaseCache(f.fd)
        }
    }

    /// Opens the file for `path`, rotating it first when it is full, and notes the directories
    /// whose entries change.
    private func prepare(_ path: String, changedDirs: inout Set<String>) throws(IOError) -> OpenFile {
        var file = try openFile(path, changedDirs: &changedDirs)
        if file.size >= rotateBytes {
            try rotate(path)
            file = try openFile(path, changedDirs: &changedDirs)
        }
        return file
    }

    private func openFile(_ path: String, changedDirs: inout Set<String>) throws(IOError) -> OpenFile {
        if let f = open[path] { return f }
        let dir = FileIO.dirname(path)
        for created in try FileIO.makeDirectories(dir, mode: 0o750) { changedDirs.insert(FileIO.dirname(created)) }
        let existed = FileIO.exists(path)
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o640) // read: for a torn last line
        if fd < 0 { throw IOError("open", path) }
        if !existed { changedDirs.insert(dir) }
        var st = stat()
        fstat(fd, &st)
        var size = Int64(st.st_size)
        if size > 0 { size = try cutTornTail(fd, size: size, path: path) }
        let f = OpenFile(fd: fd, size: size)
        open[path] = f
        return f
    }

    /// A crash (SIGKILL, power loss) in the middle of a write can leave a partial last line.
    /// Those records were never reported delivered, so they are written again; the partial line
    /// is cut first, or the next line would be glued to it.
    private func cutTornTail(_ fd: Int32, size: Int64, path: String) throws(IOError) -> Int64 {
        var last: UInt8 = 0
        guard pread(fd, &last, 1, off_t(size - 1)) == 1, last != 0x0A else { return size }
        var end = size - 1
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var keep: Int64 = 0
        search: while end > 0 {
            let from = max(0, end - Int64(chunk.count))
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, Int(end - from), off_t(from)) }
            if n <= 0 { break }
            for i in stride(from: n - 1, through: 0, by: -1) where chunk[i] == 0x0A {
                keep = from + Int64(i) + 1
                break search
            }
            end = from
        }
        if ftruncate(fd, off_t(keep)) != 0 { throw IOError("ftruncate", path) }
        if fdatasync(fd) != 0 { throw IOError("fdatasync", path) }
        logger.warning(
            "\(path) ended in a partial line (\(size - keep) bytes, from a crash mid-write); cut it — "
                + "its records are written again")
        return keep
    }

    /// Renames `x.ndjson` to the first free `x.<n>.ndjson`.
    private func rotate(_ path: String) throws(IOError) {
        if let f = open.removeValue(forKey: path) { Glibc.close(f.fd) }
        let (stem, ext) = PathTemplate.splitExtension(path)
        var n = 1
        while FileIO.exists("\(stem).\(n)\(ext)") { n += 1 }
        if rename(path, "\(stem).\(n)\(ext)") != 0 { throw IOError("rename", path) }
        try FileIO.syncDirectory(FileIO.dirname(path))
        logger.info("rotated \(path) to \(stem).\(n)\(ext)")
    }

    private func closeAll() {
        for f in open.values { Glibc.close(f.fd) }
        open.removeAll()
    }

    public func close() { closeAll() }

    /// Reachable when the nearest existing directory of the fixed part of the path can be
    /// written (the rest is made on the first write).
    public func probe() -> Reachability {
        var dir = fixedDirectory
        while !FileIO.exists(dir) && dir != "/" && !dir.isEmpty { dir = FileIO.dirname(dir) }
        var st = stat()
        guard stat(dir, &st) == 0 else { return .unreachable("\(dir): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else { return .unreachable("\(dir) is not a directory") }
        guard access(dir, W_OK | X_OK) == 0 else { return .unreachable("\(dir) cannot be written by this user") }
        return .reachable
    }
}

/// A path with `{device}`, `{receiver}`, `{date}`, `{type}`, `{kind}` placeholders.
struct PathTemplate: Sendable {
    static let fields: [RecordTemplate.Field] = [.device, .receiver, .date, .type, .kind]

    let template: RecordTemplate

    init(_ template: String) {
        self.template = RecordTemplate(template, allowed: PathTemplate.fields)
    }

    /// What a rendered path depends on, for the placeholders this template uses.
    struct Key: Equatable {
        var device: String?
        var receiver: String?
        var day: Int64?
        var hasStart: Bool
        var type: String?
        var kind: String?
    }

    func key(_ r: Record) -> Key {
        var k = Key(hasStart: false)
        for case .field(let f) in template.parts {
            switch f {
            case .device, .phone: k.device = r.device
            case .receiver: k.receiver = r.receiver
            case .date:
                let start = r.start
                k.hasStart = start != nil
                k.day = start.map { ($0.seconds >= 0 ? $0.seconds : $0.seconds - 86_399) / 86_400 }
            case .type: k.type = r.type
            case .kind: k.kind = r.kind
            case .source, .unit: break // not allowed in a path
            }
        }
        return k
    }

    func render(_ r: Record, fallbackDate: String) -> String {
        template.render(r) { f, r in
            switch f {
            case .device, .phone: PathTemplate.safe(r.device)
            case .receiver: PathTemplate.safe(r.receiver)
            case .date: r.start?.utcDate() ?? fallbackDate
            case .type: PathTemplate.safe(r.type)
            case .kind: PathTemplate.safe(r.kind)
            case .source, .unit: "" // not allowed in a path
            }
        }
    }

    /// A value from a request, made harmless as one path component, and different values stay
    /// different files: `%XX` for `/`, `\\`, `%`, `~`, control characters, a leading `.` and the
    /// `.` of a trailing `.<digits>` (a rotated file's name); `%-` for an empty value; past ~200
    /// bytes a prefix, `~` and 32 hex digits of the whole value's SHA-256.
    static func safe(_ s: String) -> String {
        if s.isEmpty { return "%-" }
        let scalars = Array(s.unicodeScalars)
        // Where a trailing `.<digits>` starts, if the value ends in one.
        var rotatedDot = -1
        if let last = scalars.last, ("0"..."9").contains(last) {
            var i = scalars.count - 1
            while i >= 0 && ("0"..."9").contains(scalars[i]) { i -= 1 }
            if i >= 0 && scalars[i] == "." { rotatedDot = i }
        }
        var out = ""
        for (i, c) in scalars.enumerated() {
            if c == "/" || c == "\\" || c == "%" || c == "~" || c.value < 0x20 || c.value == 0x7F
                || (c == "." && (i == 0 || i == rotatedDot))
            {
                out +=
                    "%" + String(UInt8(c.value) >> 4, radix: 16, uppercase: true) + String(UInt8(c.value) & 0xF, radix: 16, uppercase: true)
            } else {
                out.unicodeScalars.append(c)
            }
        }
        if out.utf8.count > 200 {
            var prefix = ""
            for c in out.unicodeScalars {
                if prefix.utf8.count + String(c).utf8.count > 180 { break }
                prefix.unicodeScalars.append(c)
            }
            // Not cut inside an escape.
            if let pct = prefix.suffix(2).lastIndex(of: "%") { prefix = String(prefix[..<pct]) }
            out = prefix + "~" + Crypto.lowercaseHex(Array(Crypto.sha256(Array(s.utf8)).prefix(16)))
        }
        return out
    }

    static func splitExtension(_ path: String) -> (String, String) {
        let slash = path.lastIndex(of: "/") ?? path.startIndex
        if let dot = path[slash...].lastIndex(of: "."), dot > slash, path[slash...].count > 1 {
            return (String(path[..<dot]), String(path[dot...]))
        }
        return (path, "")
    }
}
