import Foundation
import Glibc

/// What the kernel says about a process's files and sockets, from /proc: for tests that check
/// who listens on a port, and that a closed sink holds no file or connection.
enum ProcFS {
    /// A /proc file whole (it has no size to read up to: read until the end).
    static func read(_ path: String) -> String {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Where each open file descriptor of the process leads (`self`, or a pid).
    static func openFiles(of pid: String = "self") -> [String] {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
    }

    static func socketInodes(of pid: String = "self") -> Set<String> {
        Set(
            openFiles(of: pid).compactMap { link in
                link.hasPrefix("socket:[") ? String(link.dropFirst(8).dropLast()) : nil
            })
    }

    struct TCPSocket {
        var localPort: UInt16
        var remotePort: UInt16
        /// The kernel's state in hex: `01` established, `0A` listening.
        var state: String
        var inode: String
    }

    /// Every TCP socket of the machine (IPv4 and IPv6).
    static func tcpSockets() -> [TCPSocket] {
        var out: [TCPSocket] = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            for line in read(table).split(separator: "\n").dropFirst() {
                let f = line.split(separator: " ")
                guard f.count > 9, let local = f[1].split(separator: ":").last.flatMap({ UInt16($0, radix: 16) }),
                    let remote = f[2].split(separator: ":").last.flatMap({ UInt16($0, radix: 16) })
                else { continue }
                out.append(TCPSocket(localPort: local, remotePort: remote, state: String(f[3]), inode: String(f[9])))
            }
        }
        return out
    }
}
