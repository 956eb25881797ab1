import Glibc

/// A failed system call, with the path and what the OS said.
public struct IOError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var code: Int32

    public init(_ operation: String, _ path: String, code: Int32 = errno) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    public var isNoSpace: Bool { code == ENOSPC || code == EDQUOT }

    /// Errors that the same call will meet again however often it is retried (a name too long,
    /// a file where a directory should be): retrying cannot help.
    public var isPermanent: Bool {
        code == ENAMETOOLONG || code == ENOTDIR || code == EISDIR || code == EINVAL || code == ELOOP
    }

    public var description: String {
        "\(operation) \(path): \(String(cString: strerror(code)))"
    }
}

/// Small, explicit file helpers over POSIX calls: every durable write says where it fsyncs.
public enum FileIO {
    /// Creates a directory and its parents (like `mkdir -p`); returns the ones it created,
    /// outermost first (their parents need an fsync for the new entries to be durable).
    @discardableResult
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(IOError) -> [String] {
        if path.isEmpty || isDirectory(path) { return [] }
        var created: [String] = []
        let parent = dirname(path)
        if parent != path { created = try makeDirectories(parent, mode: mode) }
        if mkdir(path, mode) == 0 {
            created.append(path)
        } else if errno != EEXIST {
            throw IOError("mkdir", path)
        }
        return created
    }

    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    public static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    public static func fileSize(_ path: String) -> Int? {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : nil
    }

    public static func dirname(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// `path` from the root: as it is when it starts with "/", else under the working directory
    /// (not resolved further: a path that does not exist yet stays as named).
    public static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        guard let cwd = getcwd(nil, 0) else { return path }
        defer { free(cwd) }
        var rest = Substring(path)
        while rest.hasPrefix("./") { rest = rest.dropFirst(2) }
        return rest.isEmpty || rest == "." ? String(cString: cwd) : join(String(cString: cwd), String(rest))
    }

    public static func join(_ a: String, _ b: String) -> String {
        if b.hasPrefix("/") || a.isEmpty { return b }
        return a.hasSuffix("/") ? a + b : a + "/" + b
    }

    /// The names in a directory, without `.` and `..`, sorted.
    public static func list(_ path: String) throws(IOError) -> [String] {
        guard let dir = opendir(path) else { throw IOError("opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    public static func readAll(_ path: String) throws(IOError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw IOError("open", path) }
        defer { close(fd) }
        var out = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError("read", path)
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
        }
        return out
    }

    /// Writes every byte, retrying short writes and EINTR.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(IOError) {
        var off = 0
        while off < bytes.count {
            let n = write(fd, bytes.baseAddress! + off, bytes.count - off)
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError("write", path)
            }
            off += n
        }
    }

    /// Writes every byte of an array (see the pointer version).
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(IOError) {
        let failure: IOError? = bytes.withUnsafeBytes { p in
            do throws(IOError) { try writeAll(fd, p, path: path) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    /// Replaces `path` with `bytes` durably: write a temporary file, fsync it, rename it over
    /// `path`, fsync the directory. A crash leaves either the old or the new content.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws(IOError) {
        let tmp = path + ".tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        if fd < 0 { throw IOError("open", tmp) }
        do throws(IOError) {
            try writeAll(fd, bytes, path: tmp)
            if fsync(fd) != 0 { throw IOError("fsync", tmp) }
        } catch {
            close(fd)
            unlink(tmp)
            throw error
        }
        close(fd)
        if rename(tmp, path) != 0 { throw IOError("rename", path) }
        try syncDirectory(dirname(path))
    }

    /// Lets the kernel drop the cached pages of a file's synced bytes (`POSIX_FADV_DONTNEED`),
    /// for files written and never read back here (the file sink's archives, passed journal
    /// segments), as PostgreSQL does with WAL segments: their pages would otherwise pile up in
    /// the page cache, pushing out what other programs read, and every new page costs the
    /// kernel an allocation (dear on a VM that hands free pages back to its host). Synced
    /// first: dirty pages are not dropped. From `offset`, `count` bytes (0: to the end); pages
    /// only partly in the range stay. Advice only: a failure changes nothing.
    public static func releaseCache(_ fd: Int32, offset: Int = 0, count: Int = 0) {
        _ = posix_fadvise(fd, off_t(offset), off_t(count), POSIX_FADV_DONTNEED)
    }

    /// How many of a file's pages are in the page cache, and how many it has (mincore over a
    /// mapping of it): what `releaseCache` let go, for tests and diagnostics. Nil when the file
    /// cannot be opened or mapped (an empty file has no pages).
    public static func cachedPages(_ path: String) -> (cached: Int, pages: Int)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        let size = Int(st.st_size)
        if size == 0 { return (0, 0) }
        guard let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { return nil }
        defer { munmap(map, size) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var resident = [UInt8](repeating: 0, count: (size + page - 1) / page)
        guard mincore(map, size, &resident) == 0 else { return nil }
        return (resident.reduce(0) { $0 + Int($1 & 1) }, resident.count)
    }

    public static func syncDirectory(_ path: String) throws(IOError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 { throw IOError("open", path) }
        defer { close(fd) }
        if fsync(fd) != 0 { throw IOError("fsync", path) }
    }
}

extension FileIO {
    /// Appends `bytes` to `path` (created 0600 if missing) and fsyncs it.
    public static func append(_ path: String, _ bytes: [UInt8]) throws(IOError) {
        try makeDirectories(dirname(path), mode: 0o700)
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        if fd < 0 { throw IOError("open", path) }
        defer { close(fd) }
        try writeAll(fd, bytes, path: path)
        if fdatasync(fd) != 0 { throw IOError("fdatasync", path) }
    }
}
