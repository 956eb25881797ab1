import CCurl
import Glibc
import SinkKit

/// An HTTP client over libcurl for sinks: one reused handle (keep-alive, TLS session reuse),
/// owned by the sink's drainer thread (not `Sendable`). Redirects are never followed (a
/// redirect is a config problem: the data would go somewhere nobody configured).
public final class CurlClient {
    /// The host an http(s) URL names, as libcurl's URL parser reads it (an IPv6 address in
    /// brackets); nil for what it does not take as a URL.
    public static func host(ofURL url: String) -> String? {
        guard let u = curl_url() else { return nil }
        defer { curl_url_cleanup(u) }
        guard curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        var host: UnsafeMutablePointer<CChar>?
        guard curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK, let host else { return nil }
        defer { curl_free(host) }
        return String(cString: host)
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        public func header(_ name: String) -> String? {
            let n = name.lowercased()
            return headers.first { $0.name == n }?.value
        }

        public var bodyText: String { String(decoding: body.prefix(4096), as: UTF8.self) }
    }

    public struct TransportError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public struct Options: Sendable {
        public var timeoutSeconds: Double
        public var connectTimeoutSeconds: Double
        public var caFile: String?

        public init(timeoutSeconds: Double = 30, connectTimeoutSeconds: Double = 10, caFile: String? = nil) {
            self.timeoutSeconds = timeoutSeconds
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.caFile = caFile
        }
    }

    private var handle: UnsafeMutableRawPointer
    private let options: Options
    private var closed = false

    /// libcurl's global state, set up once before any handle.
    private static let global: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public init(options: Options = Options()) {
        _ = CurlClient.global
        handle = curl_easy_init()!
        self.options = options
    }

    deinit { if !closed { curl_easy_cleanup(handle) } }

    /// Closes the kept-alive connections. A later `send` opens new ones.
    public func close() {
        guard !closed else { return }
        curl_easy_cleanup(handle)
        closed = true
    }

    /// Connects to the URL's host (TLS included for https) and hangs up: whether it can be
    /// reached, without sending a request.
    public func probe(url: String) -> Reachability {
        guard let h = curl_easy_init() else { return .unknown }
        defer { curl_easy_cleanup(h) }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let rc: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { eb in
            _ = hg_curl_setopt_str(h, CURLOPT_URL, url)
            _ = hg_curl_setopt_long(h, CURLOPT_CONNECT_ONLY, 1)
            _ = hg_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1)
            _ = hg_curl_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeoutSeconds * 1000))
            _ = hg_curl_setopt_ptr(h, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(eb.baseAddress))
            if let ca = options.caFile { _ = hg_curl_setopt_str(h, CURLOPT_CAINFO, ca) }
            let rc = curl_easy_perform(h)
            // The buffer is this closure's: libcurl must not write to it after (on cleanup).
            _ = hg_curl_setopt_ptr(h, CURLOPT_ERRORBUFFER, nil)
            return rc
        }
        if rc == CURLE_OK { return .reachable }
        let detail = errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return .unreachable(detail.isEmpty ? String(cString: curl_easy_strerror(rc)) : detail)
    }

    /// Collects the response body and headers through libcurl's callbacks.
    final class Collector {
        var body: [UInt8] = []
        var headers: [(name: String, value: String)] = []
        let maxBody = 1 << 20
    }

    /// Sends `body` with `method` to `url`; a transport failure (no connection, TLS, timeout)
    /// throws, any HTTP status returns.
    public func send(_ method: String, url: String, headers: [(String, String)], body: [UInt8]) throws(TransportError) -> Response {
        if closed {
            handle = curl_easy_init()!
            closed = false
        }
        curl_easy_reset(handle)
        let sink = Collector()
        var list: UnsafeMutablePointer<curl_slist>?
        for (k, v) in headers { list = curl_slist_append(list, "\(k): \(v)") }
        // No "Expect: 100-continue" round trip for large bodies.
        list = curl_slist_append(list, "Expect:")
        defer { curl_slist_free_all(list) }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let rc: CURLcode = withExtendedLifetime(sink) {
            body.withUnsafeBytes { b in
                errorBuffer.withUnsafeMutableBufferPointer { eb in
                    _ = hg_curl_setopt_str(handle, CURLOPT_URL, url)
                    _ = hg_curl_setopt_str(handle, CURLOPT_CUSTOMREQUEST, method)
                    if method != "GET" {
                        _ = hg_curl_setopt_long(handle, CURLOPT_POST, 1)
                        _ = hg_curl_setopt_ptr(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: b.baseAddress))
                        _ = hg_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(b.count))
                    }
                    _ = hg_curl_setopt_ptr(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))
                    _ = hg_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
                    _ = hg_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
                    _ = hg_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(options.timeoutSeconds * 1000))
                    _ = hg_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeoutSeconds * 1000))
                    _ = hg_curl_setopt_str(handle, CURLOPT_USERAGENT, "healthgate")
                    _ = hg_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(eb.baseAddress))
                    if let ca = options.caFile { _ = hg_curl_setopt_str(handle, CURLOPT_CAINFO, ca) }
                    let ctx = Unmanaged.passUnretained(sink).toOpaque()
                    _ = hg_curl_setopt_writefn(handle, CurlCallbacks.body, ctx)
                    _ = hg_curl_setopt_headerfn(handle, CurlCallbacks.header, ctx)
                    let rc = curl_easy_perform(handle)
                    // The handle outlives this call (kept alive for the next request): nothing it
                    // holds may point at what goes with the call (the error buffer, the body,
                    // the header list), whatever libcurl does before the next `reset`.
                    _ = hg_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, nil)
                    _ = hg_curl_setopt_ptr(handle, CURLOPT_HTTPHEADER, nil)
                    if method != "GET" { _ = hg_curl_setopt_ptr(handle, CURLOPT_POSTFIELDS, nil) }
                    return rc
                }
            }
        }
        guard rc == CURLE_OK else {
            let detail = errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw TransportError(description: detail.isEmpty ? String(cString: curl_easy_strerror(rc)) : detail)
        }
        var status = 0
        _ = hg_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return Response(status: status, headers: sink.headers, body: sink.body)
    }
}

/// libcurl's data callbacks, outside main.swift so they are not main-actor isolated.
enum CurlCallbacks {
    static let body: hg_curl_data_cb = { data, size, count, ctx in
        guard let data, let ctx else { return 0 }
        let n = size * count
        let sink = Unmanaged<CurlClient.Collector>.fromOpaque(ctx).takeUnretainedValue()
        // Keep the first megabyte of an error body; the rest is read and dropped.
        let room = max(0, sink.maxBody - sink.body.count)
        if room > 0 {
            data.withMemoryRebound(to: UInt8.self, capacity: n) {
                sink.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: min(n, room)))
            }
        }
        return n
    }

    static let header: hg_curl_data_cb = { data, size, count, ctx in
        guard let data, let ctx else { return 0 }
        let n = size * count
        let sink = Unmanaged<CurlClient.Collector>.fromOpaque(ctx).takeUnretainedValue()
        let line = data.withMemoryRebound(to: UInt8.self, capacity: n) {
            String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
        }
        if line.hasPrefix("HTTP/") { sink.headers.removeAll() } // a new response (after 100 Continue)
        if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            var value = line[line.index(after: colon)...]
            while value.first == " " || value.first == "\t" { value.removeFirst() }
            // ("\r\n" is one Character in Swift, so test for line breaks, not for "\r" and "\n".)
            while let c = value.last, c.isNewline || c == " " || c == "\t" { value.removeLast() }
            sink.headers.append((name, String(value)))
        }
        return n
    }
}
