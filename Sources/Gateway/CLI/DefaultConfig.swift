import HealthgateCrypto
import Glibc
import HealthgateCore
import Posix

/// The config `serve` runs with when there is none: every receiver on its default path with
/// one token and one HMAC secret (made once, kept in the data dir with mode 0600), everything
/// archived as NDJSON under the data dir.
enum DefaultConfig {
    static func env(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        let s = String(cString: v)
        return s.isEmpty ? nil : s
    }

    static var dataDir: String { env("HEALTHGATE_DATA_DIR") ?? ConfigLoader.defaultDataDir }

    static func embedded(_ use: ConfigSource.Credentials) throws -> String {
        let listen = env("HEALTHGATE_LISTEN") ?? ConfigLoader.defaultListen
        let (token, secret): (String, String)
        if let kept = try kept(dataDir: dataDir) {
            (token, secret) = kept
        } else {
            switch use {
            case .make: (token, secret) = try credentials(dataDir: dataDir)
            case .standIn: (token, secret) = ("hg_made-by-serve-on-its-first-start", "whsec_made-by-serve-on-its-first-start")
            case .existing:
                throw UsageError(
                    "no gateway runs from here: \(FileIO.join(FileIO.absolute(dataDir), "credentials")) does not exist "
                        + "(with no config, `healthgate serve` makes the token and secret there, in ./healthgate-data of the directory "
                        + "it runs in). Run this command in serve's directory, or name serve's config (--config FILE or "
                        + "HEALTHGATE_CONFIG) or data dir (HEALTHGATE_DATA_DIR); no credentials were made")
            }
        }
        return render(listen: listen, dataDir: dataDir, token: token, secret: secret)
    }

    /// The token and secret kept in `<data_dir>/credentials`, if there are some.
    static func kept(dataDir: String) throws -> (String, String)? {
        FileIO.exists(FileIO.join(dataDir, "credentials")) ? try credentials(dataDir: dataDir) : nil
    }

    static func render(listen: String, dataDir: String, token: String, secret: String) -> String {
        """
        # healthgate config. Reference: docs/configuration.md.
        listen: "\(listen)"
        data_dir: "\(dataDir)"
        receivers:
          syncky:
            kind: syncky
            path: /syncky
            auth: {type: bearer, token: "\(token)"}
            devices: first_seen      # bound to the first phone that writes; see docs/security.md
            hmac: {secret: "\(secret)"}
            name: healthgate
          health-auto-export:
            kind: hae
            path: /api/data
            auth: {type: bearer, token: "\(token)"}
            devices: first_seen      # bound to the first phone that writes; see docs/security.md
          influx:
            kind: influx
            path: /api/v2/write      # answers /write too
            auth: {type: bearer, token: "\(token)"}   # Authorization: Token … or Bearer …
            devices: first_seen
          ingest:
            kind: ingest
            path: /v1/ingest
            auth: {type: bearer, token: "\(token)"}
            devices: first_seen      # bound to the first phone that writes; see docs/security.md
          healthsync:
            kind: healthsync
            path: /api/apple-health/sync
            auth: {type: bearer, token: "\(token)"}
            devices: first_seen      # bound to the first phone that writes; see docs/security.md
        routes:
          - name: archive
            from: ["*"]
            to: [archive]
        sinks:
          archive: {kind: file, path: "archive/{device}/{date}.ndjson"}

        """
    }

    /// The default token and secret: read from `<data_dir>/credentials`, or made and kept there.
    static func credentials(dataDir: String) throws -> (String, String) {
        let path = FileIO.join(dataDir, "credentials")
        if FileIO.exists(path) {
            var token: String?
            var secret: String?
            for line in String(decoding: try FileIO.readAll(path), as: UTF8.self).split(separator: "\n") {
                let parts = line.split(separator: " ", maxSplits: 1)
                guard parts.count == 2 else { continue }
                if parts[0] == "token:" { token = String(parts[1]) }
                if parts[0] == "hmac:" { secret = String(parts[1]) }
            }
            if let token, let secret { return (token, secret) }
            throw UsageError("\(path) is damaged: it needs a `token:` and an `hmac:` line (delete it to make new ones)")
        }
        try FileIO.makeDirectories(dataDir, mode: 0o700)
        let token = Crypto.newToken()
        let secret = Crypto.newHMACSecret()
        try FileIO.writeAtomically(path, Array("token: \(token)\nhmac: \(secret)\n".utf8), mode: 0o600)
        return (token, secret)
    }
}
